# Type hints of the attnbatch package (the docstrings are in __init__.py).
import os
from typing import Any, Literal, Mapping, Optional, Union, overload

import numpy as np
import numpy.typing as npt

from ._errors import (AttnbatchError as AttnbatchError, FileError as FileError,
                      InternalError as InternalError, InvalidInputError as InvalidInputError,
                      Interrupted as Interrupted, UsageError as UsageError)
from ._output import Output as Output

FloatArray = npt.NDArray[Union[np.float32, np.float16]]
Projections = Union[Mapping[str, npt.ArrayLike], str, os.PathLike[str]]

def attention(x_or_q: FloatArray, k: Optional[FloatArray] = None, v: Optional[FloatArray] = None, *,
              heads: int = 1, kv_heads: Optional[int] = None, causal: bool = False,
              lengths: Optional[npt.ArrayLike] = None, scale: Optional[float] = None,
              rope_theta: Optional[float] = None, precision: Literal["fp32", "bf16"] = "fp32",
              projections: Optional[Projections] = None, threads: Optional[int] = None,
              return_lse: bool = False, return_maps: Optional[Literal["all", "mean"]] = None,
              maps_dtype: Union[str, np.dtype[Any], type] = "float32"
              ) -> Union[npt.NDArray[np.float32], tuple[npt.NDArray[Any], ...]]: ...

def run(input: Union[str, os.PathLike[str]], output: Union[str, os.PathLike[str]], *,
        comm: Optional[Any] = None, **options: Any) -> str: ...

def open(path: Union[str, os.PathLike[str]], *, split: bool = False, maps: bool = True) -> Output: ...

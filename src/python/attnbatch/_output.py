"""Reading a run's output back: its datasets as numpy arrays, its provenance as a dict.

Pure Python over h5py (Debian's python3-h5py): the output is plain HDF5 whose schema is
documented (docs/formats.md), h5py is the maintained reader of it, and reading it needs
neither the compiled core nor MPI, so results open anywhere numpy and h5py do.
"""

import os

import numpy as np

from ._errors import FileError, InvalidInputError


def _plain(value):
    """An HDF5 attribute as a plain Python value."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.dtype.kind in "SO" else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


class Output:
    """An attnbatch output file, read whole.

    Attributes:
      output     float32 [N, L, D_out] (padded) or [T, D_out] (packed); with split=True a
                 list of N arrays [len_n, D_out], each sequence's valid rows
      lse        float32 [N, H, L] or [H, T]; split: a list of [H, len_n]
      lengths    int32 [N]
      offsets    int64 [N+1] for a packed output (sequence n is rows offsets[n]:offsets[n+1]),
                 else None
      attention  float32 or float16 [N_w, H, L, L] ([N_w, 1, L, L] for mean maps), or None
      attention_first  the input sequence of attention[0] (its attribute first_sequence)
      attrs      the root attributes: the provenance (format, input, options, versions, ...)
      packed     whether the output has the packed layout
    """

    def __init__(self, path, split=False, maps=True):
        import h5py

        self.path = str(path)
        try:
            f = h5py.File(self.path, "r")
        except OSError as error:
            # As the command line tells them apart: a file that cannot be read is exit 4, one
            # that reads but is not HDF5 is invalid input (exit 3).
            readable = os.path.isfile(self.path) and os.access(self.path, os.R_OK)
            if readable and not h5py.is_hdf5(self.path):
                raise InvalidInputError("%s is not an HDF5 file (expected an attnbatch output)" % self.path) from None
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise FileError("%s: cannot open: %s" % (self.path, reason)) from None
        with f:
            missing = [name for name in ("output", "lse", "lengths") if not isinstance(f.get(name), h5py.Dataset)]
            if missing:
                raise InvalidInputError("%s is not an attnbatch output: no dataset /%s (expected /output, /lse and "
                                        "/lengths, as run writes them)" % (self.path, missing[0]))
            self.attrs = {name: _plain(value) for name, value in f.attrs.items()}
            self.output = f["output"][()]
            self.lse = f["lse"][()]
            self.lengths = f["lengths"][()]
            self.offsets = f["offsets"][()] if "offsets" in f else None
            self.attention, self.attention_first = None, None
            self._attention_mean = False
            if maps and "attention" in f:
                self.attention = f["attention"][()]
                self.attention_first = int(f["attention"].attrs.get("first_sequence", 0))
                self._attention_mean = bool(f["attention"].attrs.get("mean_over_heads", 0))
        self.packed = self.offsets is not None
        if split:
            self.output, self.lse = self._split(self.output, self.lse)

    def _split(self, output, lse):
        outputs, lses = [], []
        for n, length in enumerate(self.lengths.tolist()):
            if self.packed:
                first, last = int(self.offsets[n]), int(self.offsets[n + 1])
                outputs.append(output[first:last])
                lses.append(lse[:, first:last])
            else:
                outputs.append(output[n, :length])
                lses.append(lse[n, :, :length])
        return outputs, lses

    def to_xarray(self):
        """The output as an xarray.Dataset with the dims the file's dimension scales name (N, L,
        D_out, H, L_k; N_w and H_mean for maps of a subset or the mean; T and N+1 when packed:
        docs/formats.md), the provenance as its attrs. Needs xarray (python3-xarray) and an
        Output read without split."""
        import xarray

        if isinstance(self.output, list):
            raise ValueError("to_xarray() needs the output read whole: open(path) without split=True")
        if self.packed:
            data = {"output": (("T", "D_out"), self.output), "lse": (("H", "T"), self.lse),
                    "offsets": (("N+1",), self.offsets)}
        else:
            data = {"output": (("N", "L", "D_out"), self.output), "lse": (("N", "H", "L"), self.lse)}
        data["lengths"] = (("N",), self.lengths)
        if self.attention is not None:
            every_sequence = self.attention.shape[0] == len(self.lengths)
            data["attention"] = (("N" if every_sequence else "N_w", "H_mean" if self._attention_mean else "H", "L", "L_k"),
                                 self.attention)
        return xarray.Dataset(data, attrs=dict(self.attrs))

    def __repr__(self):
        shape = [len(self.output)] if isinstance(self.output, list) else list(self.output.shape)
        maps = "none" if self.attention is None else f"{list(self.attention.shape)} {self.attention.dtype}"
        return (f"<attnbatch.Output {self.path!r}: output {shape}, "
                f"{'packed' if self.packed else 'padded'}, attention {maps}>")


def open(path, *, split=False, maps=True):
    """Reads an attnbatch output file (what run() or ``attnbatch run`` wrote) into memory.

    Returns an Output: ``.output``, ``.lse``, ``.lengths``, ``.offsets`` (packed outputs),
    ``.attention`` (None without maps, or with maps=False, which skips reading them) as numpy
    arrays, ``.attrs`` the provenance (root attributes) as a dict, ``.to_xarray()`` an
    xarray.Dataset where xarray is installed. split=True gives ``.output`` and ``.lse`` as
    lists with one array per sequence holding its valid rows (packed or padded alike).
    Everything is read at once: for files larger than memory, use h5py directly.
    """
    return Output(path, split=split, maps=maps)

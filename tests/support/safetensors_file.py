"""Writing safetensors files for tests, without the safetensors package (Debian 12 has none).

The format (github.com/huggingface/safetensors): an 8-byte little-endian header size, a JSON
header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
the tensors' little-endian bytes, in header order.
"""
import json
import struct

import numpy as np

_DTYPES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("float64"): "F64",
           np.dtype("int64"): "I64", np.dtype("int32"): "I32"}


def _as_bytes(value):
    """(dtype name, shape, bytes) of a numpy array or a torch tensor (bfloat16 included)."""
    if hasattr(value, "detach"):  # a torch tensor
        import torch
        value = value.detach().cpu().contiguous()
        if value.dtype == torch.bfloat16:
            return "BF16", list(value.shape), value.view(torch.int16).numpy().tobytes()
        value = value.numpy()
    array = np.ascontiguousarray(value)
    return _DTYPES[array.dtype], list(array.shape), array.astype(array.dtype.newbyteorder("<")).tobytes()


def save_safetensors(tensors, path, metadata=None):
    """Writes {name: array or tensor} to `path` as safetensors."""
    header, blobs, offset = {}, [], 0
    for name, value in tensors.items():
        dtype, shape, data = _as_bytes(value)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)

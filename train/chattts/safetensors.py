"""A small reader and writer for the .safetensors format (the ``safetensors`` package is not on
the build machines): u64 little-endian header size, a JSON header {name: {dtype, shape,
data_offsets: [begin, end]}, "__metadata__": {...}}, then the raw little-endian tensor bytes."""
from __future__ import annotations

import json
import os
import struct
from typing import Dict, Optional

import numpy as np
import torch

_DTYPES = {
    "F64": (np.float64, torch.float64), "F32": (np.float32, torch.float32), "F16": (np.float16, torch.float16),
    "I64": (np.int64, torch.int64), "I32": (np.int32, torch.int32), "I16": (np.int16, torch.int16),
    "I8": (np.int8, torch.int8), "U8": (np.uint8, torch.uint8), "BOOL": (np.bool_, torch.bool),
}
_NAMES = {t: n for n, (_, t) in _DTYPES.items()}
MAX_HEADER = 100 << 20


class SafetensorsError(ValueError):
    pass


def load(path: str) -> Dict[str, torch.Tensor]:
    """All tensors of a .safetensors file (bf16 is widened to float32)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise SafetensorsError(f"{path}: too short for a safetensors file ({size} bytes)")
            n = struct.unpack("<Q", head)[0]
            if n > MAX_HEADER or 8 + n > size:
                raise SafetensorsError(f"{path}: header size {n} does not fit the file ({size} bytes)")
            try:
                header = json.loads(f.read(n))
            except ValueError as e:
                raise SafetensorsError(f"{path}: header is not JSON: {e}") from e
            data = f.read()
    except OSError as e:
        raise SafetensorsError(f"{path}: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    out: Dict[str, torch.Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dt, shape, (b, e) = info["dtype"], [int(s) for s in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError) as err:
            raise SafetensorsError(f"{path}: tensor {name}: bad header entry {info!r}") from err
        count = int(np.prod(shape)) if shape else 1
        if dt == "BF16":
            if e - b != 2 * count or e > len(data) or b < 0:
                raise SafetensorsError(f"{path}: tensor {name}: byte range {b}..{e} does not hold {shape} BF16")
            raw = np.frombuffer(data[b:e], dtype="<u2").astype(np.uint32) << 16
            out[name] = torch.from_numpy(raw.view(np.float32).reshape(shape).copy())
            continue
        if dt not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {name}: unsupported dtype {dt}")
        npt = np.dtype(_DTYPES[dt][0]).newbyteorder("<")
        if e - b != npt.itemsize * count or e > len(data) or b < 0:
            raise SafetensorsError(f"{path}: tensor {name}: byte range {b}..{e} does not hold {shape} {dt}")
        arr = np.frombuffer(data[b:e], dtype=npt).reshape(shape).astype(npt.newbyteorder("="))
        out[name] = torch.from_numpy(arr.copy())
    return out


def save(tensors: Dict[str, torch.Tensor], path: str, metadata: Optional[Dict[str, str]] = None) -> None:
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, off = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype not in _NAMES:
            raise SafetensorsError(f"tensor {name}: unsupported dtype {t.dtype}")
        b = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)

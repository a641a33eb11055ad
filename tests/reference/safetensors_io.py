"""Minimal safetensors reader/writer, written from the format description.

Layout of a file:
  8 bytes    N, unsigned little-endian 64-bit: size of the JSON header
  N bytes    UTF-8 JSON object {name: {"dtype": str, "shape": [int...],
             "data_offsets": [begin, end]}, optional "__metadata__": {str: str}}
             (may be padded with trailing spaces)
  rest       the byte buffer; offsets are relative to its start, data is
             little-endian and row-major (C order)

Only numpy is needed, so the C++ tests and the reference share one format
without Debian packaging the `safetensors` module.
"""

import json
import os
import struct
import tempfile

import numpy as np

# safetensors dtype name -> numpy little-endian dtype
DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {v: k for k, v in DTYPES.items()}

# A header larger than this is a corrupt file, not a model (matches the 100 MB
# bound of the reference implementation's documentation).
MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """A malformed safetensors file; the message names the file and the field."""


def load(path):
    """Reads a safetensors file.

    Returns (tensors, metadata): tensors maps name -> numpy array (a copy, in
    the file's dtype and shape); metadata is the "__metadata__" dict or {}.
    Raises SafetensorsError with `path: ...` on any malformed header, dtype,
    shape or offset, and OSError when the file cannot be read.
    """
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise SafetensorsError(f"{path}: file of {len(blob)} bytes is shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER_BYTES or 8 + n > len(blob):
        raise SafetensorsError(f"{path}: header length {n} exceeds the file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    data = memoryview(blob)[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(f"{path}: __metadata__ must map strings to strings")
    tensors = {}
    for name, info in header.items():
        where = f"{path}: tensor '{name}'"
        if not isinstance(info, dict):
            raise SafetensorsError(f"{where}: expected an object, found {info!r}")
        dtype = DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise SafetensorsError(f"{where}: dtype {info.get('dtype')!r} is not one of {sorted(DTYPES)}")
        shape = info.get("shape")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise SafetensorsError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        offs = info.get("data_offsets")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) for o in offs)
                or not 0 <= offs[0] <= offs[1] <= len(data)):
            raise SafetensorsError(f"{where}: data_offsets {offs!r} outside the {len(data)}-byte buffer")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if offs[1] - offs[0] != count * dtype.itemsize:
            raise SafetensorsError(f"{where}: {offs[1] - offs[0]} bytes for shape {shape} of {info['dtype']} "
                                   f"(expected {count * dtype.itemsize})")
        arr = np.frombuffer(data[offs[0]:offs[1]], dtype=dtype, count=count).reshape(shape)
        tensors[name] = arr.copy()
    return tensors, dict(metadata)


def save(path, tensors, metadata=None):
    """Writes `tensors` (name -> numpy array or torch tensor) atomically.

    The file is written to a temporary file in the same folder, fsynced, then
    renamed over `path`, so a reader never sees half a file. `metadata` maps
    str -> str. Raises ValueError on an unsupported dtype or a non-string
    metadata value.
    """
    entries = []
    header = {}
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        if hasattr(t, "detach"):  # torch.Tensor without importing torch here
            t = t.detach().cpu().numpy()
        arr = np.asarray(t)  # not ascontiguousarray: it turns 0-d into 1-d
        key = _NAMES.get(arr.dtype.newbyteorder("<"))
        if key is None:
            raise ValueError(f"tensor '{name}': dtype {arr.dtype} has no safetensors name")
        raw = arr.astype(DTYPES[key], copy=False).tobytes(order="C")  # tobytes copies C order
        header[name] = {"dtype": key, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        entries.append(raw)
        offset += len(raw)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValueError(f"__metadata__: {k!r} -> {v!r} is not str -> str")
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)  # data section 8-byte aligned
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".safetensors", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for raw in entries:
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

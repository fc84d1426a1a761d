"""Read a legacy (pre-zip, torch < 1.6) PyTorch state dict without torch.

Layout of such a file, one after another:

1. pickle: the magic number ``0x1950a86a20f9469cfc6c``
2. pickle: the protocol version (1001)
3. pickle: system info (endianness, type sizes)
4. pickle: the object itself. Tensors are built by
   ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
   requires_grad, backward_hooks)``; storages come through ``persistent_load``
   as ``('storage', <StorageType>, key, location, numel, view_metadata)``.
5. pickle: the list of storage keys, in the order their data follows
6. per key: an int64 little-endian element count, then the raw elements.

The unpickler is restricted: ``find_class`` resolves only an allow-list
(``collections.OrderedDict``, ``torch._utils._rebuild_tensor_v2`` and the
torch storage types) to local stand-ins and refuses everything else, so a
hostile file cannot make it import or call arbitrary code.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001


class LegacyFormatError(ValueError):
    """The file is not a legacy PyTorch file we can read safely."""


class _StorageType:
    """Stand-in for a ``torch.<X>Storage`` class: only carries the dtype."""

    def __init__(self, name: str, dtype: str):
        self.name = name
        self.dtype = np.dtype(dtype).newbyteorder("<")

    def __repr__(self) -> str:
        return f"torch.{self.name}"


_STORAGE_TYPES = {
    name: _StorageType(name, dtype)
    for name, dtype in [
        ("FloatStorage", "f4"),
        ("DoubleStorage", "f8"),
        ("HalfStorage", "f2"),
        ("LongStorage", "i8"),
        ("IntStorage", "i4"),
        ("ShortStorage", "i2"),
        ("CharStorage", "i1"),
        ("ByteStorage", "u1"),
        ("BoolStorage", "?"),
    ]
}


class _Storage:
    """A storage announced by ``persistent_load``; its bytes come later."""

    def __init__(self, stype: _StorageType, key: str, numel: int):
        self.stype = stype
        self.key = key
        self.numel = numel
        self.data: np.ndarray | None = None


class _TensorRef:
    """What ``_rebuild_tensor_v2`` returns: a view into a not-yet-read storage."""

    def __init__(self, storage: _Storage, offset: int, size: tuple, stride: tuple):
        self.storage = storage
        self.offset = offset
        self.size = tuple(int(s) for s in size)
        self.stride = tuple(int(s) for s in stride)

    def materialize(self) -> np.ndarray:
        """Copy the strided view out of the loaded storage."""
        data = self.storage.data
        if data is None:
            raise LegacyFormatError(f"storage {self.storage.key} was never read")
        if self.size:
            last = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride))
            if min(self.size) > 0 and last >= data.size:
                raise LegacyFormatError(
                    f"tensor view {self.size}/{self.stride}+{self.offset} runs past "
                    f"storage {self.storage.key} of {data.size} elements"
                )
        item = data.itemsize
        view = np.lib.stride_tricks.as_strided(
            data[self.offset:],
            shape=self.size,
            strides=tuple(s * item for s in self.stride),
            writeable=False,
        )
        return np.array(view, dtype=data.dtype.newbyteorder("="), copy=True)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    """Allow-listed stand-in for ``torch._utils._rebuild_tensor_v2``."""
    if not isinstance(storage, _Storage):
        raise LegacyFormatError("_rebuild_tensor_v2 called without a storage")
    return _TensorRef(storage, int(storage_offset), size, stride)


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that only builds the allow-listed classes."""

    def __init__(self, file, storages: dict[str, _Storage]):
        super().__init__(file)
        self._storages = storages

    def find_class(self, module: str, name: str):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor_v2
        if module == "torch" and name in _STORAGE_TYPES:
            return _STORAGE_TYPES[name]
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}: not allow-listed")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        _, stype, key, _location, numel, view_metadata = pid
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError(f"persistent id names a non-storage type {stype!r}")
        if view_metadata is not None:
            raise LegacyFormatError("storage views (view_metadata) are not supported")
        key = str(key)
        if key not in self._storages:
            self._storages[key] = _Storage(stype, key, int(numel))
        return self._storages[key]


def _load_one(f, storages):
    return RestrictedUnpickler(f, storages).load()


def load_legacy_state_dict(data: bytes) -> "collections.OrderedDict[str, np.ndarray]":
    """Parse a legacy PyTorch file and return its state dict as numpy arrays.

    Raises :class:`LegacyFormatError` or ``pickle.UnpicklingError`` for
    anything unexpected (wrong magic, zip-format file, unknown classes, short
    data).
    """
    if data[:2] == b"PK":
        raise LegacyFormatError("this is a zip-format (torch >= 1.6) file, not the legacy format")
    f = io.BytesIO(data)
    storages: dict[str, _Storage] = {}
    if _load_one(f, storages) != LEGACY_MAGIC:
        raise LegacyFormatError("bad magic number: not a legacy PyTorch file")
    if _load_one(f, storages) != LEGACY_PROTOCOL:
        raise LegacyFormatError("unsupported legacy protocol version")
    sys_info = _load_one(f, storages)
    if not isinstance(sys_info, dict) or not sys_info.get("little_endian", False):
        raise LegacyFormatError(f"unsupported system info {sys_info!r}")
    obj = _load_one(f, storages)
    keys = _load_one(f, storages)
    if not isinstance(keys, list):
        raise LegacyFormatError("storage key list missing")
    for key in keys:
        storage = storages.get(str(key))
        if storage is None:
            raise LegacyFormatError(f"data for unknown storage {key!r}")
        head = f.read(8)
        if len(head) != 8:
            raise LegacyFormatError(f"truncated file at storage {key!r}")
        (numel,) = struct.unpack("<q", head)
        if numel != storage.numel:
            raise LegacyFormatError(
                f"storage {key!r}: header says {numel} elements, pickle said {storage.numel}"
            )
        nbytes = numel * storage.stype.dtype.itemsize
        raw = f.read(nbytes)
        if len(raw) != nbytes:
            raise LegacyFormatError(f"truncated data for storage {key!r}")
        storage.data = np.frombuffer(raw, dtype=storage.stype.dtype)
    if f.read(1):
        raise LegacyFormatError("trailing bytes after the last storage")
    if not isinstance(obj, dict):
        raise LegacyFormatError(f"top-level object is {type(obj).__name__}, not a state dict")
    out: "collections.OrderedDict[str, np.ndarray]" = collections.OrderedDict()
    for name, value in obj.items():
        if not isinstance(value, _TensorRef):
            raise LegacyFormatError(f"state dict entry {name!r} is not a tensor")
        out[name] = value.materialize()
    return out

"""``dlbind.Tensor``: a zero-copy view of a consumed DLPack tensor that owns the producer's memory.

The producer's deleter runs exactly once, when the last user lets go: the Tensor is referenced by
every view made of it (numpy arrays through ``__array_interface__``, re-exported capsules), and the
deleter runs when the Tensor itself is freed. There is deliberately no ``release()``: freeing memory
that a view still uses would be a crash waiting to happen. Read the metadata, hand the Tensor to
numpy (``np.asarray``, ``np.from_dlpack``), torch (``torch.from_dlpack``), ctypes or C (``data_ptr``).
"""

from __future__ import annotations

import math
from typing import Any

from dlbind import capsule as _capsule
from dlbind._ffi import ffi
from dlbind._generated.enums import DLPACK_MAJOR_VERSION, DataTypeCode, DeviceType, Flags
from dlbind.devices import HOST_ACCESSIBLE, Device, check_stream, device_name
from dlbind.dtypes import DType

__all__ = ["Tensor", "from_capsule", "from_managed"]

_KNOWN_CODES = frozenset(int(c) for c in DataTypeCode)
_KNOWN_DEVICES = frozenset(int(d) for d in DeviceType)
MAX_NDIM = 64  # far above any library's limit; guards against garbage in a capsule


class Tensor:
    """A consumed DLPack tensor (see :func:`dlbind.from_dlpack`)."""

    __slots__ = (
        "_owner",
        "byte_offset",
        "data_ptr",
        "device",
        "dtype",
        "flags",
        "shape",
        "strides",
        "version",
    )

    _owner: Any
    #: Data pointer as the producer gave it (add ``byte_offset`` for the first element).
    data_ptr: int
    byte_offset: int
    #: ``(DeviceType, device_id)``
    device: Device
    dtype: DType
    #: DLPack flags (``Flags.READ_ONLY``, ``Flags.IS_COPIED``, ...); empty for legacy capsules.
    flags: Flags
    shape: tuple[int, ...]
    #: Strides in elements (DLPack's unit); see :attr:`byte_strides`.
    strides: tuple[int, ...]
    #: ``(major, minor)`` of a versioned capsule, None for a legacy one.
    version: tuple[int, int] | None

    # -- metadata ------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(self.size, padded=bool(self.flags & Flags.IS_SUBBYTE_TYPE_PADDED))

    @property
    def readonly(self) -> bool:
        return bool(self.flags & Flags.READ_ONLY)

    @property
    def byte_strides(self) -> tuple[int, ...]:
        if self.dtype.bits * self.dtype.lanes % 8 and not self.flags & Flags.IS_SUBBYTE_TYPE_PADDED:
            raise BufferError(f"{self.dtype.name} is packed below a byte: strides have no byte size")
        return tuple(s * self.dtype.itemsize for s in self.strides)

    def is_contiguous(self) -> bool:
        """Row-major contiguous (size-1 dimensions may have any stride)."""
        expected = 1
        for dim, stride in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if dim == 0:
                return True
            if dim != 1 and stride != expected:
                return False
            expected *= dim
        return True

    def __repr__(self) -> str:
        flags = f", flags={self.flags!r}" if self.flags else ""
        return (
            f"dlbind.Tensor(shape={self.shape}, dtype={self.dtype.name}, "
            f"device={device_name(self.device[0])}:{self.device[1]}{flags})"
        )

    def copy(self) -> Tensor:
        """A compact row-major copy in memory dlbind owns (``Flags.IS_COPIED`` set); host memory only."""
        from dlbind.producer import export_view

        return from_capsule(export_view(self, max_version=(1, 3), copy=True))

    # -- exporting again -----------------------------------------------------------------------
    def __dlpack_device__(self) -> tuple[DeviceType, int]:
        return self.device

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        from dlbind.producer import export_view

        return export_view(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def _interface(self, typestr: str, itemsize: int) -> dict[str, Any]:
        if self.device[0] not in HOST_ACCESSIBLE:
            raise BufferError(f"numpy needs host memory; this tensor is on {device_name(self.device[0])}")
        if self.dtype.is_subbyte and not self.flags & Flags.IS_SUBBYTE_TYPE_PADDED:
            raise BufferError(f"{self.dtype.name} is packed below a byte: numpy cannot view it")
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": typestr,
            "data": (self.data_ptr + self.byte_offset if self.size else 0, self.readonly),
            "strides": tuple(s * itemsize for s in self.strides),
        }

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """numpy's array interface (v3) for dtypes a typestr can name; others go through ``__array__``."""
        try:
            fmt = self.dtype.format
        except ValueError:
            # bfloat16, fp8, ...: a typestr cannot name them. AttributeError makes numpy use __array__.
            raise AttributeError("__array_interface__") from None
        typestr = {"?": "|b1", "Zf": "<c8", "Zd": "<c16"}.get(fmt) or f"={fmt}"
        return self._interface(typestr, self.dtype.itemsize)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        import numpy as np

        np_dtype = self.dtype.to_numpy()
        raw = np.asarray(_Interface(self._interface(f"|V{np_dtype.itemsize}", np_dtype.itemsize), self))
        out = raw.view(np_dtype)
        if dtype is not None and np.dtype(dtype) != np_dtype:
            if copy is False:
                raise ValueError(f"converting {self.dtype.name} to {dtype} needs a copy")
            return out.astype(dtype)
        return out.copy() if copy else out


class _Interface:
    """Carries an ``__array_interface__`` dict and keeps the Tensor alive for numpy."""

    __slots__ = ("__array_interface__", "tensor")

    def __init__(self, interface: dict[str, Any], tensor: Tensor) -> None:
        self.__array_interface__ = interface
        self.tensor = tensor


def _fields(managed: Any, versioned: bool) -> tuple[Any, tuple[int, int] | None, int]:
    if versioned:
        major, minor = managed.version.major, managed.version.minor
        if major != DLPACK_MAJOR_VERSION:
            raise BufferError(
                f"the producer made a DLPack {major}.{minor} tensor; dlbind understands major version "
                f"{DLPACK_MAJOR_VERSION} only"
            )
        return managed.dl_tensor, (major, minor), int(managed.flags)
    return managed.dl_tensor, None, 0


def from_managed(managed: Any, versioned: bool) -> Tensor:
    """Wrap a consumed ``DLManagedTensor(Versioned)*``; on invalid content the deleter runs, then BufferError."""
    t, version, flags = _fields(managed, versioned)
    ndim = int(t.ndim)
    if not 0 <= ndim <= MAX_NDIM:
        raise BufferError(f"invalid ndim {ndim} in the DLPack tensor")
    code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
    if code not in _KNOWN_CODES:
        raise BufferError(f"unknown DLPack dtype code {code} (bits={bits})")
    if lanes != 1:
        raise BufferError(f"vector dtypes (lanes={lanes}) are not supported")
    if bits == 0:
        raise BufferError("invalid dtype: bits=0")
    device_type, device_id = int(t.device.device_type), int(t.device.device_id)
    if device_type not in _KNOWN_DEVICES:
        raise BufferError(f"unknown DLPack device type {device_type}")
    if ndim and t.shape == ffi.NULL:
        raise BufferError(f"the DLPack tensor has ndim={ndim} but a NULL shape")
    shape = tuple(ffi.unpack(t.shape, ndim)) if ndim else ()
    if any(d < 0 for d in shape):
        raise BufferError(f"negative dimension in shape {shape}")
    if ndim and t.strides != ffi.NULL:
        strides = tuple(ffi.unpack(t.strides, ndim))
    else:  # NULL strides: compact row-major (allowed before DLPack 1.2)
        reversed_strides: list[int] = []
        acc = 1
        for d in reversed(shape):
            reversed_strides.append(acc)
            acc *= d
        strides = tuple(reversed(reversed_strides))
    tensor = Tensor.__new__(Tensor)
    tensor.data_ptr = int(ffi.cast("uintptr_t", t.data))
    tensor.byte_offset = int(t.byte_offset)
    tensor.device = (DeviceType(device_type), device_id)
    tensor.dtype = DType(code, bits, lanes)
    tensor.flags = Flags(flags)
    tensor.shape = shape
    tensor.strides = strides
    tensor.version = version
    if tensor.data_ptr == 0 and tensor.size and device_type in HOST_ACCESSIBLE:
        raise BufferError(f"the DLPack tensor has {tensor.size} elements but a NULL data pointer")
    tensor._owner = _capsule.Owner(managed)  # from here on the deleter runs exactly once
    return tensor


def from_capsule(capsule: object, *, stream: int | None = None) -> Tensor:
    """Consume a raw DLPack capsule (``"dltensor_versioned"`` or ``"dltensor"``)."""
    managed, versioned = _capsule.take(capsule)
    try:
        tensor = from_managed(managed, versioned)
    except BaseException:
        if managed.deleter != ffi.NULL:
            managed.deleter(managed)
        raise
    if stream is not None:
        check_stream(tensor.device[0], stream)
    return tensor

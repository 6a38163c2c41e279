"""Producer side: export anything as DLPack.

:func:`asdlpack` wraps an object with the buffer protocol, ``__array_interface__``,
``__cuda_array_interface__`` (described by :mod:`dlbind.described`) or an older/newer ``__dlpack__`` (re-exported
here, through the consumer); :func:`from_pointer` wraps raw memory. The result answers every keyword of the
array API's ``__dlpack__`` by the spec's rules.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dlbind._ffi import native
from dlbind._generated.enums import DeviceType
from dlbind._generated.tables import VERSIONED_CAPSULES
from dlbind.consumer import from_dlpack
from dlbind.crossing import dtype as read_dtype
from dlbind.described import (
    _BUFFER_DTYPES,
    _ELEMENT_STRIDES,
    _PACKAGE,
    _READ_ONLY,
    _UINTPTR,
    Exporter,
    _address_of,
    _cast,
    _element_strides,
    _integer,
    _integers,
    _new_exporter,
    describe,
    through_interface,
)
from dlbind.devices import device_name, parse_device, producer_device
from dlbind.dtypes import DType
from dlbind.export import CPU, Memory, export_view
from dlbind.validate import byte_size, check_description, contiguous_strides

if TYPE_CHECKING:  # the type of capsules (types.CapsuleType from Python 3.13); mypy always has this stub
    from typing_extensions import CapsuleType

    from dlbind.tensor import Tensor

__all__ = ["Exporter", "SourceExporter", "asdlpack", "from_pointer", "through_interface"]


def _import_plain(x: Any) -> Tensor:
    """``from_dlpack(x)``: in C in the compiled build (configured by the time anything is exported)."""
    return native.from_dlpack(x) if native is not None else from_dlpack(x)


class SourceExporter(Exporter):
    """What :func:`asdlpack` returns for an object with ``__dlpack__`` (any version): each export imports it
    as it can (it may not know the newer keywords), then answers the keywords itself, so that a legacy
    producer serves a versioned consumer and back."""

    __slots__ = ("_source",)

    _source: Any

    def __init__(self, source: Any) -> None:
        self._memory = self._fast = None
        self._source = source

    def __dlpack_device__(self) -> tuple[DeviceType, int]:
        return producer_device(self._source)

    def _export(
        self, stream: int | None, max_version: tuple[int, int] | None, dl_device: tuple[int, int] | None,
        copy: bool | None,
    ) -> CapsuleType:  # fmt: skip
        if stream is None and dl_device is None and copy is None:  # the Tensor's own export answers max_version
            return _import_plain(self._source).__dlpack__(max_version=max_version)
        tensor = from_dlpack(self._source, stream=stream)  # ready on the consumer's stream: no wait below
        return export_view(tensor, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __repr__(self) -> str:
        return f"{_PACKAGE}.Exporter(of {type(self._source).__name__}.__dlpack__)"


def _shown(obj: Any) -> str:
    """``obj``'s type by name, dlbind's own exporters as ``Exporter`` in both builds (the compiled build's C classes
    have names of their own)."""
    return "Exporter" if isinstance(obj, Exporter) else type(obj).__name__


def asdlpack(obj: Any, *, readonly: bool | None = None, device_id: int | None = None) -> Exporter:
    """Wrap ``obj`` as a DLPack producer (an object with ``__dlpack__`` and ``__dlpack_device__``).

    Accepted, in this order: the buffer protocol (bytes, bytearray, memoryview, array.array, mmap,
    ctypes arrays, numpy), ``__array_interface__`` (v3), an object with ``__dlpack__`` (any version:
    re-negotiated on every export so that a legacy producer serves a versioned consumer and back),
    ``__cuda_array_interface__`` (v3: its ``stream`` honoured on export; the GPU found from the pointer by
    dlbind-cuda, or named by ``device_id``).

    ``readonly=True`` exports the memory read-only; ``readonly=False`` requires writable memory.
    ``device_id`` names the GPU of a ``__cuda_array_interface__`` export; on any other route it must be the
    device id the memory already has (ValueError otherwise: dlbind never moves memory to honour it).

    Raises ``TypeError`` for an object none of these describe (a list or a scalar: make an array of it first),
    ``BufferError`` for a description of memory that is inconsistent (``dlbind.validate``) or for read-only memory
    that ``readonly=False`` asks to write, and ``ValueError`` for a ``device_id`` the memory is not on.
    """
    try:
        view: memoryview | None = memoryview(obj)
    except (TypeError, ValueError, BufferError):  # numpy and jax refuse buffers of dtypes they cannot format
        view = None
    # The common call, a C-contiguous buffer of a format exported before: the export arguments straight from
    # the buffer (what the compiled build does in C); the Memory only if a call or the repr needs it.
    if view is not None and device_id is None and (readonly is None or readonly is True) and view.c_contiguous:
        dtype = _BUFFER_DTYPES.get(view.format)
        itemsize = view.itemsize
        if dtype is not None and dtype[1] == 8 * itemsize and VERSIONED_CAPSULES:
            byte_strides = view.strides or ()  # a memoryview's are a tuple
            strides = _ELEMENT_STRIDES.get((byte_strides, itemsize))
            if strides is None:
                strides = _element_strides(byte_strides, itemsize)
            exporter = _new_exporter(Exporter)
            exporter._memory = None
            exporter._fast = (
                int(_cast(_UINTPTR, _address_of(view, require_writable=False))),  # _address(view), inline
                view.shape, strides, dtype, CPU, 0, view, True, _READ_ONLY if readonly or view.readonly else 0,
            )  # fmt: skip
            return exporter
    exporter = describe(obj, view, readonly, device_id, SourceExporter)
    if device_id is not None:
        kind, index = exporter.__dlpack_device__()
        if index != device_id:
            raise ValueError(
                f"asdlpack(device_id={device_id!r}): this {_shown(obj)} is on {device_name(kind)}:{index}; "
                "device_id names the GPU of a __cuda_array_interface__ export, it does not move memory "
                "(copy it there with its own library first)"
            )
    return exporter


def from_pointer(
    ptr: int,
    shape: tuple[int, ...] | list[int],
    dtype: DType | str | Any,
    *,
    strides: tuple[int, ...] | list[int] | None = None,
    byte_offset: int = 0,
    device: Any = "cpu",
    readonly: bool = False,
    owner: object = None,
) -> Exporter:
    """Describe raw memory as a DLPack producer. ``strides`` are in elements (None: row-major).

    ``owner`` is kept alive as long as any exported tensor uses the memory. dlbind cannot check what lies at
    the pointer: the caller vouches for it. The description is checked as every description of memory is
    (:mod:`dlbind.validate`): ValueError for a negative dimension, strides that do not match the shape, a
    negative ``byte_offset`` or a NULL pointer with elements; BufferError for sizes beyond int64 and elements
    that reach past either end of the address space.
    """
    shape_t = _integers(tuple(shape) if isinstance(shape, list | tuple) else shape, "from_pointer", "shape")
    ptr = _integer(ptr, "from_pointer", "ptr")
    if any(d < 0 for d in shape_t):
        raise ValueError(f"negative dimension in shape {shape_t}")
    dt = read_dtype(dtype)  # a DType, one of dlbind's names, or any system's dtype object
    strides_t = contiguous_strides(shape_t) if strides is None else _integers(
        tuple(strides) if isinstance(strides, list | tuple) else strides, "from_pointer", "strides")  # fmt: skip
    if len(strides_t) != len(shape_t):
        raise ValueError(f"strides {strides_t} do not match shape {shape_t}")
    byte_offset = _integer(byte_offset, "from_pointer", "byte_offset")
    if byte_offset < 0:
        raise ValueError("byte_offset must be >= 0")
    byte_size(shape_t, dt)  # BufferError beyond int64 (before the NULL pointer's ValueError, as ever)
    if not ptr and math.prod(shape_t) != 0:
        raise ValueError("a NULL pointer can only describe an empty tensor")
    where = parse_device(device)
    check_description("from_pointer", ptr, shape_t, strides_t, dt, byte_offset, device=where)
    return Exporter(Memory(ptr, shape_t, strides_t, dt, where, byte_offset, readonly, owner))

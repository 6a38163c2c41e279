"""The DLPack 1.3 C exchange API (``__dlpack_c_exchange_api__``), both sides.

Consumer (compiled build): :func:`import_object` uses a producer type's table (torch >= 2.10 has
one) to get an owned ``DLManagedTensorVersioned`` without the ``__dlpack__`` round trip.
Producer: :func:`table` is the capsule ``dlbind.Tensor.__dlpack_c_exchange_api__`` holds. In the
compiled build its functions are C, calling the helpers below for the work that needs Python
objects; the pure build makes the same table from cffi callbacks (slower, and a failing callback
reports -1 with its exception printed rather than set).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, cast

import dlbind._backends as _backends
import dlbind._capi as _capi
import dlbind.capsule as capsule
from dlbind._ffi import ffi, native
from dlbind._generated.enums import DLPACK_VERSION, DeviceType
from dlbind._generated.tables import DEVICE_NAMES
from dlbind.devices import device_name
from dlbind.dtypes import DType
from dlbind.export import Memory, export_memory
from dlbind.tensor import Tensor, from_managed
from dlbind.validate import MAX_NDIM, byte_size, check_description, check_dtype, contiguous_strides

if TYPE_CHECKING:  # the type of capsules (types.CapsuleType from Python 3.13); mypy always has this stub
    from typing_extensions import CapsuleType

__all__ = ["AVAILABLE", "import_object", "order", "table"]

CAPSULE_NAME = b"dlpack_exchange_api"
DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION = DLPACK_VERSION


def _declared(name: str) -> bool:
    try:
        ffi.typeof(name)
    except ffi.error:
        return False
    return True


#: Whether the header the runtime is generated from declares the C exchange API. A vendored copy of
#: an older header (DLPack 1.0) neither offers a table nor uses a producer's.
AVAILABLE = _declared("DLPackExchangeAPI")


# -- helpers our table calls (compiled and pure) ------------------------------------------------


def managed_from_object(obj: Any) -> int:
    """Owned DLManagedTensorVersioned address for a dlbind producer (consumes one capsule); a legacy one is
    released and refused, as the compiled table refuses it."""
    managed, versioned = capsule.take(obj.__dlpack__(max_version=(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)))
    if not versioned:
        capsule.Owner(managed).release()
        raise BufferError(
            "__dlpack__(max_version=...) gave a legacy capsule: the exchange table hands over versioned structs only"
        )
    return int(ffi.cast("uintptr_t", managed))


def object_from_managed(address: int, ready: tuple[int, int] | None = None) -> Tensor:
    """A dlbind.Tensor that owns the given DLManagedTensorVersioned (``ready``: as
    :func:`dlbind.tensor.from_managed`'s)."""
    source = None if native is not None else capsule.adopt(address)  # the pure Tensor keeps a dlbind owner
    return from_managed(ffi.cast("DLManagedTensorVersioned *", address), True, source=source, ready=ready)


def allocate(prototype_address: int) -> object:
    """A new zero-filled CPU tensor of the dtype and shape of the prototype ``DLTensor*`` (on ``cpu:0``: dlbind
    allocates no other memory), checked as every description is (:func:`dlbind.validate.check_description`);
    returns its versioned capsule, unconsumed: the table takes it (the compiled one in C, with no Python code
    between taking the struct and handing it out), and a capsule dropped on the way frees what it holds."""
    what = "the allocator's prototype"
    proto = ffi.cast("DLTensor *", prototype_address)
    device = (int(proto.device.device_type), int(proto.device.device_id))
    if device != (DeviceType.kDLCPU, 0):
        where = f"{device_name(device[0])}:{device[1]}"
        raise BufferError(f"{capsule.PACKAGE} allocates memory on cpu:0 only, not on {where}")
    ndim = int(proto.ndim)
    if not 0 <= ndim <= MAX_NDIM:
        raise BufferError(f"{what}: {ndim} dimensions (0 to {MAX_NDIM})")
    shape = tuple(ffi.unpack(proto.shape, ndim)) if ndim else ()
    dtype = DType(int(proto.dtype.code), int(proto.dtype.bits), int(proto.dtype.lanes))
    check_dtype(*dtype, what)
    if any(d < 0 for d in shape):
        raise BufferError(f"{what}: negative dimension in shape {shape}")
    store = bytearray(byte_size(shape, dtype))
    data = ctypes.addressof((ctypes.c_char * len(store)).from_buffer(store)) if store else 0
    strides = contiguous_strides(shape)
    check_description(what, data, shape, strides, dtype, device=device, buffer=(data, len(store)))
    mem = Memory(data, shape, strides, dtype, device, 0, False, store)
    return export_memory(mem, max_version=(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION))


# -- the table ----------------------------------------------------------------------------------

_PURE: dict[str, Any] = {}


def _pure_table() -> Any:
    def from_py(py_object: Any, out: Any) -> int:
        out[0] = ffi.cast("DLManagedTensorVersioned *", managed_from_object(_capi.object_at(_address(py_object))))
        return 0

    def to_py(tensor: Any, out: Any) -> int:
        obj = object_from_managed(int(ffi.cast("uintptr_t", tensor)))
        _capi.incref(obj)  # a new reference for the caller
        out[0] = ffi.cast("void *", id(obj))
        return 0

    def alloc(prototype: Any, out: Any, error_ctx: Any, set_error: Any) -> int:
        try:
            out[0] = ffi.cast("DLManagedTensorVersioned *", capsule.take(allocate(_address(prototype)))[0])
        except BaseException as exc:  # SetError is called exactly when NULL is returned (KeyboardInterrupt too)
            out[0] = ffi.NULL
            if set_error != ffi.NULL:
                set_error(error_ctx, type(exc).__name__.encode(), str(exc).encode())
            return -1
        return 0

    def stream(device_type: int, device_id: int, out: Any) -> int:
        # dlbind queues no device work: its tensors are ordered on what stream=None names, which every
        # stream rule accepts (no stream, or the default one). Unknown device types are an error.
        if device_type not in DEVICE_NAMES:  # -1, the error printed (as the compiled table's, which sets it)
            raise BufferError(f"unknown DLPack device type {device_type}")
        out[0] = ffi.NULL
        return 0

    api = ffi.new("DLPackExchangeAPI *")
    api.header.version.major, api.header.version.minor = DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION
    callbacks = {
        "managed_tensor_allocator": ffi.callback("DLPackManagedTensorAllocator", alloc, error=-1),
        "managed_tensor_from_py_object_no_sync": ffi.callback(
            "DLPackManagedTensorFromPyObjectNoSync", from_py, error=-1
        ),
        "managed_tensor_to_py_object_no_sync": ffi.callback("DLPackManagedTensorToPyObjectNoSync", to_py, error=-1),
        "current_work_stream": ffi.callback("DLPackCurrentWorkStream", stream, error=-1),
    }
    for name, cb in callbacks.items():
        setattr(api, name, cb)
    _PURE.update(callbacks, api=api)  # alive for the whole process, as the API requires
    for callback in (*callbacks.values(), api):  # past this module's teardown too: consumers keep the table
        _capi.incref(callback)
    return api


def _address(pointer: Any) -> int:
    return int(ffi.cast("uintptr_t", pointer))


def table() -> CapsuleType | None:
    """dlbind's exchange table as the ``"dlpack_exchange_api"`` capsule; None without the API (:data:`AVAILABLE`)."""
    if not AVAILABLE:
        return None
    made: CapsuleType
    if native is not None:
        made = native.exchange_table()
    else:
        api = _PURE.get("api") or _pure_table()  # made once: a table handed out is never freed
        made = _capi.capsule_new(int(ffi.cast("uintptr_t", api)), CAPSULE_NAME, _capi.CapsuleDestructor())
    return made


# -- consumer -------------------------------------------------------------------------------------


def import_object(x: Any) -> Tensor | None:
    """Import ``x`` through its type's exchange table; None when it has none.

    The table's calls do not synchronise (``*NoSync``): on a device with streams, the device rule's default
    stream (what ``stream=None`` names) is ordered after the producer's current stream, which its table
    names, as ``__dlpack__(stream=None)`` would; the Tensor is ready there. Compiled build only: the table's
    functions need the GIL, and cffi releases it around foreign calls, so the pure build keeps to
    ``__dlpack__``. The table's struct is taken and owned in one C call (``native.exchange_import``): no Python
    code (a signal handler's) runs while no one owns it.
    """
    if native is None or not AVAILABLE:
        return None
    return cast("Tensor | None", native.exchange_import(x))


def order(producer: int, consumer: int, device_type: int, device_id: int) -> None:
    """Make the ``consumer`` stream wait for the work queued on the ``producer`` stream (DLPack stream integers
    of the device's rule) on a device, through its backend (an event recorded and waited on): what a
    producer's ``__dlpack__(stream=consumer)`` does, for an import through its exchange table."""
    device = (device_type, device_id)
    _backends.for_device(device_type, f"ordering {device_name(device_type)} streams").wait(producer, consumer, device)


# DLPack 1.3: consumers find dlbind's C exchange table on the type (when the header declares the API).
_TABLE = table()
if _TABLE is not None:
    Tensor.__dlpack_c_exchange_api__ = _TABLE

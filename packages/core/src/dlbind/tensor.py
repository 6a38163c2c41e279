"""``dlbind.Tensor``: a zero-copy view of a consumed DLPack tensor that owns the producer's memory.

The producer's deleter runs exactly once, when the last user lets go: the Tensor is referenced by
every view made of it (numpy arrays through ``__array_interface__``, re-exported capsules), and the
deleter runs when the Tensor itself is freed. There is deliberately no ``release()``: freeing memory
that a view still uses would be a crash waiting to happen. Read the metadata, hand the Tensor to
numpy (``np.asarray``, ``np.from_dlpack``), torch (``torch.from_dlpack``), ctypes or C (``data_ptr``).
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, ClassVar

import dlbind.capsule as _capsule
from dlbind._ffi import ffi, native
from dlbind._generated.enums import DLPACK_VERSION, DeviceType, Flags
from dlbind._generated.tables import DEVICE_BY_NAME, KNOWN_DEVICE_TYPES
from dlbind.devices import DEFAULT_STREAMS, HOST_ACCESSIBLE, Device, device_name, unnamed_note
from dlbind.devices import MEMBERS as _MEMBERS
from dlbind.dtypes import SUBBYTE_PADDED, DType
from dlbind.dtypes import UINT8 as _UINT8
from dlbind.export import byte_span, byte_strides, export_view, host_ready
from dlbind.validate import consumed

if TYPE_CHECKING:  # the type of capsules (types.CapsuleType from Python 3.13); mypy always has this stub
    from typing_extensions import CapsuleType

__all__ = ["Tensor", "as_asked", "from_capsule", "from_managed", "received"]

_new = tuple.__new__  # a Device of a checked pair, without NamedTuple's Python-level __new__

_KNOWN_DEVICES = KNOWN_DEVICE_TYPES  # the generated table, as the C fast path's tables.h
# CUDA memory a GPU addresses: device, pinned host (mapped under unified addressing) and managed
# (by name: an older header spells them otherwise, or lacks managed memory)
_CUDA_ARRAY_DEVICES = frozenset(DEVICE_BY_NAME[n] for n in ("cuda", "cuda_host", "cuda_managed") if n in DEVICE_BY_NAME)
_READ_ONLY = _capsule.READ_ONLY
_IS_COPIED = _capsule.IS_COPIED
_NO_FLAGS = not list(Flags)  # a DLPack 0.x header: no flags (an IntFlag without members cannot be made)
_PACKAGE = _capsule.PACKAGE


class _PureCore:
    """The pure build's stand-in for the C ``TensorCore`` (same attributes, built from cffi structs)."""

    __slots__ = (
        "__weakref__",
        "_bits",
        "_byte_offset",
        "_code",
        "_data_ptr",
        "_device_id",
        "_device_type",
        "_flags",
        "_lanes",
        "_owner",
        "_shape",
        "_source",
        "_stream",
        "_strides",
        "_version",
    )
    # Read-only, as the C TensorCore's members are: even object.__setattr__ cannot change what a Tensor says of
    # its memory (attrgetter: read in C, no Python frame); typed as the C core's (_fastpath.pyi)
    if TYPE_CHECKING:

        @property
        def byte_offset(self) -> int: ...
        @property
        def data_ptr(self) -> int: ...
        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def strides(self) -> tuple[int, ...]: ...
        @property
        def version(self) -> tuple[int, int] | None: ...

    else:
        byte_offset = property(operator.attrgetter("_byte_offset"))
        data_ptr = property(operator.attrgetter("_data_ptr"))
        shape = property(operator.attrgetter("_shape"))
        strides = property(operator.attrgetter("_strides"))
        version = property(operator.attrgetter("_version"))

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """A Tensor is made by an import only (:func:`dlbind.from_dlpack`), as in the compiled build."""
        raise TypeError(f"cannot create '{cls.__name__}' instances")

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Neither pickled nor copied by the ``copy`` module (a Tensor is a view of memory it does not own): as the
        compiled build's. ``Tensor.copy()`` copies the data."""
        raise TypeError(f"cannot pickle '{type(self).__name__}' object")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType:
        return export_view(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __buffer__(self, flags: int) -> memoryview:
        """The buffer protocol of the pure build (PEP 688: Python 3.12 and newer): host tensors that are
        row-major contiguous, or one-dimensional with any nonzero stride, of a dtype ``memoryview.cast`` knows
        (not complex), not zero-size with more than one dimension; the C build's buffer protocol has every
        layout. BufferError otherwise."""
        t: Any = self
        if t._device_type not in HOST_ACCESSIBLE:
            kind = t._device_type
            raise BufferError(
                f"the buffer protocol needs host memory; this tensor is on {device_name(kind)}{unnamed_note(kind)}"
            )
        if flags & _PYBUF_WRITABLE and t.readonly:
            raise BufferError("a writable buffer was requested of a read-only tensor")
        try:
            fmt = t.dtype.format
        except ValueError as e:
            raise BufferError(str(e)) from None
        if len(fmt) != 1:
            raise BufferError(f"the pure build's buffer protocol cannot give {t.dtype.name} (format {fmt!r})")
        item = t.dtype.itemsize
        contiguous = t.size == 0 or t.is_contiguous()
        if not contiguous and t.ndim != 1:
            raise BufferError(
                "the pure build's buffer protocol gives row-major contiguous or 1-D tensors only (this one has "
                f"strides {t.strides}); np.asarray(t) views any layout, and the compiled build's memoryview too"
            )
        if t.size == 0 and t.ndim > 1:  # memoryview.cast refuses zeros in a shape
            raise BufferError(f"the pure build's buffer protocol cannot give a zero-size tensor of shape {t.shape}")
        if t._stream is not None:  # managed memory a stream orders: synchronised before the CPU reads
            host_ready(t)
        if t.size == 0:
            raw = memoryview(bytearray())
        else:
            low, high = byte_span(t.shape, t.byte_strides, item)  # from the lowest address an element starts at
            start = t.data_ptr + t.byte_offset + low
            raw = memoryview(ffi.buffer(ffi.cast("char *", start), high - low))
        if t.readonly:
            raw = raw.toreadonly()
        if contiguous:
            return raw.cast(fmt, t.shape) if t.size else raw.cast(fmt)  # cast refuses a 0 in a shape
        step = t.strides[0]  # nonzero: a zero stride over more than one element is not contiguous
        if step == 0:
            raise BufferError("the buffer protocol cannot give a broadcast (zero-stride) tensor")
        return raw.cast(fmt)[0 if step > 0 else -1 :: step]


_EMPTY = ffi.new("char[64]")  # lives as long as the module: where zero-size tensors point numpy
_EMPTY_ADDRESS = (int(ffi.cast("uintptr_t", _EMPTY)) + 31) // 32 * 32  # aligned for every dtype numpy has
_PYBUF_WRITABLE = 0x0001  # inspect.BufferFlags.WRITABLE (Python 3.12)

# Users see the method as Tensor's (as in the compiled build's messages of a wrong call).
_PureCore.__dlpack__.__qualname__ = "Tensor.__dlpack__"

if TYPE_CHECKING:  # the C core's members, typed (_fastpath.pyi): _PureCore has the same ones
    from dlbind._fastpath import TensorCore as _Core
else:
    _Core = native.TensorCore if native is not None else _PureCore
# How the pure build's import writes a Tensor's slots while it makes it (Tensor.__setattr__ refuses writes)
_set = object.__setattr__


class Tensor(_Core):
    """A consumed DLPack tensor (see :func:`dlbind.from_dlpack`).

    Attributes: ``shape``, ``strides`` (elements), ``byte_strides``, ``dtype``, ``device``,
    ``data_ptr`` (as the producer gave it) and ``byte_offset``, ``readonly``, ``version`` (None for
    a legacy capsule), ``flags``, ``nbytes``, ``ndim``, ``size``. Exports ``__dlpack__`` again, the
    array interface, and the buffer protocol (pure build: Python 3.12+, contiguous or 1-D tensors).
    """

    __slots__ = ()

    # shape, strides, data_ptr, byte_offset, ndim, version and the private fields below (_code, _bits, _lanes,
    # _device_type, _device_id, _flags) are the core's read-only members (dlbind._fastpath.TensorCore, typed in
    # _fastpath.pyi). _stream: the stream (a DLPack stream integer) the tensor's data is ready on: the consumer
    # stream it was imported with on a device with streams (None there names the rule's default); None when
    # nothing orders it (a stream-free device, or an import with stream=-1). Exporting it again to a consumer on
    # another stream makes that stream wait for this one (the device's backend records an event).

    #: DLPack 1.3's C exchange API: dlbind's table, the ``"dlpack_exchange_api"`` capsule consumers find on the type
    #: (set by :mod:`dlbind.exchange` when the runtime's header declares the API)
    __dlpack_c_exchange_api__: ClassVar[CapsuleType]

    @property
    def stream(self) -> int | None:
        """The stream the data is ready on (a DLPack stream integer), or None when no stream orders it."""
        return self._stream

    @property
    def dtype(self) -> DType:
        return DType(self._code, self._bits, self._lanes)

    @property
    def device(self) -> Device:
        """Its :class:`dlbind.Device`: ``(DeviceType, device_id)``, named ``"cuda:1"``; a device type newer than this
        runtime's header is its plain number."""
        kind = self._device_type
        return _new(Device, (_MEMBERS.get(kind, kind), self._device_id))

    @property
    def flags(self) -> Flags:
        """DLPack flags (``Flags.READ_ONLY``, ``Flags.IS_COPIED``, ...); empty for legacy capsules (the int 0
        in a vendored copy of a DLPack 0.x header, whose ``Flags`` has no member)."""
        if _NO_FLAGS:
            return self._flags  # type: ignore[return-value]
        return Flags(self._flags)

    # -- metadata ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(self.size, padded=bool(self._flags & SUBBYTE_PADDED))

    @property
    def readonly(self) -> bool:
        return bool(self._flags & _READ_ONLY)

    @property
    def byte_strides(self) -> tuple[int, ...]:
        dtype = self.dtype
        if dtype.bits * dtype.lanes % 8 and not self._flags & SUBBYTE_PADDED:
            raise BufferError(f"{dtype.name} is packed below a byte: strides have no byte size")
        return tuple(s * dtype.itemsize for s in self.strides)

    def is_contiguous(self) -> bool:
        """Row-major contiguous (size-1 dimensions may have any stride; a tensor with no element, any shape with a
        0 in it, is contiguous whatever its strides, as numpy's C-contiguous flag says)."""
        shape = self.shape
        if 0 in shape:
            return True
        expected = 1
        for dim, stride in zip(reversed(shape), reversed(self.strides), strict=True):
            if dim != 1 and stride != expected:
                return False
            expected *= dim
        return True

    def __repr__(self) -> str:
        flags = f", flags={self.flags!r}" if self._flags else ""
        kind = self._device_type
        where = device_name(kind) if kind in _KNOWN_DEVICES else str(kind)  # a newer header's type: its number
        shown = f"shape={self.shape}, dtype={self.dtype.name}, device={where}:{self._device_id}{flags}"
        return f"{_PACKAGE}.Tensor({shown})"

    def copy(self) -> Tensor:
        """A compact row-major copy in memory dlbind owns (``Flags.IS_COPIED`` set), on the tensor's own device:
        the CPU's memory copied on the CPU, pinned memory by the device's backend into new pinned memory (ready when
        returned: :func:`dlbind.export.copy_pinned`), device and managed memory by the device's backend
        (``dlbind-cuda``, ...), enqueued on the stream the tensor is ready on (:attr:`stream`; none: the device's
        default stream, as ``from_dlpack(t, copy=True)`` asks), where the copy is then ready (its :attr:`stream`)."""
        stream = self._stream if self._stream is not None else DEFAULT_STREAMS.get(self._device_type)
        return reexported(self, stream, copy=True, own=True)

    # -- immutable: what describes the memory is fixed when the tensor is made (issue 38) ----------
    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{_PACKAGE}.Tensor is immutable: {name!r} cannot be set")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{_PACKAGE}.Tensor is immutable: {name!r} cannot be deleted")

    # -- exporting again -----------------------------------------------------------------------
    def __dlpack_device__(self) -> tuple[DeviceType, int]:
        kind = self._device_type  # the protocol's plain pair (Tensor.device is the named one)
        return _MEMBERS.get(kind, kind), self._device_id  # type: ignore[arg-type]

    def _host_ready(self) -> None:
        """The wait before a host view of this tensor (:func:`dlbind.export.host_ready`): the compiled build's buffer
        protocol calls it where a stream orders host-accessible memory that is not the CPU's."""
        host_ready(self)

    def _interface(self, typestr: str, itemsize: int) -> dict[str, Any]:
        if self._device_type not in HOST_ACCESSIBLE:
            kind = self._device_type
            raise BufferError(f"numpy needs host memory; this tensor is on {device_name(kind)}{unnamed_note(kind)}")
        if self.dtype.is_subbyte and not self._flags & SUBBYTE_PADDED:
            raise BufferError(f"{self.dtype.name} is packed below a byte: numpy cannot view it")
        strides = byte_strides(self.strides, itemsize)
        if self._stream is not None:  # managed memory a stream orders: synchronised before numpy reads (no call else)
            host_ready(self)
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": typestr,
            # numpy before 2.3 refuses a NULL pointer even for zero elements: give an empty tensor a real,
            # aligned address that nothing reads (the producer's may be NULL)
            "data": (self.data_ptr + self.byte_offset if self.size else _EMPTY_ADDRESS, self.readonly),
            "strides": strides,
        }

    @property
    def __array_interface__(self) -> dict[str, Any]:
        """numpy's array interface (v3) of host memory, for dtypes a typestr can name; others go through
        ``__array__`` (which says why numpy cannot read device memory). A tensor elsewhere has no such attribute
        (``hasattr`` is False), as it has no ``__cuda_array_interface__`` outside CUDA memory."""
        if self._device_type not in HOST_ACCESSIBLE:
            kind = self._device_type
            raise AttributeError(f"__array_interface__: this tensor is on {device_name(kind)}, not in host memory")
        try:
            typestr = self.dtype.typestr
        except ValueError:
            # bfloat16, fp8, ...: a typestr cannot name them. AttributeError makes numpy use __array__.
            raise AttributeError("__array_interface__") from None
        return self._interface(typestr, self.dtype.itemsize)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface (v3) of a tensor in CUDA memory (device, pinned or managed), for Numba, CuPy...

        ``stream`` is the stream the data is ready on (:attr:`stream`): the stream it was imported with, 1
        (the legacy default stream, the array API's meaning of ``stream=None``) when none orders it, so a
        consumer that waits on it is ordered after the producer's work. Tensors on other devices have no
        such attribute (``hasattr`` is False), nor have dtypes a typestr cannot name.
        """
        if self._device_type not in _CUDA_ARRAY_DEVICES:
            raise AttributeError(
                f"__cuda_array_interface__: this tensor is on {device_name(self._device_type)}, not in CUDA memory"
            )
        dtype = self.dtype
        try:
            typestr = dtype.typestr
        except ValueError:
            raise AttributeError(f"__cuda_array_interface__: no typestr names {dtype.name} (use __dlpack__)") from None
        item = dtype.itemsize
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": typestr,
            "data": (self.data_ptr + self.byte_offset if self.size else 0, self.readonly),
            "strides": None if self.is_contiguous() else byte_strides(self.strides, item),
            "stream": self._stream if self._stream is not None and self._stream > 0 else 1,
        }

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


def from_managed(
    managed: Any,
    versioned: bool,
    *,
    allow_vector: bool = False,
    source: object = None,
    owner: Any = None,
    ready: tuple[int, int] | None = None,
) -> Tensor:
    """Take ownership of a consumed ``DLManagedTensor(Versioned)*`` as a Tensor.

    A legacy struct's dtype is read as spec/dtypes.toml's ``[[legacy]]`` says. On invalid content the
    deleter runs (exactly once), then BufferError says what was wrong (:func:`dlbind.validate.consumed`).
    ``source``: the owner of a struct dlbind exported, moved out of the registry (``dlbind.capsule.adopt``,
    ``take_owned``), which the Tensor keeps (None: a foreign producer's struct); ``owner``: the struct's
    ``dlbind.capsule.Owner``, made when the capsule was taken (None: made here); ``ready``: ``(device type,
    stream)``: the stream the data is ready on when the tensor is on that device type (given here: a Tensor is
    never changed once made).
    """
    if native is not None:
        tensor: Tensor = native.wrap(int(ffi.cast("uintptr_t", managed)), versioned, allow_vector, ready)
        return tensor
    if owner is None:
        owner = _capsule.Owner(managed)  # the deleter runs exactly once: on invalid content, or with the Tensor
    return _made((owner, versioned, source), allow_vector, ready)


def _made(
    taken: tuple[Any, bool, object], allow_vector: bool, ready: tuple[int, int] | None, x: Any = None, plan: Any = None
) -> Tensor:
    """The pure build's Tensor of a taken struct (``taken``: its ``dlbind.capsule.Owner``, whether it is versioned,
    and the owner of a struct dlbind exported, as ``dlbind.capsule.take_owned`` gives them), checked first by
    :func:`dlbind.validate.consumed` (naming ``x``), then finished as :func:`from_capsule` says."""
    owner, versioned, source = taken
    t, shape, strides, version, flags = consumed(owner, versioned, allow_vector, x)
    code = int(t.dtype.code)
    if plan is not None:  # finished as x's plan says, as the compiled build's dlbind_finished (tensor.c)
        if plan.immutable and not flags & _IS_COPIED:
            flags |= _READ_ONLY
        uint8 = code == _UINT8.code and int(t.dtype.bits) == 8 and int(t.dtype.lanes) == 1
        if uint8 and plan.python and (read := plan.uint8_read_as(x)) >= 0:
            code = t.dtype.code = read  # in place: the consumer owns the struct from the moment it took the capsule
    tensor = object.__new__(Tensor)  # Tensor() itself refuses: only an import makes one
    # the pure core's slots, written once here (Tensor.__setattr__ refuses every later write)
    _set(tensor, "_owner", owner)
    _set(tensor, "_shape", shape)
    _set(tensor, "_strides", strides)
    _set(tensor, "_version", version)
    _set(tensor, "_flags", flags)
    _set(tensor, "_data_ptr", int(ffi.cast("uintptr_t", t.data)))
    _set(tensor, "_byte_offset", int(t.byte_offset))
    _set(tensor, "_code", code)
    _set(tensor, "_bits", int(t.dtype.bits))
    _set(tensor, "_lanes", int(t.dtype.lanes))
    device_type = int(t.device.device_type)
    _set(tensor, "_device_type", device_type)
    _set(tensor, "_device_id", int(t.device.device_id))
    ordered = ready is not None and ready[0] == device_type and ready[1] != -1
    _set(tensor, "_stream", ready[1] if ordered else None)  # type: ignore[index]
    # A struct dlbind exported: its owner moves here from the registry, where the garbage collector
    # cannot see it (a cycle through it would never be collected); None for a foreign producer's.
    _set(tensor, "_source", source)
    return tensor


def from_capsule(
    capsule: object,
    *,
    allow_vector: bool = False,
    x: Any = None,
    plan: Any = None,
    ready: tuple[int, int] | None = None,
) -> Tensor:
    """Consume a raw DLPack capsule (``"dltensor_versioned"`` or ``"dltensor"``).

    ``x`` and ``plan``: the producer that gave it (the validator names it where the tensor's extent is at fault)
    and its ``dlbind.sources.ExportPlan``, whose facts finish the import: read-only when ``x``'s library never
    writes its arrays (``immutable`` in spec/adapters.toml: a legacy capsule cannot say so, and a writable alias
    would let a consumer change an immutable array; a copy the producer made for us stays writable), and bool that
    ``x``'s capsules call uint8 (``export.bool``) read as bool (what ``plan.uint8_read_as(x)`` says). ``ready``:
    ``(device type, stream)``, the stream the data is ready on when the tensor is on that device type."""
    if native is not None:  # taken, owned and finished in one step, in C: no Python code (a signal's) runs between
        return native.take_wrap(capsule, allow_vector, ready, x, plan)  # type: ignore[no-any-return]
    return _made(_capsule.take_owned(capsule), allow_vector, ready, x, plan)  # taken, checked, made and finished


def reexported(
    tensor: Tensor, stream: int | None, *, dl_device: Any = None, copy: bool | None = None, own: bool = False
) -> Tensor:
    """``tensor`` exported again and imported (:func:`dlbind.export.export_view`), ready on ``stream`` (None: where
    the export leaves it): a view for another stream (which waits for the one ``tensor`` is ready on, and says it
    is a copy where ``tensor`` does), or with ``copy=True`` a compact copy dlbind owns (``own``) or the one
    ``dl_device`` asks, made by the device's backend."""
    copied = copy is None and bool(tensor._flags & _capsule.IS_COPIED)  # a view of a copy is one
    made = export_view(
        tensor, stream=stream, max_version=DLPACK_VERSION, dl_device=dl_device, copy=copy, own=own, copied=copied
    )
    on_host = dl_device is not None
    return from_capsule(made, ready=None if stream is None or on_host else (tensor._device_type, stream))


def received(
    made: object, of: Any, plan: Any, ready: tuple[int, int] | None, streams: tuple[int | None, int | None], *,
    allow_vector: bool, to_host: Any, target: Any, copy: bool | None, given: bool,
) -> Tensor:  # fmt: skip
    """The Tensor an import asked of ``of`` (its plan ``plan``) for, from the capsule ``made`` it gave: made and
    finished (:func:`from_capsule`; ``ready``: the ``(device type, stream)`` its data is ready on); for
    ``streams``, the stream it was asked on and the one wanted (``dlbind.devices.streams``), a view for the one
    wanted where that is another (it waits for the one asked); the host copy of the device ``to_host`` (None:
    none), made by the device's backend; else held to ``target`` and ``copy`` (:func:`as_asked`; ``given``:
    ``of``'s system gave the capsule through a function of its own)."""
    tensor = from_capsule(made, allow_vector=allow_vector, x=of, plan=plan, ready=ready)
    asked, wanted = streams
    if wanted is not None and wanted != asked and tensor._stream == asked:
        tensor = reexported(tensor, wanted)  # the stream wanted waits for the one asked: a view for it orders that
    if to_host is not None:
        return reexported(tensor, None, dl_device=to_host, copy=True)
    if target is None and (copy is None or copy == bool(tensor._flags & _capsule.IS_COPIED)):
        return tensor  # as asked: nothing to check
    return as_asked(tensor, of, target, copy, given)


def as_asked(tensor: Tensor, of: Any, target: Any, copy: bool | None, given: bool) -> Tensor:
    """The imported ``tensor`` held to the device and ``copy`` asked (``given``: ``of``'s system exported it
    through a function of its own, which takes neither): host-readable memory (pinned, managed) where the CPU was
    asked read there in place, as a producer that honours ``dl_device`` exports it; refused where it cannot be
    held so, copied where a legacy producer could not say whether it copied."""
    pinned = target is not None and target[0] == DeviceType.kDLCPU and tensor._device_type in HOST_ACCESSIBLE
    if pinned and tensor.device != target:  # pinned or managed memory: read in place as the CPU's, as dlbind's
        tensor = reexported(tensor, None, dl_device=target)  # own export reads it when the CPU is asked
    if target is not None and tensor.device != target:
        if given:
            raise BufferError(f"{type(of).__name__} exports on {tensor.device} only; import it there and move it")
        raise BufferError(f"the producer returned a tensor on {tensor.device}, not on {target}")
    if copy is False and tensor._flags & _capsule.IS_COPIED and not given:
        raise BufferError("copy=False, but the producer made a copy")
    if copy is True and not tensor._flags & _capsule.IS_COPIED:
        tensor = tensor.copy()
    return tensor

"""Type stubs of the C extension ``dlbind._fastpath``, the compiled build's hot paths (the C sources in
``_fastpath/``: ``module.c`` names the functions, ``tensor.c``, ``exporter.c`` and ``convert.c`` the types).

``dlbind.tensor.Tensor`` is typed as a subclass of :class:`TensorCore` (the pure build's ``_PureCore`` has the same
members). ``dlbind._ffi.native`` is this module or None, typed ``Any``: these stubs type the module for readers,
for stubtest and for ``Tensor``'s members, not dlbind's own calls.
"""

from collections.abc import Callable
from typing import Any, Final, final

from typing_extensions import CapsuleType, Self, disjoint_base

from dlbind._generated.enums import DeviceType
from dlbind.described import Exporter
from dlbind.tensor import Tensor

#: At most this many export blocks deleted while their capsule may still live are kept from reuse (the oldest is
#: reused past it): dlbind.capsule.QUARANTINE, the same number.
QUARANTINE: Final[int]

class _Exports:
    """What both C types export by (no such class at run time: each has the method): the array API's __dlpack__."""

    def __dlpack__(
        self,
        /,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType: ...

@disjoint_base  # a C type with fields of its own: no class derives from it and another such base
class TensorCore(_Exports):
    """The C core of dlbind.Tensor: owns a consumed DLPack tensor (read-only members)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (DLPack's unit)."""
    @property
    def data_ptr(self) -> int:
        """The data pointer as the producer gave it (add ``byte_offset``)."""
    @property
    def byte_offset(self) -> int: ...
    @property
    def ndim(self) -> int: ...
    @property
    def version(self) -> tuple[int, int] | None:
        """``(major, minor)`` of a versioned capsule, None for a legacy one."""
    # the dtype's fields, the device's and the DLPack flags, as the struct says (read-only: members in C)
    _code: Final[int]
    _bits: Final[int]
    _lanes: Final[int]
    _device_type: Final[int]
    _device_id: Final[int]
    _flags: Final[int]
    @property
    def _stream(self) -> int | None:
        """The stream (a DLPack stream integer) the data is ready on: the consumer stream it was imported with on a
        device with streams (None there names the rule's default); None when nothing orders it (a stream-free
        device, or an import with stream=-1)."""
    # the buffer protocol, in C on every Python (visible as these methods from Python 3.12, PEP 688)
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...

@final
class BufferExporter(_Exports):
    """A dlbind.Exporter over an object's buffer (what dlbind.asdlpack returns for buffers): registered as a virtual
    subclass of :class:`dlbind.Exporter`, named ``dlbind.Exporter``."""

    def __dlpack_device__(self, /) -> tuple[DeviceType, int]: ...
    def __reduce_ex__(self, protocol: object, /) -> Any:
        """Refused (TypeError): an Exporter is neither pickled nor copied."""

@final
class Function:
    """A public function of dlbind's compiled build (``dlbind.convert``, ``from_dlpack``, ``asdlpack``): calls its C
    function, reads as ``__wrapped__``, the Python implementation (help, signature)."""

    __wrapped__: Callable[..., Any]
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, instance: object, owner: type | None = None, /) -> Self: ...

def public(builtin: Callable[..., Any], python: Callable[..., Any], /) -> Function:
    """The public function calling ``builtin`` (a fast-call function of this module) that reads as ``python``."""

def set_loader(loader: Callable[[], object], /) -> None:
    """What a call before :func:`configure` calls first (``dlbind._load.ensure``)."""

def configure(
    *,
    tensor_type: type[Tensor],
    cpu_device: tuple[DeviceType, int],
    asdlpack: Callable[..., Exporter],
    from_dlpack: Callable[..., Tensor],
    check_managed: Callable[..., object],
    export_view: Callable[..., CapsuleType],
    allocate: Callable[[int], object],
    convert: Callable[..., Any],
    routes: dict[Any, Any],
    plans: object,
    order: Callable[[int, int, int, int], None],
) -> None:
    """The Python pieces the C code uses (``dlbind._wiring`` passes them at import); every one required."""

def counts() -> tuple[int, int]:
    """(exports made in C, deleters run in C)."""

def ndarray_struct() -> bool | None:
    """Whether asdlpack reads exact numpy.ndarrays from their struct: True, False (its probe disagreed), None (none
    probed yet)."""

def pinned() -> int:
    """Export blocks ever pinned (deleted while their capsule may live; kept for reuse, never freed)."""

def export(keepalive: object, address: int, versioned: bool, /) -> CapsuleType:
    """A capsule of the struct at ``address``, which ``keepalive`` keeps alive until its deleter runs."""

def take(capsule: CapsuleType, /) -> tuple[int, bool]:
    """``(address, versioned)`` of the struct a DLPack capsule holds, renamed ``used_*``: its deleter is the caller's
    to run."""

def forget_type(type: type, /) -> None:
    """Drop the type's cached entry (its plan learned a call style): made again when next read."""

def asdlpack(obj: object, *, readonly: bool | None = None, device_id: int | None = None) -> Exporter | BufferExporter:
    """See dlbind.producer.asdlpack."""

def from_dlpack(
    x: object, *, device: Any = None, copy: bool | None = None, stream: int | None = None, allow_vector: bool = False
) -> Tensor:
    """See dlbind.consumer.from_dlpack."""

def wrap(address: int, versioned: bool, allow_vector: bool, ready: tuple[int, int] | None = None, /) -> Tensor:
    """The Tensor that owns the struct at ``address``."""

def take_wrap(
    capsule: CapsuleType,
    allow_vector: bool,
    ready: tuple[int, int] | None = None,
    producer: object = None,
    plan: object = None,
    /,
) -> Tensor:
    """Take the capsule, own its struct and finish the Tensor as the producer's plan says, in one step."""

def exchange_import(obj: object, /) -> Tensor | None:
    """A Tensor owning what ``obj``'s exchange table handed over, or None without a usable table."""

def exchange_table() -> CapsuleType | None:
    """dlbind's own exchange table capsule (``"dlpack_exchange_api"``); None when the header has no exchange API."""

def convert_to(x: object, route: Any, /) -> Any:
    """convert's C route of a ``dlbind.routes.Route`` (NotImplemented: the Python route's)."""

def copy_strided(dst: int, src: int, shape: tuple[int, ...], byte_strides: tuple[int, ...], itemsize: int, /) -> None:
    """Row-major copy of strided host memory (the GIL released)."""

def convert(x: object, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Any:
    """See dlbind.conversion.convert."""

"""Wires the compiled fast path to the Python layers it delegates to; the top of the runtime.

The C fast path answers the common calls and hands every other case to the Python implementations
(same signatures, same errors). Those live in every layer, from :mod:`dlbind.tensor` up to
:mod:`dlbind.producer`, so the wiring sits above all of them and :mod:`dlbind` calls
:func:`configure` once at import.
"""

from __future__ import annotations

from dlbind import consumer, export, producer
from dlbind._ffi import native
from dlbind._generated.enums import DeviceType
from dlbind.devices import HOST_ACCESSIBLE
from dlbind.tensor import _KNOWN_CODES, _KNOWN_DEVICES, Tensor, check_managed

__all__ = ["configure"]


def configure() -> None:
    """Hand the compiled fast path the tables and the Python code it delegates to."""
    if native is None:
        return

    def table(values: frozenset[int]) -> bytes:
        return bytes(1 if i in values else 0 for i in range(256))

    native.configure(
        Tensor,
        (DeviceType.kDLCPU, 0),
        table(_KNOWN_CODES),
        table(_KNOWN_DEVICES),
        table(frozenset(int(d) for d in HOST_ACCESSIBLE)),
        producer.asdlpack,
        consumer.from_dlpack,
        check_managed,
        export.export_view,
        consumer.after_type_error,
    )

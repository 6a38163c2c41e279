"""Wires the compiled fast path to the Python layers it delegates to; the top of the runtime.

The C extension ``dlbind._fastpath`` answers the common calls and hands every other case to the
Python implementations (same signatures, same errors). Those live in every layer, from
:mod:`dlbind.tensor` up to :mod:`dlbind.conversion`, so the wiring sits above all of them and
:mod:`dlbind` calls :func:`configure` once at import. Every Python callable the C code calls is
passed here, by name: the C code imports no module.
"""

from __future__ import annotations

from typing import Any

from dlbind import consumer, exchange, export, producer, sources
from dlbind._ffi import native
from dlbind._generated.enums import DeviceType
from dlbind.tensor import Tensor
from dlbind.validate import check_managed

__all__ = ["configure"]


def configure() -> dict[str, Any]:
    """Hand the compiled fast path the Python code it delegates to. Returns the compiled build's public
    functions by name (none in the pure build)."""
    if native is None:
        return {}
    # the compiled convert's C routes and its Python side (the pure build loads them with dlbind.convert); the
    # compiled build loads them now, for convert's docstring too (below)
    from dlbind import conversion, routes

    producer.Exporter.register(native.BufferExporter)  # what the C asdlpack returns is an Exporter
    native.configure(
        tensor_type=Tensor,
        cpu_device=(DeviceType.kDLCPU, 0),
        asdlpack=producer.asdlpack,
        from_dlpack=consumer.resume,  # each entry point's one fall-back, told where the C code stopped
        check_managed=check_managed,
        export_view=export.export_view,
        allocate=exchange.allocate,
        convert=conversion.resume,
        routes=routes.ROUTES,
        plans=sources.PLANS,  # read by C, never called: a type without a plan yet is Python's to plan
        order=exchange.order,
    )
    # the public functions: called in C, read as the Python implementations (help(), inspect.signature())
    python = {"asdlpack": producer.asdlpack, "from_dlpack": consumer.from_dlpack, "convert": conversion.convert}
    return {name: native.public(getattr(native, name), fn) for name, fn in python.items()}

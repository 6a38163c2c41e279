"""What each DLPack release declares: look up when a name appeared, was renamed or removed.

Names are qualified C names as ``dlpack.h`` spells them: ``"DLTensor"``, ``"DLTensor.byte_offset"``,
``"DLDeviceType.kDLCUDA"``, ``"DLPACK_FLAG_BITMASK_READ_ONLY"``; a name an older release had before a rename
is one too (``"DLDeviceType.kCPU"``, ``"DLTensor.ctx"``, ``"DLContext.device_type"``). The tables describe
the releases up to :data:`CANONICAL`, the header this package is generated from (a vendored copy's: its own
header), never after: a later name is unknown here (``KeyError``), and so is what a later release declares
(``ValueError``).

>>> from dlbind import spec
>>> spec.since("DLDeviceType.kDLCUDA")
(0, 5)
>>> spec.renamed_from("DLDeviceType.kDLCUDA")
(('kDLGPU', (0, 5)), ('kGPU', (0, 2)))
>>> spec.available("DLManagedTensorVersioned", (0, 8))
False
"""

from __future__ import annotations

from dlbind._generated.spec_tables import CANONICAL, FETCHED, KINDS, RELEASES, REMOVED, RENAMED_FROM, SINCE

__all__ = ["CANONICAL", "FETCHED", "RELEASES", "available", "kind", "names_in", "removed_in", "renamed_from", "since"]

Version = tuple[int, int]


def _release(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def _known(name: str) -> str:
    if name not in SINCE:
        raise KeyError(
            f"{name!r} is not declared by any DLPack release up to {_release(CANONICAL)}, the header these "
            "tables describe (names look like 'DLTensor.ndim')"
        )
    return name


def _described(version: Version) -> tuple[int, ...]:
    if tuple(version) > CANONICAL:
        raise ValueError(
            f"DLPack {_release(version)} is after {_release(CANONICAL)}, the newest release these tables "
            "describe (the header they are generated from): what it declares is not known here"
        )
    return tuple(version)


def since(name: str) -> Version:
    """The release that introduced ``name``."""
    return SINCE[_known(name)]


def removed_in(name: str) -> Version | None:
    """The first release without ``name``, or None if the newest release still has it."""
    return REMOVED.get(_known(name))


def renamed_from(name: str) -> tuple[tuple[str, Version], ...]:
    """Earlier names of ``name``, newest first, each with the release that renamed it."""
    return RENAMED_FROM.get(_known(name), ())


def kind(name: str) -> str:
    """``struct``, ``field``, ``enum``, ``member``, ``macro``, ``typedef`` or ``function``."""
    return KINDS[_known(name)]


def available(name: str, version: Version) -> bool:
    """Whether release ``version`` declares ``name`` (under this name); ``ValueError`` after :data:`CANONICAL`."""
    gone = removed_in(name)
    release = _described(version)
    return since(name) <= release and (gone is None or release < gone)


def names_in(version: Version) -> list[str]:
    """Every qualified name release ``version`` declares, sorted; ``ValueError`` after :data:`CANONICAL`."""
    _described(version)
    return sorted(n for n in SINCE if available(n, version))

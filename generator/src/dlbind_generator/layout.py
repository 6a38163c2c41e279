"""Struct layout on x86-64 (System V LP64), derived from the model, not measured.

Rules: every scalar is aligned to its size; a struct's alignment is its widest member's; each
field starts at the next multiple of its alignment; the size is rounded up to the alignment.
Enums are ``int`` (4 bytes; C leaves this to the ABI, and SysV says int). A test compiles the
canonical header and checks every number here against the C compiler's ``sizeof``/``offsetof``.
"""

from __future__ import annotations

ABI = "x86-64 System V (LP64)"
POINTER = 8

# Our own widths table: the stub stdint.h only tells pycparser that these names are types.
SCALARS: dict[str, int] = {
    "char": 1,
    "signed char": 1,
    "unsigned char": 1,
    "_Bool": 1,
    "short": 2,
    "short int": 2,
    "unsigned short": 2,
    "unsigned short int": 2,
    "signed short": 2,
    "int": 4,
    "signed": 4,
    "signed int": 4,
    "unsigned": 4,
    "unsigned int": 4,
    "long": 8,
    "long int": 8,
    "signed long": 8,
    "unsigned long": 8,
    "unsigned long int": 8,
    "long long": 8,
    "long long int": 8,
    "unsigned long long": 8,
    "unsigned long long int": 8,
    "float": 4,
    "double": 8,
    "int8_t": 1,
    "uint8_t": 1,
    "int16_t": 2,
    "uint16_t": 2,
    "int32_t": 4,
    "uint32_t": 4,
    "int64_t": 8,
    "uint64_t": 8,
    "intptr_t": 8,
    "uintptr_t": 8,
    "size_t": 8,
    "ptrdiff_t": 8,
}
ENUM = 4


def align_up(offset: int, align: int) -> int:
    return (offset + align - 1) // align * align


def struct_layout(members: list[tuple[int, int]]) -> tuple[list[int], int, int]:
    """(size, align) per member -> (offsets, struct size, struct align)."""
    offsets, offset, align = [], 0, 1
    for size, a in members:
        offset = align_up(offset, a)
        offsets.append(offset)
        offset += size
        align = max(align, a)
    return offsets, align_up(offset, align), align

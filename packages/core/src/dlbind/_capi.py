"""The few CPython C-API calls the pure build needs, through ctypes.

Two families: ``*_obj`` take Python objects (normal calls), ``*_raw`` take the object's address
(for capsule destructors, which run while the object is being freed and must not revive it).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_ssize_t, c_void_p, py_object

# Our own handle on the interpreter's symbols: ``ctypes.pythonapi`` caches one function object per
# name for the whole process, and other libraries (pydlpack) set their own argtypes on it.
_api = ctypes.PyDLL(None)

CapsuleDestructor = ctypes.CFUNCTYPE(None, c_void_p)

capsule_new = _api.PyCapsule_New
capsule_new.restype = py_object
capsule_new.argtypes = [c_void_p, c_char_p, CapsuleDestructor]

capsule_get_pointer = _api.PyCapsule_GetPointer
capsule_get_pointer.restype = c_void_p
capsule_get_pointer.argtypes = [py_object, c_char_p]

capsule_set_name = _api.PyCapsule_SetName
capsule_set_name.restype = c_int
capsule_set_name.argtypes = [py_object, c_char_p]

capsule_get_name = _api.PyCapsule_GetName
capsule_get_name.restype = c_void_p  # a pointer, so that a NULL name is None, not an error
capsule_get_name.argtypes = [py_object]

capsule_is_valid = _api.PyCapsule_IsValid
capsule_is_valid.restype = c_int
capsule_is_valid.argtypes = [py_object, c_char_p]


# raw variants for destructors (they take addresses, never objects) ---------------------------
_raw = ctypes.PyDLL(None)
capsule_get_name_raw = _raw.PyCapsule_GetName
capsule_get_name_raw.restype = c_void_p
capsule_get_name_raw.argtypes = [c_void_p]
capsule_get_pointer_raw = _raw.PyCapsule_GetPointer
capsule_get_pointer_raw.restype = c_void_p
capsule_get_pointer_raw.argtypes = [c_void_p, c_void_p]
err_clear = _raw.PyErr_Clear
err_clear.restype = None
err_clear.argtypes = []


class Py_buffer(ctypes.Structure):
    # what ctypes makes of each field below, for type checkers (annotations only: _fields_ makes them)
    buf: int | None
    obj: int | None
    len: int
    itemsize: int
    readonly: int
    ndim: int
    format: bytes | None
    shape: ctypes._Pointer[c_ssize_t]
    strides: ctypes._Pointer[c_ssize_t]
    suboffsets: ctypes._Pointer[c_ssize_t]
    internal: int | None
    _fields_ = [
        ("buf", c_void_p),
        ("obj", c_void_p),
        ("len", c_ssize_t),
        ("itemsize", c_ssize_t),
        ("readonly", c_int),
        ("ndim", c_int),
        ("format", c_char_p),
        ("shape", POINTER(c_ssize_t)),
        ("strides", POINTER(c_ssize_t)),
        ("suboffsets", POINTER(c_ssize_t)),
        ("internal", c_void_p),
    ]


PyBUF_WRITABLE = 0x0001
PyBUF_FORMAT = 0x0004
PyBUF_ND = 0x0008
PyBUF_STRIDES = 0x0010 | PyBUF_ND
PyBUF_RECORDS_RO = PyBUF_STRIDES | PyBUF_FORMAT

get_buffer = _api.PyObject_GetBuffer
get_buffer.restype = c_int
get_buffer.argtypes = [py_object, POINTER(Py_buffer), c_int]
release_buffer = _api.PyBuffer_Release
release_buffer.restype = None
release_buffer.argtypes = [POINTER(Py_buffer)]

incref = _api.Py_IncRef
incref.restype = None
incref.argtypes = [py_object]


def capsule_name(capsule: object) -> bytes | None:
    address = capsule_get_name(capsule)
    return None if address is None else ctypes.string_at(address)


def object_at(address: int) -> object:
    """The Python object at ``address`` (a borrowed reference turned into a normal one)."""
    return ctypes.cast(address, py_object).value


PyCapsuleType: type = type(capsule_new(ctypes.c_void_p(1), None, CapsuleDestructor()))

"""Parity of the two builds: one table of cases (good and bad input) runs through the compiled build
(C fast path) and the pure build, each in a subprocess; per case both must give the same result
summary, or the same exception type and message. The Python code is the specification: where a
case also states the expected outcome, both builds must give it.

Run as a script (``python test_parity.py``) it is the driver: it runs every case in the build the
environment selects and prints the outcomes as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import unnamed

HERE = Path(__file__).resolve().parent

# name -> (code, expected). `code` is a Python expression evaluated with the names of _namespace();
# expected: None (parity only), "ok" (no exception) or an exception type name.
CASES: dict[str, tuple[str, str | None]] = {
    # -- asdlpack ---------------------------------------------------------------------------------
    "asdlpack bytes is an Exporter": ("isinstance(dlbind.asdlpack(b'abc'), dlbind.Exporter)", "ok"),
    "asdlpack numpy is an Exporter": ("isinstance(dlbind.asdlpack(np.arange(3)), dlbind.Exporter)", "ok"),
    "asdlpack repr": ("repr(dlbind.asdlpack(bytearray(b'abcd')))", "ok"),
    "asdlpack returns an Exporter as is": ("(lambda e: dlbind.asdlpack(e) is e)(dlbind.asdlpack(b'ab'))", "ok"),
    "asdlpack bytes": ("dlbind.asdlpack(b'abc')", "ok"),
    "asdlpack readonly=True": ("dlbind.asdlpack(bytearray(b'abc'), readonly=True)", "ok"),
    "asdlpack readonly=False writable": ("dlbind.asdlpack(bytearray(b'abc'), readonly=False)", "ok"),
    "asdlpack readonly=False read-only": ("dlbind.asdlpack(b'abc', readonly=False)", "BufferError"),
    "asdlpack readonly=None": ("dlbind.asdlpack(b'abc', readonly=None)", "ok"),
    "asdlpack device_id": ("dlbind.asdlpack(bytearray(b'abc'), device_id=0)", "ok"),
    "asdlpack device_id None": ("dlbind.asdlpack(bytearray(b'abc'), device_id=None)", "ok"),
    # named "Exporter" in both builds (the compiled one's C class has a name of its own)
    "asdlpack of an Exporter, device_id 1": ("dlbind.asdlpack(dlbind.asdlpack(b'ab'), device_id=1)", "ValueError"),
    # an Exporter holds its source's memory: neither copied nor pickled, in the same words (the pure one was copied)
    "exporter copy.copy": ("__import__('copy').copy(dlbind.asdlpack(np.arange(3.0)))", "TypeError"),
    "exporter copy.deepcopy": ("__import__('copy').deepcopy(dlbind.asdlpack(bytearray(4)))", "TypeError"),
    "exporter pickle": ("__import__('pickle').dumps(dlbind.asdlpack(np.arange(3.0)))", "TypeError"),
    "asdlpack unknown keyword": ("dlbind.asdlpack(b'abc', bogus=1)", "TypeError"),
    "asdlpack no argument": ("dlbind.asdlpack()", "TypeError"),
    "asdlpack object": ("dlbind.asdlpack(object())", "TypeError"),
    "asdlpack non-native endian": ("dlbind.asdlpack(np.zeros(2, dtype='>f4'))", "BufferError"),
    "asdlpack long format": ("dlbind.asdlpack(memoryview(bytes(8)).cast('l'))", "ok"),
    "asdlpack bool": ("dlbind.asdlpack(np.array([True, False]))", "ok"),
    "asdlpack complex": ("dlbind.asdlpack(np.array([1j, 2]))", "ok"),
    "asdlpack strided": ("dlbind.asdlpack(np.arange(12.0).reshape(3, 4)[:, ::2])", "ok"),
    "asdlpack negative strides": ("dlbind.asdlpack(np.arange(4)[::-1])", "ok"),
    "asdlpack 0-d": ("dlbind.asdlpack(np.float32(1.5).reshape(()))", "ok"),
    "asdlpack empty": ("dlbind.asdlpack(np.zeros((0, 3)))", "ok"),
    "asdlpack struct format": ("dlbind.asdlpack(np.zeros(2, dtype='i4,f4'))", "BufferError"),
    # what an Exporter of a buffer exports: repr, __dlpack_device__, the capsule's fields, numpy's import, and
    # every capsule made deleted once (exporter_facts)
    "asdlpack facts C-contiguous": ("exporter_facts(np.arange(6, dtype=np.float32).reshape(2, 3))", "ok"),
    "asdlpack facts C-contiguous, free stride": ("exporter_facts(np.ones((2, 2), dtype=np.float32)[:1])", "ok"),
    "asdlpack facts strided": ("exporter_facts(np.arange(12.0).reshape(3, 4)[:, ::2])", "ok"),
    "asdlpack facts negative strides": ("exporter_facts(np.arange(4, dtype=np.int16)[::-1])", "ok"),
    "asdlpack facts size-1 dimension": ("exporter_facts(np.ones((3, 1, 2), dtype=np.float32)[:, :, ::2])", "ok"),
    "asdlpack facts read-only": ("exporter_facts(READONLY)", "ok"),
    "asdlpack facts readonly=True": ("exporter_facts(bytearray(b'abc'), readonly=True)", "ok"),
    "asdlpack facts 0-d": ("exporter_facts(np.array(2.5, dtype=np.float32))", "ok"),
    "asdlpack facts zero-size": ("exporter_facts(np.zeros((0, 3)))", "ok"),
    "asdlpack facts bytes": ("exporter_facts(b'abcd')", "ok"),
    "asdlpack facts bytearray": ("exporter_facts(bytearray(b'abcd'))", "ok"),
    "asdlpack facts long format": ("exporter_facts(memoryview(bytes(16)).cast('l'))", "ok"),
    # -- descriptions of memory that lie (issue 38): one validator, the same refusal in both builds, on every path
    **{
        f"lying {case}, {entry}": (f"{call.format(x=maker)}", expected)
        for case, (maker, expected) in {
            "negative dimension": ("lying(shape=(-5,), data=(ADDRESS, False))", "BufferError"),
            "NULL with elements": ("lying(shape=(10,), data=(0, False))", "BufferError"),
            "pointer -4096": ("lying(shape=(10,), data=(-4096, False))", "BufferError"),
            "pointer 2**65": ("lying(shape=(10,), data=(2**65, False))", "BufferError"),
            "pointer 2**64-8 wraps": ("lying(shape=(10,), data=(2**64 - 8, False))", "BufferError"),
            "buffer shorter": ("lying(shape=(100000,), data=bytearray(24))", "BufferError"),
            "2**62 elements": ("lying(shape=(2**62,), data=(ADDRESS, False))", "BufferError"),
            "too few strides": ("lying(shape=(3, 2), strides=(8,), data=(ADDRESS, False))", "BufferError"),
            "strides not of items": ("lying(shape=(3,), strides=(3,), data=(ADDRESS, False))", "BufferError"),
            "65 dimensions": ("lying(shape=(1,) * 65, data=(ADDRESS, False))", "BufferError"),
            "no shape": ("lying(shape=None, data=(ADDRESS, False))", "BufferError"),
            "short typestr": ("lying(shape=(2,), typestr='f', data=(ADDRESS, False))", "BufferError"),
            "typestr not a str": ("lying(shape=(2,), typestr=8, data=(ADDRESS, False))", "TypeError"),
            "data a 1-tuple": ("lying(shape=(2,), data=(ADDRESS,))", "BufferError"),
            "shape a str": ("lying(shape='ab', data=(ADDRESS, False))", "TypeError"),
            "masked": ("lying(shape=(2,), data=(ADDRESS, False), mask=bytearray(2))", "BufferError"),
            "fits its buffer": ("lying(shape=(3,), data=bytearray(24))", "ok"),
        }.items()
        for entry, call in {
            "from_dlpack": "dlbind.from_dlpack({x})",
            "copy": "dlbind.from_dlpack({x}, copy=True)",
            "asdlpack copy": "np.from_dlpack(dlbind.asdlpack({x}), copy=True)",
            "convert copy": "dlbind.convert({x}, to='numpy', copy=True)",
        }.items()
    },
    "lying cuda interface wraps": (
        "dlbind.asdlpack(cuda_lying(shape=(10,), data=(2**64 - 8, False)), device_id=0)", "BufferError"
    ),
    "lying cuda interface NULL": (
        "dlbind.asdlpack(cuda_lying(shape=(3,), data=(0, False)), device_id=0)", "BufferError"
    ),
    # a stream past a pointer's range names no stream (cast to a cudaStream_t, 2**64 + 1 would be 1)
    "lying cuda interface stream 2**64 + 1": (  # refused by asdlpack (an export of one would wait: no summary)
        "isinstance(dlbind.asdlpack(cuda_lying(shape=(3,), data=(ADDRESS, False), stream=2**64 + 1), device_id=0), "
        "dlbind.Exporter)", "BufferError"
    ),
    "lying cuda interface stream 2**63 - 1": (
        "isinstance(dlbind.asdlpack(cuda_lying(shape=(3,), data=(ADDRESS, False), stream=2**63 - 1), device_id=0), "
        "dlbind.Exporter)", "ok"
    ),
    "from_pointer -4096": ("dlbind.from_pointer(-4096, (10,), 'float64')", "BufferError"),
    "from_pointer 2**65": ("dlbind.from_pointer(2**65, (10,), 'float64')", "BufferError"),
    "from_pointer wraps": ("dlbind.from_pointer(2**64 - 8, (10,), 'float64')", "BufferError"),
    "from_pointer too few strides": ("dlbind.from_pointer(ADDRESS, (3, 2), 'float64', strides=(1,))", "ValueError"),
    "tensor shape cannot be set": ("setattr(tensor(), 'shape', (1 << 28,))", "AttributeError"),
    "tensor strides cannot be set": ("setattr(tensor(), 'strides', (1, 1))", "AttributeError"),
    "tensor flags cannot be set": ("setattr(tensor(), '_flags', 0)", "AttributeError"),
    "tensor data_ptr cannot be set": ("setattr(tensor(), 'data_ptr', 0)", "AttributeError"),
    "tensor stream cannot be set": ("setattr(tensor(), '_stream', 5)", "AttributeError"),
    "tensor attribute cannot be deleted": ("delattr(tensor(), 'shape')", "AttributeError"),
    # -- the exporter's __dlpack__ ------------------------------------------------------------------
    "exporter legacy of read-only": ("dlbind.asdlpack(b'abc').__dlpack__()", "BufferError"),
    "exporter versioned": ("dlbind.asdlpack(b'abc').__dlpack__(max_version=(1, 3))", "ok"),
    "exporter stream 1 on cpu": ("dlbind.asdlpack(b'abc').__dlpack__(stream=1, max_version=(1, 3))", "BufferError"),
    "exporter stream str": ("dlbind.asdlpack(b'abc').__dlpack__(stream='x', max_version=(1, 3))", "TypeError"),
    "exporter copy True": ("dlbind.asdlpack(b'abc').__dlpack__(copy=True, max_version=(1, 3))", "ok"),
    "exporter copy 0": ("dlbind.asdlpack(b'abc').__dlpack__(copy=0, max_version=(1, 3))", "TypeError"),
    "exporter dl_device cpu": ("dlbind.asdlpack(b'abc').__dlpack__(dl_device=(1, 0), max_version=(1, 3))", "ok"),
    "exporter dl_device cuda": ("dlbind.asdlpack(b'abc').__dlpack__(dl_device=(2, 0), max_version=(1, 3))", None),
    "exporter max_version list": ("dlbind.asdlpack(b'abc').__dlpack__(max_version=[1, 3])", "TypeError"),
    "exporter legacy writable": ("dlbind.asdlpack(bytearray(b'abc')).__dlpack__()", "ok"),
    "exporter max_version 0.8": ("dlbind.asdlpack(bytearray(b'abc')).__dlpack__(max_version=(0, 8))", "ok"),
    "exporter unknown keyword": ("dlbind.asdlpack(b'abc').__dlpack__(bogus=1)", "TypeError"),
    "exporter positional": ("dlbind.asdlpack(b'abc').__dlpack__(1)", "TypeError"),
    "exporter device": ("dlbind.asdlpack(b'abc').__dlpack_device__()", "ok"),
    # -- from_dlpack --------------------------------------------------------------------------------
    "from_dlpack list": ("dlbind.from_dlpack([1, 2, 3])", "TypeError"),
    "from_dlpack object": ("dlbind.from_dlpack(object())", "TypeError"),
    "from_dlpack no argument": ("dlbind.from_dlpack()", "TypeError"),
    "from_dlpack unknown keyword": ("dlbind.from_dlpack(np.zeros(3), bogus=None)", "TypeError"),
    "from_dlpack unknown keyword value": ("dlbind.from_dlpack(np.zeros(3), bogus=1)", "TypeError"),
    "from_dlpack positional extra": ("dlbind.from_dlpack(np.zeros(3), None)", "TypeError"),
    "from_dlpack non-capsule result": ("dlbind.from_dlpack(NotACapsule())", "TypeError"),
    "from_dlpack non-capsule of C type": ("dlbind.from_dlpack(CNotACapsule())", "TypeError"),
    "from_dlpack legacy producer": ("dlbind.from_dlpack(Legacy())", "ok"),
    "from_dlpack producer raising": ("dlbind.from_dlpack(Raising())", "RuntimeError"),
    "from_capsule of an array": ("dlbind.tensor.from_capsule(np.zeros(3))", "TypeError"),
    "from_dlpack numpy": ("dlbind.from_dlpack(np.arange(6.0).reshape(2, 3))", "ok"),
    "from_dlpack read-only numpy": ("dlbind.from_dlpack(READONLY)", "ok"),
    "from_dlpack device cpu": ("dlbind.from_dlpack(np.arange(3), device='cpu')", "ok"),
    "from_dlpack device tuple": ("dlbind.from_dlpack(np.arange(3), device=(1, 0))", "ok"),
    "from_dlpack device None": ("dlbind.from_dlpack(np.arange(3), device=None)", "ok"),
    "from_dlpack device cuda": ("dlbind.from_dlpack(np.arange(3), device='cuda')", None),
    "from_dlpack device bogus": ("dlbind.from_dlpack(np.arange(3), device='bogus')", "ValueError"),
    "from_dlpack device int": ("dlbind.from_dlpack(np.arange(3), device=3)", "TypeError"),
    "from_dlpack copy True": ("dlbind.from_dlpack(np.arange(3), copy=True)", "ok"),
    "from_dlpack copy False": ("dlbind.from_dlpack(np.arange(3), copy=False)", "ok"),
    "from_dlpack copy None": ("dlbind.from_dlpack(np.arange(3), copy=None)", "ok"),
    "from_dlpack copy str": ("dlbind.from_dlpack(np.arange(3), copy='yes')", "TypeError"),
    "from_dlpack stream None": ("dlbind.from_dlpack(np.arange(3), stream=None)", "ok"),
    "from_dlpack stream 1 on cpu": ("dlbind.from_dlpack(np.arange(3), stream=1)", "BufferError"),
    "from_dlpack stream -1 on cpu": ("dlbind.from_dlpack(np.arange(3), stream=-1)", "BufferError"),
    "from_dlpack stream str": ("dlbind.from_dlpack(np.arange(3), stream='x')", "TypeError"),
    "from_dlpack stream bool": ("dlbind.from_dlpack(np.arange(3), stream=True)", "TypeError"),
    # a stream past a pointer's range is refused before the producer is asked (Asked raises when asked)
    "from_dlpack cuda stream 2**64": ("dlbind.from_dlpack(Asked(2), stream=2**64)", "BufferError"),
    "from_dlpack cuda stream 2**63": ("dlbind.from_dlpack(Asked(2), stream=2**63)", "BufferError"),
    "from_dlpack cuda stream 2**63 - 1": ("dlbind.from_dlpack(Asked(2), stream=2**63 - 1)", "RuntimeError"),
    "from_dlpack rocm stream 2**64": ("dlbind.from_dlpack(Asked(10), stream=2**64)", "BufferError"),
    "from_dlpack allow_vector True": ("dlbind.from_dlpack(np.arange(3), allow_vector=True)", "ok"),
    "from_dlpack allow_vector False": ("dlbind.from_dlpack(np.arange(3), allow_vector=False)", "ok"),
    "from_dlpack vector carried": ("dlbind.from_dlpack(capsule(lanes=4, shape=(1,)))", "ok"),
    "from_dlpack vector allowed": ("dlbind.from_dlpack(capsule(lanes=4), allow_vector=True)", "ok"),
    "from_dlpack capsule": ("dlbind.from_dlpack(capsule())", "ok"),
    "from_dlpack capsule copy": ("dlbind.from_dlpack(capsule(), copy=True)", "BufferError"),
    "from_dlpack capsule copy False": ("dlbind.from_dlpack(capsule(), copy=False)", "ok"),
    "from_dlpack capsule stream": ("dlbind.from_dlpack(capsule(device_type=2), stream=1)", "BufferError"),
    "from_dlpack used capsule": (
        "(lambda c: (dlbind.from_dlpack(c), dlbind.from_dlpack(c)))(capsule())",
        "BufferError",
    ),
    "from_dlpack newer dtype code carried": ("dlbind.from_dlpack(capsule(code=99))", "ok"),
    # ExtentError is a BufferError (a producer's defect; from_dlpack of a producer names it)
    "from_dlpack extent past int64": ("dlbind.from_dlpack(capsule(shape=(4,), strides=(2**61,)))", "ExtentError"),
    "from_dlpack negative extent past int64": (
        "dlbind.from_dlpack(capsule(ndim=2, shape=(4, 3), strides=(-(2**62), 1)))", "ExtentError"
    ),
    "from_dlpack extent wraps the address space": (
        "dlbind.from_dlpack(capsule(shape=(2,), strides=(-(2**60),), data=64))", "ExtentError"
    ),
    "from_dlpack packed extent": (
        "dlbind.from_dlpack(capsule(code=1, bits=4, ndim=2, shape=(3, 2), strides=(-2, 1), byte_offset=8))", "ok"
    ),
    "from_dlpack zero bits": ("dlbind.from_dlpack(capsule(bits=0))", "BufferError"),
    "from_dlpack newer device type carried": ("dlbind.from_dlpack(capsule(device_type=99))", "ok"),
    "from_dlpack major 2": ("dlbind.from_dlpack(capsule(major=2))", "BufferError"),
    "from_dlpack ndim -1": ("dlbind.from_dlpack(capsule(ndim=-1))", "BufferError"),
    "from_dlpack ndim 65": ("dlbind.from_dlpack(capsule(ndim=65))", "BufferError"),
    "from_dlpack NULL shape": ("dlbind.from_dlpack(capsule(null_shape=True))", "BufferError"),
    "from_dlpack negative dim": ("dlbind.from_dlpack(capsule(shape=(-1,)))", "BufferError"),
    "from_dlpack NULL data": ("dlbind.from_dlpack(capsule(data=0))", "BufferError"),
    "from_dlpack NULL data empty": ("dlbind.from_dlpack(capsule(data=0, shape=(0,)))", "ok"),
    "from_dlpack 2**64 elements NULL": (
        "dlbind.from_dlpack(capsule(data=0, ndim=2, shape=(2**32, 2**32), strides=(2**32, 1)))",
        "BufferError",
    ),
    "from_dlpack 2**64 elements": (
        "dlbind.from_dlpack(capsule(ndim=2, shape=(2**32, 2**32), strides=(2**32, 1)))",
        "BufferError",
    ),
    "from_dlpack 2**62 float64": (
        "dlbind.from_dlpack(capsule(ndim=2, bits=64, shape=(2**31, 2**31), strides=(2**31, 1)))",
        "BufferError",
    ),
    "from_dlpack huge but empty": (
        "dlbind.from_dlpack(capsule(ndim=3, shape=(0, 2**40, 2**40), strides=(0, 0, 1)))",
        "ok",
    ),
    "from_dlpack NULL strides": ("dlbind.from_dlpack(capsule(ndim=2, shape=(2, 3), strides=None))", "ok"),
    "from_dlpack NULL strides too large": (
        "dlbind.from_dlpack(capsule(ndim=3, shape=(0, 2**40, 2**40), strides=None))",
        "BufferError",
    ),
    "from_dlpack NULL strides too large, inner zero": (
        "dlbind.from_dlpack(capsule(ndim=4, shape=(2**40, 2**40, 2**40, 0), strides=None))",
        "BufferError",
    ),
    "from_dlpack NULL strides, inner zero": (
        "dlbind.from_dlpack(capsule(ndim=3, shape=(2**40, 2**40, 0), strides=None))",
        "ok",
    ),
    "from_dlpack byte_offset wraps": ("dlbind.from_dlpack(capsule(byte_offset=2**64 - 1))", "BufferError"),
    "from_dlpack byte_offset": ("dlbind.from_dlpack(capsule(byte_offset=4, shape=(2,)))", "ok"),
    # -- from_pointer -------------------------------------------------------------------------------
    "from_pointer 2**64 NULL": ("dlbind.from_pointer(0, (2**32, 2**32), 'float32')", "BufferError"),
    "from_pointer 2**64": ("dlbind.from_pointer(ADDRESS, (2**32, 2**32), 'float32')", "BufferError"),
    "from_pointer 2**63 elements": ("dlbind.from_pointer(ADDRESS, (2**63,), 'uint8')", "BufferError"),
    "from_pointer bytes overflow": ("dlbind.from_pointer(ADDRESS, (2**31, 2**31), 'float64')", "BufferError"),
    "from_pointer packed fits": ("dlbind.from_pointer(ADDRESS, (2**62,), 'float4_e2m1fn')", "ok"),
    "from_pointer 2**62 uint16": ("dlbind.from_pointer(ADDRESS, (2**62,), 'uint16')", "BufferError"),
    "from_pointer huge but empty": ("dlbind.from_pointer(ADDRESS, (0, 2**40, 2**20), 'float64')", "ok"),
    "from_pointer empty, strides too large": (
        "dlbind.from_pointer(ADDRESS, (0, 2**62, 2**62), 'float64')",
        "BufferError",
    ),
    "from_pointer dimension too large": ("dlbind.from_pointer(ADDRESS, (0, 2**63), 'int8')", "BufferError"),
    "from_pointer stride too large": ("dlbind.from_pointer(ADDRESS, (2,), 'int8', strides=(2**63,))", "BufferError"),
    "from_pointer NULL": ("dlbind.from_pointer(0, (3,), 'float32')", "ValueError"),
    "from_pointer NULL empty": ("dlbind.from_pointer(0, (0, 3), 'float32')", "ok"),
    "from_pointer good": ("dlbind.from_dlpack(dlbind.from_pointer(ADDRESS, (2, 3), 'float32'))", "ok"),
    "from_pointer strides": ("dlbind.from_dlpack(dlbind.from_pointer(ADDRESS, (2, 3), 'int8', strides=(1, 2)))", "ok"),
    "from_pointer byte_offset": (
        "dlbind.from_dlpack(dlbind.from_pointer(ADDRESS, (2,), 'int16', byte_offset=2))",
        "ok",
    ),
    "from_pointer readonly": ("dlbind.from_dlpack(dlbind.from_pointer(ADDRESS, (2,), 'int16', readonly=True))", "ok"),
    "from_pointer readonly legacy": ("dlbind.from_pointer(ADDRESS, (2,), 'int16', readonly=True).__dlpack__()", None),
    "from_pointer dtype unknown": ("dlbind.from_pointer(ADDRESS, (2,), 'float33')", "ValueError"),
    "from_pointer dtype object": ("dlbind.from_pointer(ADDRESS, (2,), 3.5)", "TypeError"),
    "from_pointer dtype DType": ("dlbind.from_pointer(ADDRESS, (2,), dlbind.DType(2, 32))", "ok"),
    "from_pointer dtype numpy": ("dlbind.from_pointer(ADDRESS, (2,), np.float64)", "ok"),
    # a name no header gives (upstream declares kDLTPU after v1.3: "tpu" is a device once a bump records it)
    "from_pointer device bogus": (
        f"dlbind.from_pointer(ADDRESS, (2,), 'int8', device={unnamed.device_name()!r})",
        "ValueError",
    ),
    "from_pointer device newer type": (
        f"dlbind.from_pointer(ADDRESS, (2,), 'int8', device=({unnamed.device_type()}, 0))", "ok"
    ),
    "from_pointer device negative type": ("dlbind.from_pointer(ADDRESS, (2,), 'int8', device=(-1, 0))", "BufferError"),
    "from_pointer device cuda": ("dlbind.from_pointer(ADDRESS, (2,), 'int8', device='cuda:1')", "ok"),
    "from_pointer negative dim": ("dlbind.from_pointer(ADDRESS, (-1,), 'int8')", "ValueError"),
    "from_pointer strides length": ("dlbind.from_pointer(ADDRESS, (2, 2), 'int8', strides=(1,))", "ValueError"),
    "from_pointer byte_offset negative": ("dlbind.from_pointer(ADDRESS, (2,), 'int8', byte_offset=-1)", "ValueError"),
    "from_pointer byte_offset wraps": ("dlbind.from_pointer(ADDRESS, (2,), 'int8', byte_offset=2**64)", "BufferError"),
    # -- Tensor methods ------------------------------------------------------------------------------
    "tensor __dlpack__": ("tensor().__dlpack__()", "ok"),
    "tensor __dlpack__ versioned": ("tensor().__dlpack__(max_version=(1, 3))", "ok"),
    "tensor constructor": ("dlbind.Tensor()", "TypeError"),  # only an import makes one
    "tensor subclass constructor": ("type('Sub', (dlbind.Tensor,), {})()", "TypeError"),
    "tensor copy.copy": ("__import__('copy').copy(tensor())", "TypeError"),  # a view: Tensor.copy() copies data
    "tensor copy.deepcopy": ("__import__('copy').deepcopy(tensor())", "TypeError"),
    "tensor pickle": ("__import__('pickle').dumps(tensor())", "TypeError"),
    "tensor __dlpack__ max_version None": ("tensor().__dlpack__(max_version=None)", "ok"),
    "tensor __dlpack__ max_version 0.8": ("tensor().__dlpack__(max_version=(0, 8))", "ok"),
    "tensor __dlpack__ max_version 2.0": ("tensor().__dlpack__(max_version=(2, 0))", "ok"),
    "tensor __dlpack__ max_version list": ("tensor().__dlpack__(max_version=[1, 3])", "TypeError"),  # a tuple
    "tensor __dlpack__ max_version str": ("tensor().__dlpack__(max_version='x')", "TypeError"),
    "tensor __dlpack__ max_version int": ("tensor().__dlpack__(max_version=1)", "TypeError"),
    "tensor __dlpack__ stream None": ("tensor().__dlpack__(stream=None, max_version=(1, 3))", "ok"),
    "tensor __dlpack__ stream 1": ("tensor().__dlpack__(stream=1, max_version=(1, 3))", "BufferError"),
    "tensor __dlpack__ stream -1": ("tensor().__dlpack__(stream=-1)", "BufferError"),
    "tensor __dlpack__ stream 0": ("tensor().__dlpack__(stream=0)", "BufferError"),
    "tensor __dlpack__ stream -2": ("tensor().__dlpack__(stream=-2)", "BufferError"),
    "tensor __dlpack__ stream str": ("tensor().__dlpack__(stream='1')", "TypeError"),
    "tensor __dlpack__ stream bool": ("tensor().__dlpack__(stream=False)", "TypeError"),
    "tensor __dlpack__ stream float": ("tensor().__dlpack__(stream=1.0)", "TypeError"),
    "tensor __dlpack__ stream huge": ("tensor().__dlpack__(stream=2**70)", "BufferError"),
    "tensor __dlpack__ dl_device cpu": ("tensor().__dlpack__(dl_device=(1, 0), max_version=(1, 3))", "ok"),
    "tensor __dlpack__ dl_device name": ("tensor().__dlpack__(dl_device=('cpu', 0), max_version=(1, 3))", "ok"),
    "tensor __dlpack__ dl_device cuda": ("tensor().__dlpack__(dl_device=(2, 0), max_version=(1, 3))", "BufferError"),
    "tensor __dlpack__ dl_device unknown": ("tensor().__dlpack__(dl_device=(99, 0))", "BufferError"),
    "tensor __dlpack__ dl_device bad": ("tensor().__dlpack__(dl_device=5)", "TypeError"),
    "tensor __dlpack__ copy True": ("tensor().__dlpack__(copy=True, max_version=(1, 3))", "ok"),
    "tensor __dlpack__ copy False": ("tensor().__dlpack__(copy=False, max_version=(1, 3))", "ok"),
    "tensor __dlpack__ copy None": ("tensor().__dlpack__(copy=None)", "ok"),
    "tensor __dlpack__ copy int": ("tensor().__dlpack__(copy=1)", "TypeError"),
    "tensor __dlpack__ unknown keyword": ("tensor().__dlpack__(bogus=1)", "TypeError"),
    "tensor __dlpack__ positional": ("tensor().__dlpack__(None)", "TypeError"),
    "tensor __dlpack__ read-only legacy": ("dlbind.from_dlpack(READONLY).__dlpack__()", "BufferError"),
    "tensor __dlpack__ read-only versioned": ("dlbind.from_dlpack(READONLY).__dlpack__(max_version=(1, 0))", "ok"),
    "tensor __dlpack__ cuda tensor": ("dlbind.from_dlpack(capsule(device_type=2)).__dlpack__(stream=0)", "BufferError"),
    "tensor __dlpack__ cuda stream 1": ("dlbind.from_dlpack(capsule(device_type=2)).__dlpack__(stream=1)", None),
    "tensor __dlpack__ managed stream 0": ("dlbind.from_dlpack(capsule(device_type=13)).__dlpack__(stream=0)", None),
    "tensor __dlpack__ rocm stream 1": ("dlbind.from_dlpack(capsule(device_type=10)).__dlpack__(stream=1)", None),
    "tensor __dlpack__ cuda stream 2**64 + 7": (
        "dlbind.from_dlpack(capsule(device_type=2)).__dlpack__(stream=2**64 + 7)", "BufferError"
    ),
    "tensor __dlpack__ cuda stream 2**63": (
        "dlbind.from_dlpack(capsule(device_type=2)).__dlpack__(stream=2**63)", "BufferError"
    ),
    "tensor __dlpack__ cuda stream 2**63 - 1": (
        "dlbind.from_dlpack(capsule(device_type=2)).__dlpack__(stream=2**63 - 1, max_version=(1, 3))", "ok"
    ),
    "tensor __dlpack__ rocm stream 2**64": (
        "dlbind.from_dlpack(capsule(device_type=10)).__dlpack__(stream=2**64)", "BufferError"
    ),
    "tensor __dlpack_device__": ("tensor().__dlpack_device__()", "ok"),
    "tensor copy": ("tensor().copy()", "ok"),
    "tensor copy strided": ("dlbind.from_dlpack(np.arange(12.0).reshape(3, 4)[:, ::2]).copy()", "ok"),
    "tensor copy of cuda": ("dlbind.from_dlpack(capsule(device_type=2)).copy()", "BufferError"),
    "tensor repr": ("repr(tensor())", "ok"),
    "tensor numpy": ("np.asarray(tensor()).tolist()", "ok"),
    "tensor metadata": ("(lambda t: (t.size, t.nbytes, t.byte_strides, t.is_contiguous()))(tensor())", "ok"),
    # -- the buffer protocol (compiled) against the Python metadata it must agree with (pure) ----------
    "buffer int32": ("view_facts(tensor())", "ok"),
    "buffer strided": ("view_facts(dlbind.from_dlpack(np.arange(12.0).reshape(3, 4)[:, ::2]))", "ok"),
    "buffer negative strides": ("view_facts(dlbind.from_dlpack(np.arange(4)[::-1]))", "ok"),
    "buffer 0-d": ("view_facts(dlbind.from_dlpack(np.array(2.5, dtype=np.float32)))", "ok"),
    "buffer empty": ("view_facts(dlbind.from_dlpack(np.zeros((0, 3))))", "ok"),
    "buffer bool": ("view_facts(dlbind.from_dlpack(np.array([True, False])))", "ok"),
    "buffer complex": ("view_facts(dlbind.from_dlpack(np.array([1j, 2])))", "ok"),
    "buffer read-only": ("view_facts(dlbind.from_dlpack(READONLY))", "ok"),
    "buffer byte_offset": ("view_facts(dlbind.from_dlpack(capsule(byte_offset=4, shape=(2,))))", "ok"),
    "buffer bfloat16": ("view_facts(dlbind.from_dlpack(capsule(code=4, bits=16)))", "BufferError"),
    "buffer vector": ("view_facts(dlbind.from_dlpack(capsule(lanes=4), allow_vector=True))", "BufferError"),
    "buffer int128": ("view_facts(dlbind.from_dlpack(capsule(code=0, bits=128)))", "BufferError"),
    "buffer cuda": ("view_facts(dlbind.from_dlpack(capsule(device_type=2)))", "BufferError"),
    "buffer managed": ("view_facts(dlbind.from_dlpack(capsule(device_type=13)))", "ok"),
    # -- torch (its exchange table in the compiled build, __dlpack__ in the pure one) ---------------------
    "torch from_dlpack": ("dlbind.from_dlpack(torch().arange(6).reshape(2, 3))", None),
    "torch from_dlpack strided": ("dlbind.from_dlpack(torch().arange(12.0).reshape(3, 4)[:, ::2])", None),
    "torch convert numpy": ("summary_of_torch(dlbind.convert(np.arange(3.0), to='torch'))", None),
    "torch convert read-only": ("summary_of_torch(dlbind.convert(READONLY, to='torch'))", None),
    "torch convert negative strides": ("summary_of_torch(dlbind.convert(np.arange(4)[::-1], to='torch'))", None),
    "torch convert tensor": ("summary_of_torch(dlbind.convert(tensor(), to='torch'))", None),
    "torch convert copy=False read-only": ("dlbind.convert(READONLY, to='torch', copy=False)", None),
    # -- the exchange table -----------------------------------------------------------------------------
    "current_work_stream kDLCUDAManaged": ("work_stream(13)", "ok"),
    "current_work_stream kDLCUDA": ("work_stream(2)", "ok"),
    "current_work_stream kDLCPU": ("work_stream(1)", "ok"),
    "current_work_stream kDLROCM": ("work_stream(10)", "ok"),
    "current_work_stream kDLCUDAHost": ("work_stream(3)", "ok"),
    # -- convert --------------------------------------------------------------------------------------
    "convert to numpy": ("dlbind.convert(tensor(), to='numpy')", "ok"),
    "convert to numpy module": ("dlbind.convert(tensor(), to=np)", "ok"),
    "convert to ndarray": ("dlbind.convert(tensor(), to=np.ndarray)", "ok"),
    "convert numpy to numpy": ("(lambda a: dlbind.convert(a, 'numpy') is a)(np.arange(3))", "ok"),
    "convert copy": ("dlbind.convert(tensor(), to='numpy', copy=True)", "ok"),
    "convert unknown library": ("dlbind.convert(tensor(), to='nolib')", "ValueError"),
    "convert bad to": ("dlbind.convert(tensor(), to=3)", "TypeError"),
    "convert no to": ("dlbind.convert(tensor())", "TypeError"),
    "convert unknown keyword": ("dlbind.convert(tensor(), to='numpy', bogus=None)", "TypeError"),
    "convert list": ("dlbind.convert([1, 2], to='numpy')", "TypeError"),
    # -- inspect.signature of the public callables: the compiled build's C methods carry text signatures, so
    # help() and inspect read them as the Python ones (annotations, which a text signature cannot carry, left out)
    "signatures of the public names": ("public_signatures()", "ok"),
    "signature Tensor.__dlpack__": ("signature_of(dlbind.Tensor.__dlpack__)", "ok"),
    "signature Tensor.__dlpack_device__": ("signature_of(dlbind.Tensor.__dlpack_device__)", "ok"),
    "signature tensor().__dlpack__": ("signature_of(tensor().__dlpack__)", "ok"),
    "signature Exporter of a buffer, __dlpack__": ("signature_of(type(dlbind.asdlpack(b'ab')).__dlpack__)", "ok"),
    "signature Exporter of a buffer, device": ("signature_of(type(dlbind.asdlpack(b'a')).__dlpack_device__)", "ok"),
    "signature Exporter of numpy, __dlpack__": ("signature_of(dlbind.asdlpack(np.arange(3)).__dlpack__)", "ok"),
    "signature from_pointer's Exporter": ("signature_of(dlbind.from_pointer(ADDRESS, (4,), 'uint8').__dlpack__)", "ok"),
}


# -- the driver (runs in the subprocess) ---------------------------------------------------------------


def _namespace() -> dict[str, Any]:
    """The names a case's code is evaluated with: dlbind, numpy, the producers of :func:`_producers`, the facts
    helpers and a few small makers."""
    import ctypes

    import numpy as np

    import dlbind
    import faulty
    from dlbind import _capi
    from dlbind._ffi import ffi

    store = (ctypes.c_char * 64)()
    readonly = np.arange(4.0)
    readonly.flags.writeable = False

    def capsule(**kwargs: Any) -> object:
        cap, _counter = faulty.make_capsule(**kwargs)
        _KEEP.append(_counter)
        return cap

    def tensor() -> Any:
        return dlbind.from_dlpack(np.arange(6, dtype=np.int32).reshape(2, 3))

    def work_stream(device_type: int) -> tuple[int, int]:
        table = dlbind.Tensor.__dlpack_c_exchange_api__
        api = ffi.cast("DLPackExchangeAPI *", _capi.capsule_get_pointer(table, b"dlpack_exchange_api"))
        out = ffi.new("void **", ffi.cast("void *", 12345))
        rc = api.current_work_stream(device_type, 0, out)
        return rc, int(ffi.cast("uintptr_t", out[0]))

    def torch() -> Any:
        import torch

        return torch

    def summary_of_torch(x: Any) -> Any:
        return ["torch", str(x.dtype), tuple(x.shape), x.stride(), x.tolist()]

    return {
        "view_facts": _view_facts,
        "exporter_facts": _exporter_facts,
        "torch": torch,
        "summary_of_torch": summary_of_torch,
        **_producers(),
        "dlbind": dlbind,
        "np": np,
        "capsule": capsule,
        "tensor": tensor,
        "work_stream": work_stream,
        "signature_of": _signature_of,
        "public_signatures": _public_signatures,
        "READONLY": readonly,
        "ADDRESS": ctypes.addressof(store),
        "_store": store,
    }


def _signature_of(obj: Any) -> str:
    """``inspect.signature(obj)`` without annotations (a C function's text signature has none) and without the
    ``self`` of a function read on its class (positional-only in C, not in Python); ValueError where inspect finds
    none (a C method without a text signature)."""
    import inspect

    sig = inspect.signature(obj)
    params = list(sig.parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in params]
    return str(sig.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def _public_signatures() -> dict[str, str]:
    """What inspect says of each public callable but the header's enums and Tensor, which neither build constructs
    (TypeError: the compiled class shows object's ``()``, the pure one its refusing ``__new__``)."""
    import dlbind

    return {
        name: _signature_of(obj)
        for name in dlbind.__all__
        if callable(obj := getattr(dlbind, name))
        and not (isinstance(obj, type) and issubclass(obj, int))
        and obj is not dlbind.Tensor
    }


def _producers() -> dict[str, Any]:
    """The objects the cases import from: ``lying``/``cuda_lying`` (an array interface that says what a case makes
    it say) and producers whose ``__dlpack__`` answers wrongly, the 0.x way or not at all."""
    import numpy as np

    class Producer:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    class Lying:
        """An object whose __array_interface__ (or __cuda_array_interface__) says whatever a case makes it say."""

    def lying(**iface: Any) -> Any:
        iface = {"version": 3, "typestr": "<f8", **iface}
        if iface.get("shape", ()) is None:
            del iface["shape"]
        obj = Lying()
        obj.__array_interface__ = iface  # type: ignore[attr-defined]
        return obj

    def cuda_lying(**iface: Any) -> Any:
        obj = Lying()
        obj.__cuda_array_interface__ = {"version": 3, "typestr": "<f8", **iface}  # type: ignore[attr-defined]
        return obj

    class NotACapsule(Producer):
        def __dlpack__(self, **kwargs: Any) -> object:
            return 3

    class CNotACapsule(Producer):
        def __dlpack__(self, **kwargs: Any) -> object:
            return np.zeros(1)

    class Legacy(Producer):
        def __dlpack__(self, stream: Any = None) -> object:
            return np.arange(3.0).__dlpack__(stream=stream)

    class Raising(Producer):
        def __dlpack__(self, **kwargs: Any) -> object:
            raise RuntimeError("the producer failed")

    return {
        "lying": lying,
        "cuda_lying": cuda_lying,
        "NotACapsule": NotACapsule,
        "CNotACapsule": CNotACapsule,
        "Legacy": Legacy,
        "Raising": Raising,
        "Asked": _Asked,
    }


class _Asked:
    """A producer on ``device_type`` that raises when asked: a refusal before it is asked is a BufferError."""

    def __init__(self, device_type: int) -> None:
        self.device_type = device_type

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, 0)

    def __dlpack__(self, **kwargs: Any) -> object:
        raise RuntimeError(f"the producer was asked with {kwargs}")


def _view_facts(t: Any) -> tuple[Any, ...]:
    """What a memoryview of ``t`` shows: format, shape, strides, readonly, nbytes and the values."""
    import numpy as np

    import dlbind
    from dlbind.devices import HOST_ACCESSIBLE, device_name

    if dlbind.ffi_build() == "compiled":
        with memoryview(t) as m:
            return m.format, m.shape, m.strides, m.readonly, m.nbytes, np.asarray(m).tolist()
    # The pure build has no buffer protocol on every Python: the facts the C one must give, from
    # the Python metadata (the specification).
    if t.device[0] not in HOST_ACCESSIBLE:
        raise BufferError(f"the buffer protocol needs host memory; this tensor is on {device_name(t.device[0])}")
    try:
        fmt = t.dtype.format
    except ValueError as exc:
        raise BufferError(str(exc)) from None
    values = np.asarray(t).tolist()
    return fmt, t.shape, t.byte_strides, t.readonly, t.nbytes, values


def _capsule_fields(cap: object, own: int) -> dict[str, Any]:
    """Every field of a versioned capsule (the data pointer as whether it is ``own``); released after."""
    import dlbind
    from dlbind._ffi import ffi

    managed, versioned = dlbind.capsule.take(cap)
    t = managed.dl_tensor
    ndim = int(t.ndim)
    fields = {
        "versioned": versioned,
        "version": [int(managed.version.major), int(managed.version.minor)],
        "flags": int(managed.flags),
        "data is the buffer's": int(ffi.cast("uintptr_t", t.data)) == own,
        "device": [int(t.device.device_type), int(t.device.device_id)],
        "dtype": [int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)],
        "shape": ffi.unpack(t.shape, ndim) if t.shape != ffi.NULL else None,
        "strides": ffi.unpack(t.strides, ndim) if t.strides != ffi.NULL else None,
        "byte_offset": int(t.byte_offset),
    }
    dlbind.capsule.Owner(managed).release()
    return fields


def _exporter_facts(x: Any, **kwargs: Any) -> dict[str, Any]:
    """asdlpack(x, **kwargs): its __dlpack_device__, the capsules of a plain call and of one with the other
    keywords, its repr, numpy's import of it, and how many capsules were made and deleted by the end (those,
    numpy's, one dropped unconsumed)."""
    import gc

    import numpy as np

    import dlbind

    gc.collect()
    before = dlbind.capsule.stats()
    e = dlbind.asdlpack(x, **kwargs)
    own = np.asarray(memoryview(x)).__array_interface__["data"][0]  # the buffer's address
    imported = np.from_dlpack(e)
    facts = {
        "device": [int(v) for v in e.__dlpack_device__()],
        "plain": _capsule_fields(e.__dlpack__(max_version=(1, 3)), own),
        "keywords": _capsule_fields(e.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False), own),
        "repr": repr(e),
        "numpy": [imported.tolist(), imported.flags.writeable],
    }
    e.__dlpack__(max_version=(1, 3))  # dropped unconsumed: its destructor frees it
    del e, imported
    gc.collect()
    after = dlbind.capsule.stats()
    facts["exported, deleted"] = [after[0] - before[0], after[1] - before[1]]
    return facts


_KEEP: list[Any] = []


def _summary(value: Any) -> Any:
    import numpy as np

    import dlbind
    from dlbind import _capi
    from dlbind.tensor import from_capsule

    if isinstance(value, dlbind.Tensor):
        out: dict[str, Any] = {
            "shape": value.shape,
            "strides": value.strides,
            "dtype": value.dtype.name,
            "device": [int(value.device[0]), value.device[1]],
            "byte_offset": value.byte_offset,
            "readonly": value.readonly,
            "version": value.version,
            "flags": int(value.flags),
        }
        if value.device[0] == dlbind.DeviceType.kDLCPU and 0 < value.size <= 64:
            try:
                out["values"] = np.asarray(value).tolist()
            except Exception as exc:  # packed sub-byte data, ...: the refusal is part of the summary
                out["values"] = [type(exc).__name__, str(exc)]
        return ["Tensor", out]
    if type(value) is _capi.PyCapsuleType:
        name = _capi.capsule_name(value)
        return ["capsule", name.decode() if name else None, _summary(from_capsule(value, allow_vector=True))]
    if isinstance(value, dlbind.Exporter):
        return ["Exporter", repr(value), _summary(dlbind.from_dlpack(value))]
    if isinstance(value, np.ndarray):
        return ["ndarray", str(value.dtype), value.shape, value.tolist()]
    if isinstance(value, tuple):
        return [_summary(v) for v in value]
    return repr(value)


def _run_cases() -> dict[str, list[Any]]:
    ns = _namespace()
    results: dict[str, list[Any]] = {}
    for name, (code, _) in CASES.items():
        try:
            value = eval(code, dict(ns))
            results[name] = ["ok", json.loads(json.dumps(_summary(value), default=repr))]
        except Exception as exc:
            results[name] = [type(exc).__name__, str(exc)]
    return results


# -- the test -------------------------------------------------------------------------------------------


def _outcomes(pure: str) -> Any:
    env = {**os.environ, "DLBIND_PURE": pure, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__))], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Any]:
    compiled = _outcomes("0")
    if compiled["build"] != "compiled":
        pytest.skip(
            "the compiled build is not installed (dlbind._api and dlbind._fastpath need a C compiler at install)"
        )
    pure = _outcomes("1")
    assert pure["build"] == "pure"
    return {"compiled": compiled["cases"], "pure": pure["cases"]}


@pytest.mark.parametrize("name", list(CASES))
def test_both_builds_agree(outcomes: dict[str, Any], name: str) -> None:
    compiled, pure = outcomes["compiled"][name], outcomes["pure"][name]
    assert compiled == pure, f"{CASES[name][0]}\n  compiled: {compiled}\n  pure:     {pure}"
    expected = CASES[name][1]
    if expected is not None:
        assert compiled[0] == expected, f"{CASES[name][0]}: {compiled}"


def test_exporter_of_bytes_is_an_exporter_in_both(outcomes: dict[str, Any]) -> None:
    for build in ("compiled", "pure"):
        assert outcomes[build]["asdlpack bytes is an Exporter"] == ["ok", "True"], build


if __name__ == "__main__":
    import dlbind

    print(json.dumps({"build": dlbind.ffi_build(), "cases": _run_cases()}))

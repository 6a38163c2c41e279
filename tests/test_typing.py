"""A user's script that uses the public names passes ``mypy --strict``; a wrong use fails it."""

from __future__ import annotations

from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy is in the test dependency group")

GOOD = """\
import dlbind
from dlbind import spec

def device_name(code: int) -> str:
    return dlbind.DeviceType(code).name

cuda: dlbind.DeviceType = dlbind.DeviceType.kDLCUDA
fp8: int = dlbind.DataTypeCode.kDLFloat8_e4m3fn
version: tuple[int, int] = dlbind.DLPACK_VERSION
flags: dlbind.Flags = dlbind.Flags.READ_ONLY | dlbind.Flags.IS_COPIED
since: tuple[int, int] = spec.since("DLDeviceType.kDLCUDA")
gone: tuple[int, int] | None = spec.removed_in("DLDeviceType.kDLGPU")
build: str = dlbind.ffi_build()
print(device_name(cuda), fp8, version, flags, since, gone, build)
"""


def _mypy(tmp_path: Path, source: str) -> tuple[str, int]:
    script = tmp_path / "user_script.py"
    script.write_text(source)
    out, err, status = mypy_api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / ".mypy"), str(script)]
    )
    return out + err, status


def test_user_script_passes_strict(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, GOOD)
    assert status == 0, out


def test_wrong_use_fails(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, GOOD + "bad: str = dlbind.DLPACK_VERSION\nspec.since(3)\n")
    assert status == 1
    assert 'Incompatible types in assignment (expression has type "tuple[int, int]", variable has type "str")' in out
    assert 'Argument 1 to "since" has incompatible type "int"; expected "str"' in out


# What dlbind returns hands on to numpy and torch under --strict: its producers' __dlpack__ returns the capsule type
# (numpy 2's stubs ask for a _SupportsDLPack, whose __dlpack__ returns typing_extensions.CapsuleType), not object.
PRODUCERS = """\
import numpy as np
from torch.utils.dlpack import from_dlpack as torch_from_dlpack
from typing_extensions import CapsuleType

import dlbind

class Legacy:  # a producer of an older spec
    def __dlpack__(self, stream: int | None = None) -> CapsuleType:
        return np.arange(3.0).__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

t: dlbind.Tensor = dlbind.from_dlpack(np.arange(6.0))
e: dlbind.Exporter = dlbind.asdlpack(b"any buffer")
np.from_dlpack(t), np.from_dlpack(t.copy()), np.from_dlpack(e), np.from_dlpack(dlbind.asdlpack(Legacy()))
np.from_dlpack(dlbind.compat(Legacy())), np.from_dlpack(dlbind.from_pointer(0, (0,), "float32"))
torch_from_dlpack(t), torch_from_dlpack(e), torch_from_dlpack(dlbind.compat(np.arange(2)))
np.from_dlpack(dlbind.asdlpack(b"any buffer"))  # the README's first line
capsule: CapsuleType = t.__dlpack__(max_version=(1, 0))
exported: CapsuleType = e.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
table: CapsuleType = t.__dlpack_c_exchange_api__
device: tuple[dlbind.DeviceType, int] = t.__dlpack_device__()
view = memoryview(t)
"""


def test_dlbind_producers_type_check_as_numpy_and_torch_consumers_ask(tmp_path: Path) -> None:
    pytest.importorskip("numpy", reason="numpy's stubs declare what its from_dlpack takes")
    pytest.importorskip("torch", reason="torch's from_dlpack is the other consumer checked")
    out, status = _mypy(tmp_path, PRODUCERS)
    assert status == 0, out


# A Tensor's members are typed (the C core's, _fastpath.pyi): a typo or a write is an error, not Any.
TENSOR = """\
import dlbind

def use(t: dlbind.Tensor) -> None:
    shape: tuple[int, ...] = t.shape
    strides: tuple[int, ...] = t.strides
    address: int = t.data_ptr + t.byte_offset
    version: tuple[int, int] | None = t.version
    ndim: int = t.ndim
    print(shape, strides, address, version, ndim, t.dtype, t.device, t.flags, t.readonly, t.stream)
"""


def test_tensor_members_are_typed(tmp_path: Path) -> None:
    out, status = _mypy(tmp_path, TENSOR)
    assert status == 0, out
    wrong = "    t.shpe\n    t.shape = (1,)\n    n: str = t.ndim\n    t.data_ptr()\n"
    out, status = _mypy(tmp_path, TENSOR + wrong)
    assert status == 1
    assert '"Tensor" has no attribute "shpe"' in out, out
    assert 'Property "shape" defined in "TensorCore" is read-only' in out, out
    assert 'Incompatible types in assignment (expression has type "int", variable has type "str")' in out, out
    assert '"int" not callable' in out, out
    assert out.count("error:") == 4, out

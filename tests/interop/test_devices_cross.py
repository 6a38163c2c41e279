"""Devices cross systems too (issue 43): ``dlbind.device`` reads each installed system's device objects (its row's
``[devices]`` in spec/adapters.toml, or ``__dlpack_device__``), makes them with ``to=``, and every ``device=`` of
dlbind takes them; in each interop cell for the systems it installs (and in the core's tests), in both builds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import DeviceType
from dlbind._generated.adapters import ADAPTERS
from dlbind._libraries import installed

INSTALLED = sorted(name for name, row in ADAPTERS.items() if installed(row.import_name))


def _kinds(system: str) -> list[str] | None:
    """The device kinds a system's row makes objects of (a function per kind, or its one kind); None: any."""
    row = ADAPTERS[system]
    return sorted(dict(row.device_make_by)) or ([row.device_kind] if row.device_kind else None)


# the installed systems whose row says how their device objects are made; those that make CPU ones (CuPy's are
# CUDA's only)
MAKERS = [name for name in INSTALLED if ADAPTERS[name].device_make_args]
CPU_MAKERS = [name for name in MAKERS if _kinds(name) is None or "cpu" in (_kinds(name) or ())]
CUDA_MAKERS = [name for name in MAKERS if _kinds(name) is None or "cuda" in (_kinds(name) or ())]
# every row (installed or not) that makes objects of some kinds only: another is refused before it is imported
ONE_KIND = sorted(name for name in ADAPTERS if ADAPTERS[name].device_make_args and _kinds(name) is not None)
# the makers that make only the devices this machine has (jax: jax.devices(platform); MAX: an Accelerator of a
# GPU it finds; dpnp: dpctl's SyclDevice of a device it finds); the others make any
ONLY_WHAT_IT_HAS = {"jax", "max", "dpnp"}
CPU = (DeviceType.kDLCPU, 0)

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def test_a_device_is_a_tuple_that_names_itself() -> None:
    d = dlbind.device("cuda:1")
    assert d == (DeviceType.kDLCUDA, 1) == (2, 1)
    kind, index = d
    assert (kind, index, d.device_type, d.device_id, d.name, str(d)) == (DeviceType.kDLCUDA, 1, 2, 1, "cuda", "cuda:1")
    assert d.__dlpack_device__() == (2, 1) and all(type(v) is int for v in d.__dlpack_device__())
    assert dlbind.device(d) is d and dlbind.device(("cuda", 1)) == d and hash(d) == hash((2, 1))


def test_a_tensor_says_its_device_as_a_device() -> None:
    t = dlbind.from_dlpack(np.arange(3))
    assert type(t.device) is dlbind.Device and t.device == CPU and str(t.device) == "cpu:0"


@pytest.mark.parametrize(
    ("spelled", "meant"),
    [("CUDA:1", (2, 1)), ("/job:localhost/replica:0/task:0/device:CPU:0", CPU), ("/device:GPU:3", (2, 3)),
     ("CPU", CPU), ("Rocm:2", (10, 2))],
)  # fmt: skip
def test_a_systems_own_spelling_of_a_device_is_read(spelled: str, meant: tuple[int, int]) -> None:
    assert dlbind.device(spelled) == meant


@pytest.mark.parametrize("bad", [object(), 3, [2, 1], 1.5])
def test_what_is_no_device_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="a device is 'cpu', 'cuda:0'"):
        dlbind.device(bad)


def test_an_unknown_device_name_is_a_value_error_with_a_suggestion() -> None:
    with pytest.raises(ValueError, match=r"unknown device 'vulcan' \(did you mean 'vulkan'\?\)"):
        dlbind.device("vulcan")
    # "gpu" is CUDA or ROCm: only a system's own device object says which (numpy's test_dlpack.py refuses it too)
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        dlbind.device("gpu")


@pytest.mark.parametrize("system", CPU_MAKERS)
def test_a_cpu_device_made_for_a_system_reads_back_and_is_taken_by_device(system: str) -> None:
    made = dlbind.device("cpu", to=system)
    assert dlbind.device(made) == CPU, (system, made)
    out = dlbind.convert(np.arange(3.0), to="numpy", device=made)  # every device= reads it
    assert np.array_equal(out, np.arange(3.0))
    assert dlbind.from_dlpack(np.arange(3.0), device=made).device == CPU


@pytest.mark.parametrize("system", CUDA_MAKERS)
def test_a_cuda_device_is_made_without_a_gpu_where_the_system_can(system: str) -> None:
    if system in ONLY_WHAT_IT_HAS:
        with pytest.raises(ValueError, match=f"{system} cannot make a device cuda:1"):
            dlbind.device("cuda:1", to=system)
        return
    made = dlbind.device("cuda:1", to=system)
    assert dlbind.device(made) == (DeviceType.kDLCUDA, 1), (system, made)


@pytest.mark.parametrize("system", ONE_KIND)
def test_a_device_of_a_kind_a_system_has_no_objects_of_is_refused(system: str) -> None:
    kinds = _kinds(system) or []
    other = next(name for name in ("cpu", "cuda", "vulkan") if name not in kinds)
    has = ", ".join(kinds)
    with pytest.raises(ValueError, match=f"^{system} has no device objects of {other}: it makes those of {has}$"):
        dlbind.device(f"{other}:0", to=system)


def _device_attribute(x: Any) -> Any:
    device = getattr(x, "device", None)
    return None if callable(device) else device


@pytest.mark.parametrize("system", INSTALLED)
def test_the_device_a_systems_array_reports_is_read(system: str) -> None:
    try:
        x = dlbind.convert(np.arange(3.0), to=system)
    except (BufferError, TypeError, ValueError) as exc:
        pytest.skip(f"{system} refuses this array: {exc}")
    reported = _device_attribute(x)
    if reported is None:
        pytest.skip(f"{type(x).__name__} has no device attribute")
    if system == "tinygrad" and str(reported).upper() not in ("CPU", "CLANG"):
        pytest.skip(f"tinygrad has no device dlbind names for its {reported} backend (DEV=PYTHON: its emulator)")
    if system == "numba":
        pytest.skip(f"numba's simulator has no device dlbind names ({reported!r})")
    # where its arrays are, as DLPack says it (dpnp's SYCL devices are oneapi, even on the CPU)
    assert dlbind.device(reported) == dlbind.from_dlpack(x).device, (system, reported)


@pytest.mark.skipif("paddle" not in INSTALLED, reason="paddle is not installed in this session")
def test_paddles_places_are_read_by_their_dlpack_device() -> None:
    import paddle

    assert dlbind.device(paddle.CPUPlace()) == CPU
    assert dlbind.from_dlpack(np.arange(3), device=paddle.CPUPlace()).device == CPU

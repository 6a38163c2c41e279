"""A target that cannot give the device asked for says which device was asked (issue 28): ``convert(x, to=...,
device=...)``'s error names ``device=`` beside where the data is, for every system whose importer takes
``device=`` (its row's ``keywords``), with a stand-in importer of that row where the library is absent."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import capsule
from dlbind._generated.adapters import ADAPTERS
from dlbind._generated.enums import DeviceType
from dlbind.conversion import ExplanationKind
from dlbind.devices import HOST_ACCESSIBLE, STREAM_FREE, device_name
from dlbind.routes import ROUTES, make_route

TAKE_DEVICE = sorted(name for name, row in ADAPTERS.items() if "device" in row.import_.keywords)


def test_some_rows_take_device() -> None:
    assert TAKE_DEVICE  # what the tests below walk (numpy, torch, jax, ... in today's table)


@pytest.mark.parametrize("system", TAKE_DEVICE)
def test_the_error_names_the_device_asked(system: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row's importer refuses the device as libraries do (torch: AssertionError "Torch not compiled with
    CUDA enabled"): the BufferError says device='cuda:1' was asked and what the data is."""

    def importer(x: Any, *, device: Any = None, copy: Any = None) -> Any:
        raise AssertionError(f"{system} not compiled with CUDA enabled")

    name = f"{system}_without_cuda"
    # the row as it is, but for its own constructor of copied-in data (dpnp.asarray: a library not installed here)
    row = ADAPTERS[system]
    row = row._replace(name=name, import_name=name, import_=row.import_._replace(copy_from=(), copy_with=""))
    route = make_route(row, importer)
    monkeypatch.setitem(ROUTES, name, route)
    with pytest.raises(BufferError) as info:
        dlbind.convert(np.arange(3.0), to=name, device="cuda:1")
    message = str(info.value)
    assert "cuda:1" in message, message  # the device asked, whoever refuses it
    if isinstance(info.value.__cause__, AssertionError):  # the importer was reached: its own words, after ours
        assert "to device='cuda:1'" in message and "on cpu:0" in message, message
        assert message.endswith(f"AssertionError: {system} not compiled with CUDA enabled"), message
    else:  # dlbind refused first: the row's device forms have no cuda:1, or its importer takes no device=
        assert info.value.__cause__ is None or isinstance(info.value.__cause__, ImportError), message


def test_cpu_only_torch_names_the_device_asked() -> None:
    """A CPU-only torch has no CUDA device (its row's device_count, torch.cuda.device_count(), is 0): dlbind
    refuses device='cuda' before torch's importer is called, naming the device asked, in explain as in convert
    (issue 40: explain said zero-copy where convert then failed inside torch)."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA: the device asked for can be had")
    for device in ("cuda", "cuda:0", "cuda:1"):
        said = dlbind.explain(np.arange(3), "torch", device=device)
        assert said.text == f"refused: no device {device!r} for torch: torch.cuda.device_count() is 0", said
        with pytest.raises(BufferError) as refused:
            dlbind.convert(np.arange(3), to="torch", device=device)
        assert str(refused.value) == said.text.removeprefix("refused: ")
        assert refused.value.__cause__ is None  # torch was not asked


def test_cpu_only_torch_refuses_data_on_a_device_it_has_not() -> None:
    """Data on cuda:0 given to a CPU-only torch without ``device=``: refused by name, in explain as in convert and
    in both builds (explain said zero-copy on cuda:0, and convert then failed inside torch: "Torch not compiled
    with CUDA enabled"). Nothing is read: the pointer is a host array's, said to be on CUDA."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this torch has CUDA: the device the data is on can be had")
    a = np.arange(6.0)
    on_device = dlbind.from_pointer(a.ctypes.data, (6,), "float64", device="cuda", owner=a)
    for keywords in ({}, {"stream": 7}, {"device": "cuda"}, {"device": "cuda:0"}):  # its own device asked too
        said = dlbind.explain(on_device, "torch", **keywords)
        assert said.text.startswith("refused: no device 'cuda"), (keywords, said)
        assert said.text.endswith("for torch: torch.cuda.device_count() is 0"), (keywords, said)
        with pytest.raises(BufferError) as refused:
            dlbind.convert(on_device, to="torch", **keywords)
        assert str(refused.value) == said.text.removeprefix("refused: "), keywords
    # the compiled convert's C route hands such data to torch itself, then its failure to Python: said alike
    from dlbind.conversion import resume

    failed = AssertionError("Torch not compiled with CUDA enabled")
    with pytest.raises(BufferError) as refused:
        resume(failed, on_device, "torch")
    assert str(refused.value) == said.text.removeprefix("refused: ") and refused.value.__cause__ is failed
    with pytest.raises(BufferError, match="AssertionError: Torch not compiled") as host:
        resume(failed, np.arange(3.0), "torch")  # host data: torch's own words, named as convert names them
    assert host.value.__cause__ is failed


def test_a_device_count_that_answers_a_truth_counts_one_at_least(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row's ``device_count`` may answer a truth (numba's ``numba.cuda.is_available``): True says the target has
    one CUDA device at least, so cuda:0 is had and cuda:1 is known only by trying (it was refused, as "it has 1
    cuda device"); False is none. The function stands in for a GPU this machine lacks."""
    import types

    from dlbind.routes import device_count

    gpu = types.ModuleType("dlbind_test_gpu")
    monkeypatch.setitem(sys.modules, "dlbind_test_gpu", gpu)
    row = ADAPTERS["numba"]
    cuda = int(DeviceType.kDLCUDA)
    a = np.arange(6.0)
    on_cuda0, on_cuda1 = (
        dlbind.from_pointer(a.ctypes.data, (6,), "float64", device=d, owner=a) for d in ("cuda:0", "cuda:1")
    )
    for answer, count in ((True, 1), (False, 0)):
        gpu.available = lambda answer=answer: answer
        name = f"numba_truth_{answer}"
        imp = row.import_._replace(device_count="dlbind_test_gpu.available")
        route = make_route(row._replace(name=name, import_name=name, import_=imp), lambda x: x)
        monkeypatch.setitem(ROUTES, name, route)
        found = device_count(route, cuda)
        assert (found.number, found.at_least) == (count, answer), found  # True: one at least, not one
        assert found.why == f"dlbind_test_gpu.available() is {int(answer) if count == 0 else answer}", found
        said = dlbind.explain(on_cuda1, name)
        assert (said.kind == ExplanationKind.REFUSED) is (count == 0), said
        assert "no device 'cuda:1'" in said.text if count == 0 else "1 cuda device" not in said.text, said
        said = dlbind.explain(on_cuda0, name)
        assert (said.kind == ExplanationKind.REFUSED) is (count == 0) and "only by trying" not in said.text, said


def test_an_index_beyond_the_targets_devices_is_refused() -> None:
    """The host has one device: cpu:1 is refused by dlbind for every target that takes device=, with the count."""
    for system in ("numpy", "torch"):
        pytest.importorskip(system)
        said = dlbind.explain(np.arange(3.0), system, device="cpu:1")
        assert said.kind == ExplanationKind.REFUSED and "it has 1 cpu device here" in said.text, said
        with pytest.raises(BufferError, match="it has 1 cpu device here"):
            dlbind.convert(np.arange(3.0), to=system, device="cpu:1")


# host memory of a device runtime (pinned) that the host reads, on devices without a stream rule: what a
# producer may say its data is on where the CPU reads it in place
_PINNED = sorted(HOST_ACCESSIBLE & STREAM_FREE - {int(DeviceType.kDLCPU)})


class _Pinned:
    """A producer of numpy's memory that says it is on ``device_type`` (pinned host memory): it honours
    ``dl_device`` (exports as the device asked) or, as older producers do, ignores it. Records what it was asked."""

    def __init__(self, device_type: int, honours: bool) -> None:
        self.array = np.arange(6, dtype=np.float32).reshape(2, 3)
        self.device_type, self.honours, self.asked = device_type, honours, []

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device_type, 0

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None
    ) -> Any:
        self.asked.append(dl_device)
        a = self.array
        device = (self.device_type, 0)
        if self.honours and dl_device is not None:
            device = (int(dl_device[0]), int(dl_device[1]))
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        strides = tuple(s // a.itemsize for s in a.strides)
        return capsule.export(a.ctypes.data, a.shape, strides, (2, 32, 1), device, 0, a, versioned=versioned)


def test_some_device_has_pinned_host_memory() -> None:
    assert _PINNED  # what the tests below walk (cuda_host, rocm_host in today's header)


@pytest.mark.parametrize("honours", [True, False], ids=["honours", "ignores"])
@pytest.mark.parametrize("device_type", _PINNED)
@pytest.mark.parametrize("system", ["numpy", "torch"])
def test_pinned_host_memory_converts_in_place_as_explained(system: str, device_type: int, honours: bool) -> None:
    """Data the host reads where it is (pinned memory) reaches a CPU target zero-copy, as ``explain`` says, in
    both builds alike: the producer is asked once, for the CPU, and a producer that ignores ``dl_device`` (it
    exports where its data is) is read as the CPU's, as dlbind's own export of that memory would be (the compiled
    build's C route had asked it with no device and the pure build had refused it)."""
    target = pytest.importorskip(system)
    p = _Pinned(device_type, honours)
    said = dlbind.explain(p, system)
    assert said.kind == ExplanationKind.ZERO_COPY, said
    p.asked.clear()
    out = dlbind.convert(p, system)
    assert p.asked == [(int(DeviceType.kDLCPU), 0)]
    values = np.asarray(out) if system == "numpy" else out.numpy()
    assert np.shares_memory(values, p.array) and values.tolist() == p.array.tolist()
    assert system != "torch" or out.device == target.device("cpu")


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("copy", [None, True, False])
@pytest.mark.parametrize("device_type", _PINNED)
@pytest.mark.parametrize("system", ["numpy", "torch"])
def test_pinned_host_memory_copies_as_asked_and_explained(
    system: str, device_type: int, copy: bool | None, device: str | None
) -> None:
    """Pinned memory read in place is the CPU's for ``copy=`` and ``device=``: ``copy=True`` copies (it had
    returned an alias of the producer's memory), ``copy=False`` is zero-copy (it had been refused as a host copy),
    ``device="cpu"`` reaches the target as cpu memory (torch had been handed cuda_host); what ``explain`` says is
    what ``convert`` does, in both builds."""
    pytest.importorskip(system)
    p = _Pinned(device_type, honours=False)
    said = dlbind.explain(p, system, copy=copy, device=device)
    out = dlbind.convert(p, system, copy=copy, device=device)
    values = np.asarray(out) if system == "numpy" else out.numpy()
    shares = np.shares_memory(values, p.array)
    assert values.tolist() == p.array.tolist()
    assert shares == (said.kind == ExplanationKind.ZERO_COPY), said
    assert shares == (copy is not True), said


@pytest.mark.parametrize("device_type", _PINNED)
@pytest.mark.parametrize("system", ["numpy", "torch"])
def test_pinned_memory_asked_where_it_is_of_a_target_without_it_is_refused(system: str, device_type: int) -> None:
    """``device=`` the data's own device, which the target holds no arrays of (numpy and pinned memory), is refused
    as another device it lacks is, by explain and convert alike (explain had said zero-copy and convert then
    failed in the target's importer)."""
    pytest.importorskip(system)
    name = device_name(device_type)
    said = dlbind.explain(_Pinned(device_type, honours=False), system, device=name)
    assert said.kind == ExplanationKind.REFUSED and f"{system} holds no {name} arrays" in said.text, said
    with pytest.raises(BufferError, match=f"{system} holds no {name} arrays"):
        dlbind.convert(_Pinned(device_type, honours=False), system, device=name)


@pytest.mark.parametrize("honours", [True, False], ids=["honours", "ignores"])
@pytest.mark.parametrize("device_type", _PINNED)
def test_pinned_host_memory_imports_on_the_cpu_asked(device_type: int, honours: bool) -> None:
    """``from_dlpack(x, device="cpu")`` of pinned memory: a view on the CPU, whether or not the producer honours
    ``dl_device``; asked without ``device=``, the tensor is where the producer says its data is."""
    p = _Pinned(device_type, honours)
    t = dlbind.from_dlpack(p, device="cpu")
    assert t.device == (int(DeviceType.kDLCPU), 0) and t.data_ptr == p.array.ctypes.data
    assert np.asarray(t).tolist() == p.array.tolist()
    assert dlbind.from_dlpack(p).device == (device_type, 0)


@pytest.mark.parametrize("device_type", _PINNED)
def test_a_copy_of_pinned_memory_stays_pinned_or_says_what_it_needs(device_type: int) -> None:
    """``copy=True`` of pinned memory without a device is a copy on the same device (the array API), which only its
    backend can allocate: without a usable one, a BufferError naming it, never a copy on cpu:0 (it had moved there
    unasked); the same device named explicitly is asked the same; ``device="cpu"`` copies to the CPU without one."""
    a = np.arange(6.0)
    p = dlbind.from_dlpack(dlbind.from_pointer(a.ctypes.data, (6,), "float64", device=(device_type, 0), owner=a))
    name = device_name(device_type)
    for copy in (lambda: dlbind.from_dlpack(p, copy=True), p.copy, lambda: p.__dlpack__(copy=True),
                 lambda: dlbind.from_dlpack(p, copy=True, device=(device_type, 0))):  # fmt: skip
        with pytest.raises(BufferError, match=f"copying {name}:0 memory needs"):
            copy()
    host = dlbind.from_dlpack(p, device="cpu", copy=True)
    assert host.device == (DeviceType.kDLCPU, 0) and host.flags & dlbind.Flags.IS_COPIED
    assert np.asarray(host).tolist() == a.tolist() and host.data_ptr != a.ctypes.data

"""Issue 21's GPU findings 2, 3, 4 and 6 as tests, and the copies dlbind makes of CUDA memory.

- finding 2: ``dlbind.convert(jax_gpu_array, to="torch")`` is a torch tensor on ``cuda:0`` holding JAX's
  values in memory of its own (JAX's is immutable): a device copy, not an alias, not a trip through the host.
- finding 3: ``dlbind.convert(cupy.arange(10.0)[::-1], to="torch")`` gives the reversed values or raises
  ``BufferError``, in a process that lives on (today torch aborts it).
- finding 4: dlbind-cuda's pinned (``memory="host"``) and managed tensors convert to CuPy with their values.
- finding 6: dlbind importing a CUDA producer without a stream asks it with ``stream=1`` (the legacy default
  stream, as torch's own consumer does), and refuses invalid stream arguments with the spec's types before
  asking the producer; ``copy=True`` on CUDA copies on the device.
- host copies: ``dlbind.from_dlpack(x, device="cpu", copy=True)`` of CUDA memory, and
  ``np.from_dlpack(dlbind_tensor, device="cpu", copy=True)``, hold the values.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import gpulibs
import numpy as np
import pytest

import dlbind
from dlbind import DeviceType, Flags

pytestmark = pytest.mark.gpu
CUDA0 = (int(DeviceType.kDLCUDA), 0)


def device(t: Any) -> tuple[int, int]:
    return int(t.device[0]), int(t.device[1])


# -- finding 2: jax -> torch is a device copy ----------------------------------------------------------------------

FINDING_2 = """
import json, resource
import jax, jax.numpy as jnp, torch, dlbind
gpu = jax.devices("gpu")[0]
small = jax.device_put(jnp.arange(1024, dtype=jnp.int32), gpu)
warm = dlbind.convert(small, to="torch")  # first-call costs (kernels, allocator pools) before measuring
torch.cuda.synchronize()
n = {n}
x = jax.device_put(jnp.arange(n, dtype=jnp.int32), gpu)
x.block_until_ready()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
y = dlbind.convert(x, to="torch")
torch.cuda.synchronize()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
expect = torch.arange(n, device="cuda", dtype=torch.int32)
print(json.dumps({{
    "type": type(y).__module__ + "." + type(y).__qualname__,
    "device": str(getattr(y, "device", "?")),
    "dtype": str(getattr(y, "dtype", "?")),
    "equal": bool(isinstance(y, torch.Tensor) and y.is_cuda and torch.equal(y, expect)),
    "jax_pointer": x.unsafe_buffer_pointer(),
    "torch_pointer": y.data_ptr() if isinstance(y, torch.Tensor) else None,
    "jax_still": int(x[12345]),
    "peak_rss_growth_kib": after - before,
}}))
"""


def test_finding2_jax_to_torch_is_a_device_copy() -> None:
    """1 GiB of int32 on the GPU, in a fresh process: the torch tensor is on cuda:0 with jax's values, at
    another address than jax's buffer, and the process's peak RSS grew by less than half the array (a trip
    through the host would add all of it)."""
    gpulibs.library("jax")
    gpulibs.library("torch")
    n = 256 << 20
    proc = gpulibs.run_child(FINDING_2.format(n=n))
    assert proc.returncode == 0, gpulibs.describe_exit(proc)
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["type"] == "torch.Tensor", found
    assert found["device"] == "cuda:0", found
    assert found["dtype"] == "torch.int32", found
    assert found["equal"], found
    assert found["torch_pointer"] != found["jax_pointer"], f"an alias of jax's immutable buffer: {found}"
    assert found["jax_still"] == 12345
    assert found["peak_rss_growth_kib"] < (n * 4 // 2) // 1024, f"a trip through the host: {found}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "complex64", "bool"])
def test_jax_to_torch_values_in_process(dtype: str) -> None:
    """The same, small, per dtype: values equal, on cuda:0, not aliasing jax's buffer."""
    torch = gpulibs.library("torch")
    host = gpulibs.host_values(dtype)
    x = gpulibs.make("jax", host)
    y = dlbind.convert(x, to="torch")
    assert isinstance(y, torch.Tensor) and str(y.device) == "cuda:0"
    assert y.data_ptr() != x.unsafe_buffer_pointer()
    gpulibs.same(gpulibs.read("torch", y, host.dtype), host, "jax -> torch")


# -- finding 3: CuPy's reversed array to torch, in a process that must live -------------------------------------------

FINDING_3 = """
import json
import cupy, dlbind
x = cupy.arange(10.0)[::-1]
try:
    y = dlbind.convert(x, to="torch")
except BufferError as exc:
    print(json.dumps({"refused": str(exc)}))
else:
    print(json.dumps({"values": y.cpu().tolist(), "type": type(y).__module__}))
"""


def test_finding3_reversed_cupy_to_torch_process_lives() -> None:
    gpulibs.library("cupy")
    gpulibs.library("torch")
    proc = gpulibs.run_child(FINDING_3)
    assert proc.returncode == 0, f"the process did not exit normally: {gpulibs.describe_exit(proc)}"
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    if "refused" not in found:
        assert found["type"] == "torch", found
        assert found["values"] == [float(v) for v in range(9, -1, -1)], found


# -- finding 4: pinned and managed memory to CuPy ----------------------------------------------------------------------


@pytest.mark.parametrize("memory", ["host", "managed"])
def test_finding4_pinned_and_managed_to_cupy(memory: str) -> None:
    cupy = gpulibs.library("cupy")
    dlbind_cuda = gpulibs.library("dlbind_cuda")
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = dlbind_cuda.asarray(a, memory=memory)
    y = dlbind.convert(t, to="cupy")
    assert isinstance(y, cupy.ndarray)
    assert np.array_equal(cupy.asnumpy(y), a)


# -- a producer handed over as it is: its export guards first -------------------------------------------------------


@pytest.mark.parametrize("target", ["cupy", "jax", "dlbind"])
def test_a_negative_bit_cuda_tensor_is_refused_not_handed_over(target: str) -> None:
    """torch's __dlpack__ exports a negative-bit view without the bit (the values negated): dlbind refuses it on
    every route, also where a plain convert hands the tensor itself to the target's importer (CuPy's), in Python
    the first time and in C after; a tensor without the bit still crosses with its values (to torch itself the
    tensor is its own answer, bit and all)."""
    torch = gpulibs.library("torch")
    if target != "dlbind":
        gpulibs.library(target)
    negated = torch._neg_view(torch.arange(6.0, device="cuda"))
    for _ in range(2):
        with pytest.raises(BufferError, match=r"is_neg\(\) is true"):
            dlbind.from_dlpack(negated) if target == "dlbind" else dlbind.convert(negated, to=target)
    if target == "dlbind":
        return
    plain = torch.arange(6.0, device="cuda")
    y = dlbind.convert(plain, to=target)
    assert np.array_equal(gpulibs.read(target, y, np.dtype(np.float32)), np.arange(6.0, dtype=np.float32))


# -- finding 6: streams dlbind passes and refuses ----------------------------------------------------------------------

MISSING = "<not passed>"


class Spy:
    """A CUDA producer wrapping a torch tensor that records what its consumer asks; it orders the work itself
    (a device synchronisation) so that what it records is only what the consumer asked."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor
        self.calls: list[dict[str, Any]] = []

    def __dlpack_device__(self) -> Any:
        return self.tensor.__dlpack_device__()

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        stream = kwargs.pop("stream", args[0] if args else MISSING)
        self.calls.append({"stream": stream, **kwargs})
        gpulibs.library("torch").cuda.synchronize()
        return self.tensor.__dlpack__(stream=-1, **kwargs)


class LegacySpy(Spy):
    """The same producer as an older spec wrote it: ``__dlpack__(self, stream=None)``."""

    def __dlpack__(self, stream: Any = MISSING) -> Any:  # type: ignore[override]
        self.calls.append({"stream": stream})
        gpulibs.library("torch").cuda.synchronize()
        return self.tensor.__dlpack__(stream=-1)


def _torch_cuda(n: int = 8) -> Any:
    torch = gpulibs.library("torch")
    return torch.arange(n, dtype=torch.float32, device="cuda")


@pytest.mark.parametrize("spy", [Spy, LegacySpy], ids=["current", "legacy"])
def test_finding6_a_cuda_producer_gets_stream_1_by_default(spy: type[Spy]) -> None:
    """dlbind.from_dlpack(producer) with stream=None asks a CUDA producer with stream=1 (the legacy default
    stream, as torch's test_dlpack_default_stream expects of a consumer), never None."""
    x = _torch_cuda()
    p = spy(x)
    t = dlbind.from_dlpack(p)
    assert p.calls, "the producer was not asked"
    assert all(call["stream"] == 1 for call in p.calls), p.calls
    assert device(t) == CUDA0
    assert np.array_equal(gpulibs.host_copy(t), np.arange(8, dtype=np.float32))


def test_finding6_an_explicit_stream_is_passed_on() -> None:
    torch = gpulibs.library("torch")
    s = torch.cuda.Stream()
    for stream in (s.cuda_stream, 2, -1, 1):
        p = Spy(_torch_cuda())
        dlbind.from_dlpack(p, stream=stream)
        assert [call["stream"] for call in p.calls][-1:] == [stream], (stream, p.calls)


INVALID = [
    (object(), TypeError),
    ("1", TypeError),
    (1.0, TypeError),
    (0, (BufferError, ValueError)),  # ambiguous on CUDA (torch itself raises AssertionError: not the spec's)
    (-2, (BufferError, ValueError)),
]


@pytest.mark.parametrize(("stream", "errors"), INVALID, ids=["object", "str", "float", "zero", "minus-two"])
def test_finding6_invalid_streams_raise_the_spec_types(stream: Any, errors: Any) -> None:
    """What torch's test_dlpack.py asks of producers (TypeError for a stream that is no int), and the spec's
    types for values CUDA does not allow; dlbind refuses before asking the producer."""
    p = Spy(_torch_cuda())
    with pytest.raises(errors):
        dlbind.from_dlpack(p, stream=stream)
    assert p.calls == [], "the producer was asked with an invalid stream"
    with pytest.raises(errors):
        dlbind.convert(_torch_cuda(), to="cupy" if gpulibs._load("cupy")[1] is None else "torch", stream=stream)
    dlbind_cuda = gpulibs.library("dlbind_cuda")
    t = dlbind_cuda.asarray(np.arange(4.0))
    with pytest.raises(errors):
        t.__dlpack__(stream=stream)
    with pytest.raises(errors):
        t.__dlpack__(stream=stream, max_version=(1, 0))


# -- copies of CUDA memory ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset"])
@pytest.mark.parametrize("dtype", ["float32", "complex64", "bool", "bfloat16"])
def test_host_copy_of_torch_cuda(dtype: str, layout: str) -> None:
    """``dlbind.from_dlpack(torch_cuda, device="cpu", copy=True)``: a host tensor with the values, IS_COPIED."""
    host = gpulibs.host_values(dtype)
    x = gpulibs.view("torch", gpulibs.make("torch", host), layout, host)
    want = gpulibs.LAYOUTS[layout](host)
    c = dlbind.from_dlpack(x, device="cpu", copy=True)
    assert device(c) == (int(DeviceType.kDLCPU), 0)
    assert c.flags & Flags.IS_COPIED
    gpulibs.same(np.asarray(c), want, "torch cuda -> host copy")


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset", "reversed"])
def test_numpy_host_copy_of_a_dlbind_cuda_tensor(layout: str) -> None:
    """``np.from_dlpack(dlbind_tensor_on_cuda, device="cpu", copy=True)`` equals the values, for dlbind-cuda's
    own tensors and for a Tensor imported from torch."""
    host = gpulibs.host_values("float64")
    t = gpulibs.view("dlbind_cuda", gpulibs.make("dlbind_cuda", host), layout, host)
    want = gpulibs.LAYOUTS[layout](host)
    got = np.from_dlpack(t, device="cpu", copy=True)
    gpulibs.same(got, want, "np.from_dlpack(dlbind_cuda tensor, device='cpu', copy=True)")
    if gpulibs._load("torch")[1] is None and layout != "reversed":
        x = gpulibs.view("torch", gpulibs.make("torch", host), layout, host)
        got = np.from_dlpack(dlbind.from_dlpack(x), device="cpu", copy=True)
        gpulibs.same(got, want, "np.from_dlpack(dlbind.from_dlpack(torch_cuda), device='cpu', copy=True)")


def test_torch_host_copy_of_a_dlbind_cuda_tensor() -> None:
    torch = gpulibs.library("torch")
    dlbind_cuda = gpulibs.library("dlbind_cuda")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = torch.from_dlpack(dlbind_cuda.asarray(a), device="cpu")
    assert y.device.type == "cpu" and np.array_equal(y.numpy(), a)


def test_device_copies() -> None:
    """copy=True on CUDA copies on the device (torch's test_copy with dlbind as either side)."""
    torch = gpulibs.library("torch")
    dlbind_cuda = gpulibs.library("dlbind_cuda")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = torch.from_numpy(a).to("cuda")
    c = dlbind.from_dlpack(x, copy=True)
    assert device(c) == CUDA0
    assert c.flags & Flags.IS_COPIED
    assert c.data_ptr + c.byte_offset != x.data_ptr()
    assert np.array_equal(gpulibs.host_copy(c), a)
    t = dlbind_cuda.asarray(a)
    y = torch.from_dlpack(t, copy=True)
    assert y.is_cuda and y.data_ptr() != t.data_ptr
    assert np.array_equal(y.cpu().numpy(), a)
    same_again = dlbind.from_dlpack(t, copy=True)
    assert device(same_again) == CUDA0 and same_again.data_ptr != t.data_ptr
    assert np.array_equal(gpulibs.host_copy(same_again), a)


def test_copy_false_across_devices_is_refused() -> None:
    """A host copy of device memory under copy=False is refused (BufferError or ValueError), not made."""
    x = _torch_cuda()
    with pytest.raises((BufferError, ValueError)):
        dlbind.from_dlpack(x, device="cpu", copy=False)


def test_sanitize_script_is_importable() -> None:
    """tests/gpu/sanitize.py (run under compute-sanitizer by .ci/gpu) runs cleanly here too."""
    from pathlib import Path

    gpulibs.library("torch")
    gpulibs.library("dlbind_cuda")
    script = Path(__file__).with_name("sanitize.py")
    proc = gpulibs.run_child(textwrap.dedent(f"""
        import runpy, sys
        sys.argv = [{str(script)!r}, "--quick"]
        runpy.run_path({str(script)!r}, run_name="__main__")
    """))  # fmt: skip
    assert proc.returncode == 0, gpulibs.describe_exit(proc)
    assert "sanitize: ok" in proc.stdout

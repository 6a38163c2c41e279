"""A name that does not resolve (a system, a device, a dtype) is refused with the names it was probably meant to be."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import dlbind
from dlbind import devices, dtypes
from dlbind._names import suggestion


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: dlbind.convert(np.arange(3), to="pytorch"), "unknown array library 'pytorch' (did you mean 'torch'?)"),
        (lambda: dlbind.explain(np.arange(3), to="tensorflw"), "(did you mean 'tensorflow'?)"),
        (lambda: devices.parse_device("cuda1"), "unknown device 'cuda1' (did you mean 'cuda'?)"),
        (lambda: dlbind.from_dlpack(np.arange(3), device="vulcan:0"), "(did you mean 'vulkan'?)"),
        (lambda: dtypes.lookup("bfloat"), "unknown DLPack dtype name 'bfloat' (did you mean 'bfloat16'?)"),
    ],
)
def test_an_unknown_name_is_refused_with_what_it_was_meant_to_be(call: object, said: str) -> None:
    with pytest.raises(ValueError, match="known") as caught:
        call()  # type: ignore[operator]
    assert said in str(caught.value)


def test_a_name_like_several_offers_them_all() -> None:
    said = suggestion("float", dtypes.DTYPE_BY_NAME)
    assert all(repr(n) in said for n in ("float16", "float32", "float64")), said


@pytest.mark.parametrize("name", ["gpu", "xyzzy", "np"])
def test_no_suggestion_where_nothing_is_close(name: str) -> None:
    # three letters one apart ("gpu", "cpu") are not a likely slip: suggesting the host for a GPU would mislead
    known = [*devices.DEVICE_BY_NAME, "numpy", "torch"]
    # the header's device names, whatever its version: none begins with the name (a newer one's "tpu" begins "tpu_host")
    assert not [k for k in known if k.startswith(name)], f"this header names a device beginning {name!r}"
    assert suggestion(name, known) == ""


def test_the_command_line_suggests_a_library() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dlbind", "explain", "numpy", "pytorch"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "did you mean 'torch'?" in done.stderr

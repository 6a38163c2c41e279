"""The examples of docs/backends.md run as written: the status of the installed backends, the ten lines."""

from __future__ import annotations

import pytest

from docs_examples import example, run_doctest, run_example

pytestmark = pytest.mark.vulkan


def test_the_example_is_short() -> None:
    lines = [ln for ln in example("backends.md", "vulkan").splitlines() if ln.strip()]
    assert len(lines) <= 10


def test_the_example_runs() -> None:
    run_example("backends.md", "vulkan")


def test_the_status_example() -> None:
    # nox -s backends installs every backend; the page shows what that prints with Vulkan on lavapipe
    run_doctest("backends.md", "status")

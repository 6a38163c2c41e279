"""Tests of dlbind-vulkan. They need a Vulkan device: Mesa's lavapipe is one on any CPU
(`apt-get install mesa-vulkan-drivers libvulkan1`; `nox -s backends` installs it). Without one, every
test that needs a device is skipped naming what is missing."""

from __future__ import annotations

import pytest

import dlbind_vulkan


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    probe = dlbind_vulkan.probe()
    if probe.available:
        return
    skip = pytest.mark.skip(reason=f"needs a Vulkan device (Mesa's lavapipe will do): {probe.reason}")
    for item in items:
        if "vulkan" in item.keywords:
            item.add_marker(skip)

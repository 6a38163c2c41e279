"""The recording fake of the CUDA runtime as the tests drive it (see recording_cudart.c; the driving is
tests/gpu_backends/gpu_recording.py's, shared with dlbind-rocm's tests)."""

from __future__ import annotations

import gpu_recording
from dlbind_cuda import _runtime

__all__ = ["Recording", "event_wait", "user_stream"]


class Recording(gpu_recording.Recording):
    """One fresh copy of the recording CUDA runtime: its log, its settings, failures to inject."""

    runtime = _runtime


user_stream = Recording.user_stream
event_wait = Recording.event_wait

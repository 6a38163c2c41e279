"""The Objective-C runtime and Metal: loading them, the probe, messages, buffers, blits.

Nothing here runs at import. :func:`runtime` loads on first use and keeps the answer. Off macOS the answer
is "wrong platform: macOS only" without opening anything; on macOS, ``libobjc`` (found as every backend's
library is: ``DLBIND_METAL_LIBRARY``, then the system) and ``Metal.framework`` are opened, and the probe
asks ``MTLCreateSystemDefaultDevice`` for a device. Every call that needs Metal raises :class:`Unavailable`
with the probe's reason.

Objective-C methods are messages: :meth:`Runtime.send` casts ``objc_msgSend`` to the method's exact C type
(Apple's rule; arm64's variadic convention differs from the fixed one) and sends the selector. The
declarations are the declaration file's (``spec/backends/metal.toml``), sealed in ``_generated``.

``DLBIND_METAL_LIBRARY`` set off macOS names a library that stands in for both (the tests' fake): it must
export the Objective-C runtime's functions and Metal's two.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from dlbind._backends import Probe, find_library
from dlbind._gpu_runtime import Loaded, checked_device, require_available
from dlbind_metal._generated import _abi
from dlbind_metal._generated import declarations as decl

__all__ = ["STORAGE", "Buffer", "MetalError", "Runtime", "Unavailable", "ffi", "reset", "runtime"]

#: The ABI-mode FFI of the declaration file.
ffi: Any = _abi.ffi

M = decl.MACROS
FRAMEWORKS = "/System/Library/Frameworks"
METAL = f"{FRAMEWORKS}/Metal.framework/Metal"
# Apple: "in macOS, for the system to provide a default Metal device object, you need to link to CoreGraphics".
COREGRAPHICS = f"{FRAMEWORKS}/CoreGraphics.framework/CoreGraphics"

#: MTLStorageMode -> the name users pass (``empty(..., storage=...)``) and see in errors.
STORAGE = {
    M["MTLStorageModeShared"]: "shared",
    M["MTLStorageModeManaged"]: "managed",
    M["MTLStorageModePrivate"]: "private",
    M["MTLStorageModeMemoryless"]: "memoryless",
}
STORAGE_MODES = {name: mode for mode, name in STORAGE.items()}

# The C type of each message sent (objc_msgSend cast to it): result(receiver, selector, arguments...).
_SIGNATURES = {
    "id": "id(*)(id, SEL)",
    "uint": "NSUInteger(*)(id, SEL)",
    "pointer": "void *(*)(id, SEL)",
    "string": "const char *(*)(id, SEL)",
    "void": "void(*)(id, SEL)",
    "id_uint": "id(*)(id, SEL, NSUInteger)",
    "id_uint_uint": "id(*)(id, SEL, NSUInteger, NSUInteger)",
    "id_bytes_uint_uint": "id(*)(id, SEL, const void *, NSUInteger, NSUInteger)",
    "blit": "void(*)(id, SEL, id, NSUInteger, id, NSUInteger, NSUInteger)",
    "void_id": "void(*)(id, SEL, id)",
}


class MetalError(RuntimeError):
    """A Metal call failed (Metal reports most failures as nil or a command buffer's error status)."""


class Unavailable(BufferError):
    """Metal cannot be used here; the message is the probe's one-line reason."""


def _int(obj: Any) -> int:
    return int(ffi.cast("uintptr_t", obj))


class Runtime:
    """The loaded Objective-C runtime and Metal, the devices found, and what the probe said."""

    def __init__(self) -> None:
        self.objc: Any = None
        self.metal: Any = None
        self.path = ""
        self.devices: list[int] = []  # retained id<MTLDevice>, in MTLCopyAllDevices' order: device_id
        self.names: list[str] = []
        self._sel: dict[str, Any] = {}
        self._msg: dict[str, Any] = {}
        self._queues: dict[int, int] = {}
        self._lock = threading.Lock()
        self.probe = self._load()

    # -- loading ---------------------------------------------------------------------------------------
    def _load(self) -> Probe:
        explicit = os.environ.get(decl.LIBRARY_ENV, "")
        if sys.platform != "darwin" and not explicit:
            return Probe(False, f"wrong platform: macOS only (Metal is Apple's; this is {sys.platform})")
        try:
            self.objc, self.path = find_library(decl.LIBRARY_ENV, decl.LIBRARY_WHEELS, decl.LIBRARY_NAMES, ffi.dlopen)
        except OSError as exc:
            return Probe(False, str(exc))
        try:
            self._msg = {k: ffi.cast(t, self.objc.objc_msgSend) for k, t in _SIGNATURES.items()}
            _ = self.objc.sel_registerName, self.objc.objc_getClass  # the runtime's functions are there
        except (AttributeError, ffi.error) as exc:
            return Probe(False, f"runtime error: {self.path} is not the Objective-C runtime ({exc})")
        if os.path.exists(METAL):
            with contextlib.suppress(OSError):
                ffi.dlopen(COREGRAPHICS)
            try:
                self.metal = ffi.dlopen(METAL)
            except OSError as exc:
                return Probe(False, f"runtime library not found: {METAL} cannot be loaded ({exc})")
        else:
            self.metal = self.objc  # a stand-in (DLBIND_METAL_LIBRARY off macOS) exports both
        try:
            with self.pool():
                default = self.metal.MTLCreateSystemDefaultDevice()
                if default == ffi.NULL:
                    return Probe(False, "no device: MTLCreateSystemDefaultDevice returned nil (no Metal GPU)",
                                 f"Metal ({self.path})", 0)  # fmt: skip
                self._find_devices(_int(default))
        except (AttributeError, ffi.error) as exc:
            return Probe(False, f"runtime error: Metal's functions are missing ({exc})")
        described = f"Metal, {self.names[0]} ({self.path})"
        return Probe(True, "", described, len(self.devices))

    def _find_devices(self, default: int) -> None:
        """Every device, in MTLCopyAllDevices' order (the default alone where that finds none)."""
        found = self.metal.MTLCopyAllDevices()
        devices = []
        if found != ffi.NULL:
            for i in range(self.send("uint", _int(found), "count")):
                device = self.send("id_uint", _int(found), "objectAtIndex:", i)
                devices.append(self.send("id", device, "retain"))
            self.send("void", _int(found), "release")
        if not devices:
            devices = [default]
        else:
            self.send("void", default, "release")
        self.devices = devices
        self.names = [self.string(self.send("id", d, "name")) for d in devices]

    # -- messages ----------------------------------------------------------------------------------------
    def sel(self, name: str) -> Any:
        found = self._sel.get(name)
        if found is None:
            found = self._sel[name] = self.objc.sel_registerName(name.encode())
        return found

    def send(self, signature: str, receiver: int, selector: str, *args: Any) -> Any:
        """``[receiver selector args...]`` with objc_msgSend cast to ``_SIGNATURES[signature]``; ids as ints."""
        out = self._msg[signature](ffi.cast("id", receiver), self.sel(selector), *args)
        return _int(out) if signature.startswith("id") else out

    def string(self, nsstring: int) -> str:
        if not nsstring:
            return "?"
        text = self.send("string", nsstring, "UTF8String")
        return str(ffi.string(text).decode(errors="replace")) if text != ffi.NULL else "?"

    @contextlib.contextmanager
    def pool(self) -> Iterator[None]:
        """An NSAutoreleasePool around the block (the objects Metal autoreleases are freed at its end)."""
        cls = self.objc.objc_getClass(b"NSAutoreleasePool")
        if cls == ffi.NULL:
            yield
            return
        pool = self.send("id", self.send("id", _int(cls), "alloc"), "init")
        try:
            yield
        finally:
            self.send("void", pool, "drain")

    def require(self) -> None:
        require_available(self.probe, "dlbind-metal", Unavailable)

    def check_device(self, device_id: int) -> int:
        self.require()
        return checked_device(device_id, len(self.devices), "Metal")

    # -- buffers ---------------------------------------------------------------------------------------------
    def device_index(self, buffer: int) -> int:
        """The device_id of ``[buffer device]`` (matched by registryID)."""
        device = self.send("id", buffer, "device")
        if device in self.devices:
            return self.devices.index(device)
        registry = self.send("uint", device, "registryID")
        for i, d in enumerate(self.devices):
            if self.send("uint", d, "registryID") == registry:
                return i
        raise BufferError(f"the MTLBuffer {buffer:#x} is on a Metal device this process does not list")

    def describe(self, buffer: int) -> tuple[int, int, str]:
        """(contents address or 0, length, storage mode name) of an id<MTLBuffer>."""
        contents = _int(self.send("pointer", buffer, "contents"))
        length = int(self.send("uint", buffer, "length"))
        mode = int(self.send("uint", buffer, "storageMode"))
        return contents, length, STORAGE.get(mode, f"storage mode {mode}")

    def blit(self, device_id: int, src: int, src_offset: int, dst: int, dst_offset: int, nbytes: int) -> None:
        """Copy bytes between two buffers of one device on the GPU, and wait until it completed. macOS takes whole
        4-byte words only: both offsets and ``nbytes`` multiples of :data:`WORD` (the callers' spans are so)."""
        selector = "copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:"
        self._encode_blit(device_id, f"a blit of {nbytes} bytes", "blit", selector, ffi.cast("id", src), src_offset,
                          ffi.cast("id", dst), dst_offset, nbytes)  # fmt: skip

    def synchronize(self, device_id: int, buffer: int) -> None:
        """Make the GPU's writes to a managed-storage ``buffer`` visible to the CPU (``synchronizeResource:``), and
        wait until it completed: the CPU reads a managed buffer's ``contents`` only after this."""
        self._encode_blit(device_id, "synchronizing a managed buffer", "void_id", "synchronizeResource:",
                          ffi.cast("id", buffer))  # fmt: skip

    def _encode_blit(self, device_id: int, what: str, signature: str, selector: str, *args: Any) -> None:
        """One blit command (``selector`` with ``args``) on the device's queue, committed and waited for."""
        with self._lock:
            queue = self._queues.get(device_id)
            if queue is None:
                queue = self._queues[device_id] = self.send("id", self.devices[device_id], "newCommandQueue")
                if not queue:
                    raise MetalError(f"newCommandQueue returned nil on Metal device {device_id}")
        with self.pool():
            command = self.send("id", queue, "commandBuffer")
            encoder = self.send("id", command, "blitCommandEncoder")
            if not command or not encoder:
                raise MetalError("commandBuffer or blitCommandEncoder returned nil")
            self.send(signature, encoder, selector, *args)
            self.send("void", encoder, "endEncoding")
            self.send("void", command, "commit")
            self.send("void", command, "waitUntilCompleted")
            status = int(self.send("uint", command, "status"))
        if status != M["MTLCommandBufferStatusCompleted"]:
            raise MetalError(f"{what} ended with MTLCommandBufferStatus {status}")

    def release(self, obj: int) -> None:
        self.send("void", obj, "release")


#: What a blit copies on macOS: whole words of 4 bytes (both offsets and the size are multiples of it).
WORD = 4


class Buffer:
    """A new id<MTLBuffer> (``newBufferWithLength:options:`` or ``...WithBytes:``), released with this object; of
    ``nbytes`` rounded up to a :data:`WORD`, so that a blit reaches all of it (``size``: ``nbytes``; ``source``: the
    host address of ``nbytes`` bytes it starts with, shared storage only).

    Not released at interpreter exit (the process's end frees it, and the runtime may be unloading).
    """

    def __init__(self, rt: Runtime, nbytes: int, storage: str, device_id: int, source: int = 0) -> None:
        self.size, self.storage, self.device_id = nbytes, storage, device_id
        options = STORAGE_MODES[storage] << M["MTLResourceStorageModeShift"]
        device = rt.devices[device_id]
        length = nbytes + -nbytes % WORD
        if source and length == nbytes:
            handle = rt.send("id_bytes_uint_uint", device, "newBufferWithBytes:length:options:",
                             ffi.cast("const void *", source), nbytes, options)  # fmt: skip
        else:
            handle = rt.send("id_uint_uint", device, "newBufferWithLength:options:", length, options)
            if handle and source:  # the source has nbytes only: the buffer's last word is partly zeros
                ffi.memmove(ffi.cast("char *", rt.send("pointer", handle, "contents")), ffi.cast("char *", source),
                            nbytes)  # fmt: skip
        if not handle:
            raise MemoryError(f"Metal could not allocate {nbytes} bytes ({storage} storage) on device {device_id}")
        self.handle = handle
        finalizer = weakref.finalize(self, rt.release, handle)
        finalizer.atexit = False


_RUNTIME = Loaded(Runtime)
#: The process's runtime, loaded on first call (the probe's answer is kept).
runtime = _RUNTIME.get
#: Forget the loaded runtime (tests that switch ``DLBIND_METAL_LIBRARY``): the next call loads it again.
reset = _RUNTIME.reset

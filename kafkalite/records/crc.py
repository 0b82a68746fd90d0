"""CRC-32C (Castagnoli), the checksum of record batch v2.

One function, :func:`crc32c`, used everywhere. It runs on google-crc32c's C/SSE4.2 code when that
package is installed (about 100x faster than crcmod on these machines) and otherwise on crcmod's C
extension, which is always installed and is checked at import: crcmod silently falls back to a
pure-Python build that would make every produce request crawl.
"""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Callable, Protocol

import crcmod.predefined

BytesLike = bytes | bytearray | memoryview


class Crc32c(Protocol):
    """A CRC-32C function: ``value`` continues a previous CRC and defaults to 0 (start afresh)."""

    def __call__(self, data: BytesLike, value: int = 0, /) -> int: ...


def _require_crcmod_extension() -> None:
    from crcmod.crcmod import _usingExtension  # the flag lives on the submodule only

    if not _usingExtension:
        raise ImportError(
            "crcmod was installed without its C extension; run scripts/setup "
            "(pip install --no-cache-dir --force-reinstall crcmod with gcc and python3-dev present)")


_require_crcmod_extension()
_crcmod_fn: Callable[[BytesLike, int], int] = crcmod.predefined.mkPredefinedCrcFun("crc-32c")


def crc32c_crcmod(data: BytesLike, value: int = 0) -> int:
    """CRC-32C by crcmod; ``value`` continues a previous CRC (0 starts afresh)."""
    return _crcmod_fn(data, value)


class _PyBuffer(ctypes.Structure):
    """CPython's ``Py_buffer``: lets us hand the C library a pointer into any buffer, no copy."""

    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


#: Up to this many bytes a buffer is copied into a ``bytes`` for google-crc32c's own C function
#: (0.3-1.4 us up to 16 KB) rather than passed by pointer through ctypes, whose three foreign calls
#: cost 2.5-5.7 us whatever the size: a follower's or a low-rate producer's batch is a few hundred
#: bytes, and those calls were 4-7 % of a broker's Python time per replicated write (py-spy of
#: bench.replication_cpu). Above it the copy costs more than it saves (64 KB: 6.0 against 8.5 us).
COPY_LIMIT = 32 * 1024


def _load_google_crc32c() -> Crc32c:
    """google-crc32c's C/SSE4.2 CRC for any buffer, without copying a large one.

    google-crc32c's own Python function parses its argument with ``y#``, which refuses writable
    buffers (a memoryview into a receive buffer), so a large one goes to the bundled libcrc32c's
    ``crc32c_extend`` by pointer; a small one is copied (see :data:`COPY_LIMIT`).
    """
    import google_crc32c

    if google_crc32c.implementation != "c":
        raise ImportError("google-crc32c has only its pure-Python build")
    libdir = Path(google_crc32c.__file__).resolve().parent.parent / "google_crc32c.libs"
    candidates = sorted(libdir.glob("libcrc32c*.so*"))
    if not candidates:
        raise ImportError(f"no libcrc32c beside google-crc32c in {libdir}")
    lib = ctypes.CDLL(str(candidates[0]))
    extend = lib.crc32c_extend
    extend.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]
    extend.restype = ctypes.c_uint32
    extend_bytes: Callable[[int, bytes], int] = google_crc32c.extend
    get_buffer = ctypes.pythonapi.PyObject_GetBuffer
    get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
    get_buffer.restype = ctypes.c_int
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes = [ctypes.POINTER(_PyBuffer)]
    release.restype = None
    simple = 0  # PyBUF_SIMPLE: contiguous bytes, read-only is fine

    def crc32c_google(data: BytesLike, value: int = 0) -> int:
        """CRC-32C by google-crc32c's SSE4.2 code; ``value`` continues a previous CRC."""
        if type(data) is bytes:
            return extend_bytes(value, data)
        if len(data) <= COPY_LIMIT:
            return extend_bytes(value, bytes(data))
        view = _PyBuffer()
        get_buffer(data, ctypes.byref(view), simple)  # raises on a non-contiguous buffer
        try:
            return extend(value, view.buf, view.len)
        finally:
            release(ctypes.byref(view))

    assert crc32c_google(b"123456789") == 0xE3069283, "libcrc32c gave a wrong check value"
    return crc32c_google


crc32c: Crc32c
IMPLEMENTATION: str
try:
    crc32c = _load_google_crc32c()
    IMPLEMENTATION = "google-crc32c"
except (ImportError, OSError, AttributeError):  # pragma: no cover - depends on installed packages
    crc32c = crc32c_crcmod
    IMPLEMENTATION = "crcmod"

"""Record bytes that stay in a segment file until the socket takes them (Kafka's ``FileRecords``
slice that ``FileRecords.writeTo`` hands to ``FileChannel.transferTo``).

A :class:`FileRegion` names ``length`` bytes at ``position`` of a log file through its own
duplicate of the file's descriptor: the segment may be rolled, evicted from the open-file cache,
renamed ``.deleted`` or removed while the response that carries the region waits in a queue, and
the bytes stay readable until the region is closed. The codec counts a region by its length (the
RECORDS size prefix) and passes it through to the response's chunk list; the connection's writer
(``kafkalite.net.sendfile``) sends it with ``os.sendfile`` and closes it. Paths that must look at
or transform the bytes (down-conversion, TLS) call :meth:`read`, the one copy into Python.

A region is closed exactly once: by whoever sent or copied it, or, for a region dropped on the
way (a throttled answer, a read replaced by a later one), when it is garbage collected (CPython
frees it as soon as the last reference goes, so descriptors do not pile up).
"""
from __future__ import annotations

import os


class ShortFileError(OSError):
    """The file holds fewer bytes than the region promised (truncated under us)."""


class FileRegion:
    """``length`` bytes at ``position`` of a file, held open by a duplicated descriptor."""

    __slots__ = ("fd", "position", "length", "path")

    def __init__(self, fd: int, position: int, length: int, path: str = "?") -> None:
        self.fd = os.dup(fd)            # ours: survives the segment closing or deleting its file
        self.position = position
        self.length = length
        self.path = path

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The bytes, copied into Python (one pread), for paths that must transform them."""
        if self.fd < 0:
            raise ValueError(f"region of {self.path} is closed")
        data = os.pread(self.fd, self.length, self.position)
        if len(data) != self.length:
            raise ShortFileError(f"{self.path} shrank: {len(data)} of {self.length} bytes at {self.position}")
        return data

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        if getattr(self, "fd", -1) >= 0:
            try:
                self.close()
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"FileRegion({self.path!r}, position={self.position}, length={self.length})"

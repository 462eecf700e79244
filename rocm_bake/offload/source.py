"""Byte access to one wheel member: once front to back, or in place when stored.

A wheel is a DEFLATE zip, and ``ZipExtFile.seek`` backwards restarts
inflation from the start of the member: on a 1 GB ``libtorch_hip.so`` with
one bundle per translation unit, seeking back to each magic made the scan
quadratic (125 times one inflate pass for 290 MB). :class:`ForwardSource`
therefore never seeks: it reads the member once, keeps only the bytes a
pending decision may still need (a candidate bundle's header), and passes
over a bundle's payload without searching it. :class:`StoredSource` serves a
stored (uncompressed) member straight from the wheel file, so the scan reads
only headers and the bytes between bundles.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from typing import IO

from rocm_bake.errors import RocmBakeError
from rocm_bake.offload.bundle import BUNDLE_MAGIC
from rocm_bake.offload.elf import FATBIN_SECTION

#: Bytes inflated per read of the member: large enough that Python overhead is
#: noise. The member is always read a whole chunk at a time (see ``_read``).
CHUNK = 1 << 20
#: The first bytes taken into the buffer after passing over a bundle: the next
#: one is usually within a page, and every byte taken into the buffer is
#: searched (a payload passed over is not). A slice of the chunk already read,
#: so small costs nothing more at the member.
FIRST_FILL = 8 << 10
#: A plain regex literal search beats ``bytes.find`` on short needles (2.1
#: against 1.4 GB/s here); the 24-byte bundle magic is fastest with ``find``.
_CCOB = re.compile(rb"CCOB")
_OVERLAP = len(BUNDLE_MAGIC) - 1
#: Bytes of a section name kept after each ``.hip_fatbin`` string seen.
_NAME_BYTES = 64
#: Bounds on what a hostile member can make the scan remember.
MAX_NAME_HITS = 4096

Advance = Callable[[int], None]


class Hit:
    """A magic found at ``offset``: ``ccob`` or the uncompressed bundle magic."""

    __slots__ = ("offset", "ccob")

    def __init__(self, offset: int, ccob: bool) -> None:
        self.offset, self.ccob = offset, ccob


def _first_hit(buf: bytes, start: int, end: int) -> tuple[int, bool] | None:
    """Earliest magic in ``buf[start:end]`` (each match wholly inside)."""
    j = buf.find(BUNDLE_MAGIC, start, end)
    m = _CCOB.search(buf, start, j + 4 if j >= 0 else end)
    if m is not None and (j < 0 or m.start() < j):
        return m.start(), True
    return (j, False) if j >= 0 else None


class ForwardSource:
    """A compressed member read exactly once, front to back, in bounded memory.

    ``read_at`` serves any offset at or after the release point, reading
    forward as needed and keeping what it read; ``release`` drops bytes before
    an offset, reading through (inflating, not searching, not keeping) up to it
    when it lies ahead. A range registered with :meth:`capture` is copied out
    as it streams by, even while released bytes are passed over (the ELF
    section table sits at the end, after the bundles). Every byte filled into
    the buffer is also searched for ``.hip_fatbin`` strings, so section names
    resolve even when the name table came before the section table.
    """

    def __init__(self, handle: IO[bytes], size: int, head: bytes, advance: Advance, chunk: int | None = None) -> None:
        self._handle, self.size, self._advance = handle, size, advance
        self._read1 = getattr(handle, "read1", handle.read)
        self._chunk = chunk or CHUNK
        self._buf, self._base = b"", 0   # _buf[0] is at absolute offset _base
        self._start = 0                  # nothing before this is needed again
        self._end = 0                    # bytes taken from the handle so far
        self._captures: list[list] = []  # [start, length, bytearray]
        self.names: list[tuple[int, bytes]] = []
        self._tail, self._tail_end = b"", -1
        self._fill_size = min(FIRST_FILL, self._chunk)
        self._pending, self._pending_at = b"", 0  # the last chunk from the handle, and how much of it is taken
        self.reads = 0
        if head:
            self._take(head)
            self._append(head)

    # -- reading
    def _take(self, data: bytes | memoryview) -> None:
        at = self._end
        self._end += len(data)
        self._advance(len(data))
        for cap in self._captures:
            start, length, out = cap
            lo, hi = max(at, start + len(out)), min(at + len(data), start + length)
            if lo < hi:
                out += data[lo - at : hi - at]

    def _read(self, n: int) -> bytes | memoryview:
        """Up to ``n`` bytes, the next in the member, taken from one chunk read whole from the handle.

        The handle is asked for ``CHUNK`` bytes every time, never less: a
        zipfile reader copies its whole unconsumed compressed input on every
        call, so small reads after a big one each cost as much as the big one
        (measured on compressible data: a 4 MiB read then eight of 64 KiB, in
        turn, took 1.6 times one pass of 1 MiB reads). ``read1``: one inflate
        step per call, returned as is; ``read(n)`` would glue pieces together
        (a copy per call) to return exactly n bytes.
        """
        chunk, at = self._pending, self._pending_at
        if at >= len(chunk):
            chunk, at = self._read1(self._chunk), 0
            if not chunk:
                raise RocmBakeError(f"member ends at {self._end:#x}, before its declared size {self.size:#x}")
            self._pending = chunk
            self.reads += 1
        # A view passes bytes over without copying them; a whole chunk is handed out as it is.
        data = chunk if at == 0 and n >= len(chunk) else memoryview(chunk)[at : at + n]
        self._pending_at = at + len(data)
        self._take(data)
        return data

    def _read_bytes(self, n: int) -> bytes:
        data = self._read(n)
        return data if isinstance(data, bytes) else data.tobytes()

    def _append(self, chunk: bytes) -> None:
        """Keep ``chunk`` (just read, at the end) in the buffer and look for section names in it."""
        at = self._end - len(chunk)
        self._find_names(at, chunk)
        keep = self._buf[self._start - self._base :] if self._start < self._base + len(self._buf) else b""
        self._buf = keep + chunk if keep else chunk
        self._base = at - len(keep)

    def _next_fill(self) -> int:
        """Read sizes grow from FIRST_FILL to CHUNK while the bytes are being searched."""
        size, self._fill_size = self._fill_size, min(self._fill_size * 2, self._chunk)
        return size

    def _fill(self, upto: int) -> None:
        while self._end < min(upto, self.size):
            self._append(self._read_bytes(max(self._next_fill(), min(upto - self._end, self._chunk * 4))))

    def _find_names(self, at: int, chunk: bytes) -> None:
        needle, names = FATBIN_SECTION, self.names
        if self._tail and self._tail_end == at:
            joined = self._tail + chunk[: len(needle) - 1]
            i = joined.find(needle)
            if i >= 0:
                names.append((at - len(self._tail) + i, (self._tail + chunk[:_NAME_BYTES])[i : i + _NAME_BYTES]))
        i = chunk.find(needle)
        while i >= 0:
            names.append((at + i, chunk[i : i + _NAME_BYTES]))
            i = chunk.find(needle, i + 1)
        if len(names) > MAX_NAME_HITS:
            raise RocmBakeError(
                f"more than {MAX_NAME_HITS} '.hip_fatbin' strings: refused as corrupt or hostile"
            )
        self._tail, self._tail_end = chunk[-(len(needle) - 1) :], at + len(chunk)

    @property
    def start(self) -> int:
        """Bytes before this offset have been released and cannot be read again."""
        return self._start

    def read_at(self, offset: int, length: int) -> bytes:
        if offset < self._start:
            raise AssertionError(f"backward read at {offset:#x} after release to {self._start:#x}")
        self._fill(offset + length)
        i = offset - self._base
        return self._buf[i : i + length]

    def release(self, offset: int) -> None:
        if offset <= self._start:
            return
        self._start = offset
        if offset < self._base + len(self._buf):
            return
        self._buf, self._tail = b"", b""
        while self._end < min(offset, self.size):
            self._read(min(self._chunk, offset - self._end))
        self._base = self._end
        self._fill_size = min(FIRST_FILL, self._chunk)

    def find(self, pos: int, end: int | None = None) -> Hit | None:
        """The next magic at or after ``pos`` (before ``end``), reading forward."""
        end = self.size if end is None else end
        self.release(pos)
        while True:
            buf, base = self._buf, self._base
            stop = min(len(buf), end - base)
            hit = _first_hit(buf, max(pos - base, 0), stop)
            if hit is not None:
                return Hit(base + hit[0], hit[1])
            if self._end >= min(end, self.size):
                return None
            pos = max(pos, base + len(buf) - _OVERLAP)
            self.release(pos)
            self._append(self._read_bytes(self._next_fill()))

    def capture(self, start: int, length: int) -> bytearray:
        """Copy ``[start, start+length)`` as it streams by (what is buffered now included)."""
        out = bytearray()
        if start < self._end:
            if start < self._base:
                raise AssertionError(f"capture at {start:#x} after bytes up to {self._base:#x} were dropped")
            out += self._buf[start - self._base : start - self._base + length]
        self._captures.append([start, length, out])
        return out

    def finish(self) -> None:
        """Read to the end of the member (the section table is usually the last thing in it)."""
        self.release(self.size)
        if self._pending_at < len(self._pending) or self._handle.read(1):
            raise RocmBakeError(f"member is longer than its declared size {self.size:#x}")


class StoredSource:
    """A stored (uncompressed) member read in place from the wheel file: seek freely."""

    #: Smallest read from the file: a bundle header is parsed from one read.
    BLOCK = 4 << 10

    def __init__(self, handle: IO[bytes], data_start: int, size: int, advance: Advance) -> None:
        self._handle, self._data_start, self.size, self._advance = handle, data_start, size, advance
        self._fd = handle.fileno()
        self._cache, self._cache_at = b"", 0
        self.reads = 0

    @classmethod
    def locate(cls, handle: IO[bytes], header_offset: int, size: int, advance: Advance) -> StoredSource:
        """Find the member's bytes behind its local file header."""
        handle.seek(header_offset)
        local = handle.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise RocmBakeError(f"local file header at {header_offset:#x} is missing (not a valid zip)")
        name_len, extra_len = struct.unpack_from("<HH", local, 26)
        return cls(handle, header_offset + 30 + name_len + extra_len, size, advance)

    def read_at(self, offset: int, length: int) -> bytes:
        if offset < 0 or length <= 0 or offset >= self.size:
            return b""
        end = min(offset + length, self.size)
        i = offset - self._cache_at
        if i >= 0 and end - self._cache_at <= len(self._cache):
            return self._cache[i : end - self._cache_at]
        want = min(max(end - offset, self.BLOCK), self.size - offset)
        data = os.pread(self._fd, want, self._data_start + offset)
        self.reads += 1
        self._advance(len(data))
        self._cache, self._cache_at = data, offset
        return data[: end - offset]

    def release(self, offset: int) -> None:
        """Nothing to drop: a stored member is read in place."""

    def find(self, pos: int, end: int | None = None) -> Hit | None:
        """The next magic in ``[pos, end)``: small reads first (bundles sit a page apart)."""
        end = self.size if end is None else min(end, self.size)
        step = self.BLOCK
        while pos < end:
            # One read holds the padding up to the next page-aligned bundle and
            # that bundle's header too (served from the cache by read_at).
            buf = self.read_at(pos, min(2 * step + _OVERLAP, end - pos))[: step + _OVERLAP]
            if not buf:
                return None
            hit = _first_hit(buf, 0, len(buf))
            if hit is not None:
                return Hit(pos + hit[0], hit[1])
            if pos + len(buf) >= end:
                return None
            pos += len(buf) - _OVERLAP
            step = min(step * 2, CHUNK)
        return None

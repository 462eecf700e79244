"""Inflating a CCOB bundle's data: zlib and zstd behind one face, and only as far as asked.

The scanner needs the inner bundle's header, not the megabytes of code behind
it: :class:`InflatedPrefix` produces the first bytes on demand, and
:meth:`InflatedPrefix.drain` finds a v1 stream's end without keeping its
output.
"""

from __future__ import annotations

import zlib
from typing import Protocol

from rocm_bake.offload.ccob import CCOB_METHODS
from rocm_bake.offload.corrupt import Corrupt, Getter
from rocm_bake.zstd import zstd_if_installed

#: Compressed bytes a CCOB may take before its inner header inflates: zstd
#: emits a block's output only when the whole block (<= 128 KiB) is in.
MAX_CCOB_PREFIX_INPUT = 4 << 20
#: Inflated output is discarded in pieces of this size (v1 end search).
_DRAIN = 1 << 20


class Inflater(Protocol):
    """zlib's and zstd's decompressors behind one face, output capped per call."""

    def feed(self, data: bytes, max_out: int) -> bytes: ...
    def has_output(self) -> bool: ...
    @property
    def eof(self) -> bool: ...
    @property
    def unused(self) -> int: ...


class _ZlibInflater:
    def __init__(self) -> None:
        self._d = zlib.decompressobj()

    def feed(self, data: bytes, max_out: int) -> bytes:
        tail = self._d.unconsumed_tail
        try:
            return self._d.decompress(tail + data if tail else data, max(max_out, 1))
        except zlib.error as exc:
            raise Corrupt(f"compressed data is corrupt ({exc})") from None

    def has_output(self) -> bool:
        return bool(self._d.unconsumed_tail) and not self._d.eof

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused(self) -> int:
        return len(self._d.unused_data)


class _ZstdInflater:
    def __init__(self) -> None:
        zstd = _ZSTD
        self._error = zstd.ZstdError
        self._d = zstd.ZstdDecompressor()

    def feed(self, data: bytes, max_out: int) -> bytes:
        if self._d.eof:
            return b""
        try:
            return self._d.decompress(data, max(max_out, 1))
        except (self._error, EOFError) as exc:
            raise Corrupt(f"compressed data is corrupt ({exc})") from None

    def has_output(self) -> bool:
        return not self._d.needs_input and not self._d.eof

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused(self) -> int:
        return len(self._d.unused_data)


#: Imported with this module (2 ms), not inside the first scan that meets a zstd bundle; the one lookup
#: the registry's zstd layers use too. None only in the ``rocm_torch`` checker's copy on a Python without it.
_ZSTD = zstd_if_installed()


def inflater(method: int) -> Inflater | None:
    """A fresh decompressor for a CCOB method; None for a method rocm-bake does not know (or zstd, where absent)."""
    name = CCOB_METHODS.get(method)
    if name == "zlib":
        return _ZlibInflater()
    if name == "zstd" and _ZSTD is not None:
        return _ZstdInflater()
    return None


class InflatedPrefix:
    """The first bytes a CCOB's data inflates to, produced only as far as they are asked for.

    ``read(offset, length)`` gives compressed bytes from the data start (a
    forward-only reader may keep what it hands out until the caller releases
    it); output beyond what the inner header needs is never produced.
    ``step`` is the compressed bytes per read, doubling up to 256 KiB: a zlib
    header inflates from the first few KB, and a forward reader keeps what it
    hands out.
    """

    __slots__ = ("read", "data_len", "inflater", "out", "fed", "step")

    def __init__(self, read: Getter, data_len: int, inflater: Inflater, step: int = 16 << 10) -> None:
        self.read, self.data_len, self.inflater, self.step = read, data_len, inflater, step
        self.out, self.fed = bytearray(), 0

    def get(self, offset: int, length: int) -> bytes:
        want = offset + length
        if not self.fed:  # first call: one read, one inflate (the common, whole story)
            chunk = self.read(0, min(self.step, self.data_len))
            self.fed = len(chunk)
            self.out += self.inflater.feed(chunk, want)
            if len(self.out) >= want:
                return bytes(self.out[offset:want])
        while len(self.out) < want and not self.inflater.eof:
            if self.inflater.has_output():
                self.out += self.inflater.feed(b"", want - len(self.out))
                continue
            if self.fed >= min(self.data_len, MAX_CCOB_PREFIX_INPUT):
                if self.fed >= self.data_len:
                    break
                raise Corrupt(
                    f"inner bundle header not found in the first {MAX_CCOB_PREFIX_INPUT >> 20} MiB "
                    f"of compressed data (corrupt)"
                )
            chunk = self.read(self.fed, min(self.step, self.data_len - self.fed))
            if not chunk:
                break
            self.step = min(self.step * 2, 256 << 10)
            self.fed += len(chunk)
            self.out += self.inflater.feed(chunk, want - len(self.out))
        return bytes(self.out[offset:want])

    def drain(self) -> int:
        """Inflate (and discard) to the end of the stream; the compressed length consumed."""
        while not self.inflater.eof:
            if self.inflater.has_output():
                self.inflater.feed(b"", _DRAIN)
                continue
            if self.fed >= self.data_len:
                raise Corrupt("compressed data ends before its stream does (truncated)")
            chunk = self.read(self.fed, min(_DRAIN, self.data_len - self.fed))
            if not chunk:
                raise Corrupt("compressed data ends before its stream does (truncated)")
            self.fed += len(chunk)
            self.inflater.feed(chunk, _DRAIN)
        return self.fed - self.inflater.unused

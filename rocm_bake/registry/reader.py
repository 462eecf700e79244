"""A blob stream read as a file, its size and sha256 checked as the bytes arrive."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import httpx

from rocm_bake.errors import RocmBakeError


class VerifyingReader:
    """A read()-able view of a blob stream that checks size and sha256.

    The digest is checked when the stream ends; reading past the declared
    size is refused, so a registry cannot feed an endless stream.
    """

    def __init__(self, chunks: Iterator[bytes], digest: str, size: int, what: str) -> None:
        self.chunks = chunks
        self.expected = digest
        self.size = size
        self.what = what
        self.hash = hashlib.sha256()
        self.seen = 0
        self.buffer = b""
        self.pos = 0
        self.done = False

    def _next(self) -> bytes | None:
        try:
            chunk = next(self.chunks)
        except StopIteration:
            self._finish()
            return None
        except httpx.HTTPError as exc:
            raise RocmBakeError(f"{self.what}: transfer failed after {self.seen} bytes: {exc}") from exc
        self.seen += len(chunk)
        if self.seen > self.size:
            raise RocmBakeError(f"{self.what}: registry sent more than the declared {self.size} bytes")
        self.hash.update(chunk)
        return chunk

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        actual = f"sha256:{self.hash.hexdigest()}"
        if self.seen != self.size:
            raise RocmBakeError(f"{self.what}: got {self.seen} bytes, manifest declares {self.size}")
        if actual != self.expected:
            raise RocmBakeError(f"{self.what}: digest mismatch: manifest says {self.expected}, content is {actual}")

    def read(self, n: int | None = -1) -> bytes:
        parts: list[bytes] = []
        need = -1 if n is None or n < 0 else n
        while need != 0:
            avail = len(self.buffer) - self.pos
            if avail == 0:
                chunk = self._next()
                if chunk is None:
                    break
                self.buffer, self.pos = chunk, 0
                continue
            take = avail if need < 0 else min(avail, need)
            parts.append(self.buffer[self.pos : self.pos + take])
            self.pos += take
            if need > 0:
                need -= take
        return b"".join(parts)

    def drain(self) -> None:
        """Read to the end so the digest is checked (tar stops before EOF padding ends)."""
        self.buffer, self.pos = b"", 0
        while self._next() is not None:
            pass
        self._finish()

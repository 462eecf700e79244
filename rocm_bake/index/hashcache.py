"""A sha256 cache keyed on (path, size, mtime_ns, inode), for warm index rebuilds.

A wheel here is 300–500 MB; re-hashing forty of them to rebuild an index
whose inputs did not change would cost as much as the first build. Any
change to the file — new bytes (size or mtime), or a replaced file (inode,
which is what fetch's temp-dir-then-rename produces) — misses the cache, so
a changed file is always re-hashed. ctime is deliberately not in the key:
hard-linking a wheel into the index bumps its ctime.

The cache also remembers, per entry, the facts derived from the bytes that
are as expensive as hashing (the code-object check for an arch), so they
are invalidated together with the hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ValidationError

SCHEMA_VERSION = 1
CHUNK = 4 << 20


class FileKey(BaseModel):
    path: str
    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> "FileKey":
        st = path.stat()
        return cls(path=os.path.abspath(path), size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino)


class CacheEntry(BaseModel):
    key: FileKey
    sha256: str
    #: Arches this exact file passed ``check_wheel_for_arch`` for.
    arch_ok: list[str] = []
    #: The wheel's METADATA member (base64), already checked against its filename.
    metadata_b64: str | None = None

    @property
    def metadata(self) -> bytes | None:
        return None if self.metadata_b64 is None else base64.b64decode(self.metadata_b64)

    @staticmethod
    def encode(metadata: bytes) -> str:
        return base64.b64encode(metadata).decode()


class _CacheFile(BaseModel):
    schema_version: int = SCHEMA_VERSION
    entries: dict[str, CacheEntry] = {}


def sha256_file(path: Path) -> str:
    """sha256 of a file, read in 4 MiB chunks (hashlib releases the GIL, so threads scale)."""
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := handle.readinto(buf):
            digest.update(view[:n])
    return digest.hexdigest()


class HashCache:
    """Load once, look up/record per file, save atomically. A corrupt cache is just empty."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.hits = 0
        self.misses = 0
        self.dirty = False
        try:
            data = _CacheFile.model_validate_json(path.read_bytes())
            self._entries = data.entries if data.schema_version == SCHEMA_VERSION else {}
        except (OSError, ValidationError, ValueError):
            self._entries = {}

    def lookup(self, key: FileKey) -> CacheEntry | None:
        entry = self._entries.get(key.path)
        if entry is not None and entry.key == key:
            self.hits += 1
            return entry
        self.misses += 1
        return None

    def record(self, entry: CacheEntry) -> None:
        if self._entries.get(entry.key.path) != entry:
            self._entries[entry.key.path] = entry
            self.dirty = True

    def keep_only(self, paths: set[str]) -> None:
        """Forget files no longer in the input, so the cache does not grow forever."""
        kept = {p: e for p, e in self._entries.items() if p in paths}
        if len(kept) != len(self._entries):
            self._entries, self.dirty = kept, True

    def save(self) -> None:
        """Write the cache (only if something changed: a warm run writes nothing)."""
        if not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = _CacheFile(entries=dict(sorted(self._entries.items()))).model_dump_json()
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(json.dumps(json.loads(body), indent=1))
            os.replace(tmp, self.path)
            self.dirty = False
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

"""A sha256 cache keyed on (path, size, mtime_ns, inode), for warm index rebuilds.

A wheel here is 300–500 MB; re-hashing forty of them to rebuild an index
whose inputs did not change would cost as much as the first build. Any
change to the file — new bytes (size or mtime), or a replaced file (inode,
which is what fetch's temp-dir-then-rename produces) — misses the cache, so
a changed file is always re-hashed. ctime is deliberately not in the key:
hard-linking a wheel into the index bumps its ctime.

The cache also remembers, per entry, the facts derived from the bytes that
are as expensive as hashing (the validated METADATA, the device-code
targets), so they are invalidated together with the hash. The schema
version is bumped whenever the rules an entry vouches for grow (version 2:
member paths and METADATA fields are validated), so an entry written under
looser rules is never trusted.

Cold hashing runs at the machine's limit: one thread per core (hashlib
releases the GIL for the whole update), 4 MiB ``readinto`` a reused buffer
(no per-chunk allocation), largest files first so the threads finish
together.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

SCHEMA_VERSION = 2
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
    #: The wheel's METADATA member (base64), validated and checked against its filename.
    metadata_b64: str | None = None
    #: Requires-Python as written in METADATA (None: absent).
    requires_python: str | None = None
    #: The processors its device code targets (``rocm_bake.offload``); None: not scanned.
    device_targets: list[str] | None = None
    #: Some device code could not be read, so ``device_targets`` may be incomplete.
    device_unknown: bool = False
    device_notes: list[str] = []

    @property
    def metadata(self) -> bytes | None:
        return None if self.metadata_b64 is None else base64.b64decode(self.metadata_b64)

    @staticmethod
    def encode(metadata: bytes) -> str:
        return base64.b64encode(metadata).decode()


class _CacheFile(BaseModel):
    schema_version: int = SCHEMA_VERSION
    entries: dict[str, CacheEntry] = {}


def sha256_file(path: Path, advance: Callable[[int], None] | None = None) -> str:
    """sha256 of a file, 4 MiB ``readinto`` a reused buffer; ``advance(n)`` reports progress.

    hashlib releases the GIL during ``update`` on large buffers, so one thread
    per core hashes at the machine's limit.
    """
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        while n := handle.readinto(buf):
            digest.update(view[:n])
            if advance is not None:
                advance(n)
    return digest.hexdigest()


def hash_workers() -> int:
    """Every core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


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

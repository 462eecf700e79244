"""The digests publishing compares: sha256 of each asset (cached across runs) and git blob ids of pages.

GitHub reports an asset's sha256 and a file's git blob id, so comparing
these against local bytes tells what is already there without downloading
anything. Hashing multi-GB wheels on every publish would dominate a no-op
run, so their sha256 is cached by (path, size, mtime, inode).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from rocm_bake import progress
from rocm_bake.archset import ArchSet
from rocm_bake.index.hashcache import CacheEntry, FileKey, HashCache, sha256_file


def git_blob_sha(data: bytes) -> str:
    """The object id git (and so GitHub) gives these bytes as a blob."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def publish_cache_path(dist: Path, arch: ArchSet) -> Path:
    """Beside the index, never in it: the cache holds absolute paths and is not published."""
    return Path(dist) / ".cache" / "rocm-bake" / f"publish-{arch.dir_name}.json"


def hash_files(paths: list[Path], cache: HashCache) -> dict[str, str]:
    """File name -> sha256 of each path, reusing cached digests of unchanged files; the cache keeps only these."""
    out = {}
    for path in paths:
        key = FileKey.of(path)
        hit = cache.lookup(key)
        sha = hit.sha256 if hit is not None else sha256_file(path)
        cache.record(CacheEntry(key=key, sha256=sha))
        out[path.name] = sha
    cache.keep_only({os.path.abspath(p) for p in paths})
    try:
        cache.save()
    except OSError as exc:  # publishing only reads DIST: a read-only one still publishes, just unremembered
        progress.note(f"{cache.path}: hash cache not saved ({exc.strerror or exc}); the next publish hashes again")
    return out

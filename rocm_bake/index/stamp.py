"""The warm path: prove an index is already current from ``stat`` alone, importing nothing heavy.

"A warm ``rocm-bake index build`` over 40 × 50 MB wheels ≤ 5% of the cold
one through the CLI": the cold build hashes gigabytes, the warm one must not
even import pydantic. After every build a stamp is recorded outside the
served tree (``DIST/.cache/rocm-bake/index-<dir>.stamp.json``): the request
(arch spelling, wheels dir, wheel URL, ROCm version), the rocm-bake version,
each input wheel's (size, mtime_ns, inode), the tree the link points at,
and each of that tree's files' (size, mtime_ns, inode, sha256).

A later build whose request, inputs and tree all stat the same is answered
from the stamp. The trust is the hash cache's (a replaced file has a new
inode, rewritten bytes a new mtime), extended to the tree: a page edited in
place, a stray file, a deleted file or a leftover of a killed run all fall
through to the full build, which compares bytes and repairs. Anything the
stamp cannot vouch for is simply not a hit.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from rocm_bake import __version__

FORMAT = 1
GENERATOR = f"rocm-bake {__version__}"


def stamp_path(dist: Path, dir_name: str) -> Path:
    return Path(dist) / ".cache" / "rocm-bake" / f"index-{dir_name}.stamp.json"


def lock_path(dist: Path, dir_name: str) -> Path:
    return Path(dist) / ".cache" / "rocm-bake" / f"index-{dir_name}.lock"


def request(arch: str, wheels_dir: Path, wheel_url: str | None, rocm_version: str,
            index_base: str | None = None) -> dict[str, Any]:
    return {"arch": arch, "wheels_dir": os.path.abspath(wheels_dir), "wheel_url": wheel_url,
            "rocm_version": rocm_version, "index_base": index_base}


def input_listing(wheels_dir: Path) -> dict[str, list[int]] | None:
    """name -> [size, mtime_ns, inode] of every ``*.whl``; None if one is not a regular file."""
    out: dict[str, list[int]] = {}
    try:
        entries = list(os.scandir(wheels_dir))
    except OSError:
        return None
    for entry in entries:
        if not entry.name.endswith(".whl"):
            continue
        try:
            st = os.stat(entry.path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        out[entry.name] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return out


def tree_listing(root: Path) -> dict[str, list[int]] | None:
    """rel -> [size, mtime_ns, inode] of every file under ``root`` (a symlinked root is followed)."""
    out: dict[str, list[int]] = {}
    for dirpath, _dirs, names in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                return None
            if not stat.S_ISREG(st.st_mode):
                return None
            out[name if rel == "." else f"{rel}/{name}"] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return out


def load(dist: Path, dir_name: str) -> dict[str, Any] | None:
    try:
        data = json.loads(stamp_path(dist, dir_name).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("generator") != GENERATOR:
        return None
    return data


def recorded_files(data: dict[str, Any] | None) -> dict[str, tuple[int, int, int, str]]:
    """rel -> (size, mtime_ns, inode, sha256) from a stamp (empty when there is none)."""
    if not data:
        return {}
    try:
        return {rel: (int(v[0]), int(v[1]), int(v[2]), str(v[3])) for rel, v in data["files"].items()}
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return {}


def quick_result(
    dist: Path, dir_name: str, arch: str, wheels_dir: Path, wheel_url: str | None, rocm_version: str,
    index_base: str | None = None,
) -> dict[str, Any] | None:
    """The recorded result when nothing changed since the last build, else None (build for real)."""
    data = load(dist, dir_name)
    if data is None or data.get("request") != request(arch, wheels_dir, wheel_url, rocm_version, index_base):
        return None
    if data.get("inputs") != input_listing(wheels_dir):
        return None
    base = Path(dist) / "index"
    tree = data.get("tree")
    try:
        if os.readlink(base / dir_name) != f".trees/{dir_name}/{tree}":
            return None
        if os.listdir(base / ".trees" / dir_name) != [tree]:
            return None  # a leftover of a killed run: the full build cleans it
        if any(n.startswith(f".link-{dir_name}-") for n in os.listdir(base)):
            return None
    except OSError:
        return None
    listing = tree_listing(base / ".trees" / dir_name / str(tree))
    files = data.get("files") or {}
    if listing is None or listing.keys() != files.keys():
        return None
    if any(listing[rel] != files[rel][:3] for rel in listing):
        return None
    result = dict(data.get("result") or {})
    if not result:
        return None
    result.update(unchanged=True, hashed_bytes=0, files_written=0, files_kept=len(files))
    return result


def record(
    dist: Path, dir_name: str, req: dict[str, Any], inputs: dict[str, list[int]] | None, tree: str,
    shas: dict[str, str], result: dict[str, Any],
) -> None:
    """Write the stamp after a build (atomically); a failure to write only costs the next warm run."""
    root = Path(dist) / "index" / ".trees" / dir_name / tree
    listing = tree_listing(root) or {}
    files = {rel: [*listing[rel], shas[rel]] for rel in listing if rel in shas}
    if inputs is None or files.keys() != listing.keys():
        return
    body = {"format": FORMAT, "generator": GENERATOR, "request": req, "inputs": inputs, "tree": tree,
            "files": files, "result": result}
    import tempfile

    path = stamp_path(dist, dir_name)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as out:
            json.dump(body, out, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def forget(dist: Path, dir_name: str) -> None:
    """Drop the stamp (the index was removed)."""
    stamp_path(dist, dir_name).unlink(missing_ok=True)

"""What an index refuses before anything is written: arguments, wheel filenames, METADATA, device code.

Every problem is found before the first byte of the index is written; several
wheels' problems are reported together, each naming the wheel.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from rocm_bake import offload, progress
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.hashcache import CacheEntry, FileKey, HashCache, sha256_file
from rocm_bake.index.versions import WheelName, check_version, parse_name
from rocm_bake.index.wheelfile import check_record, parse_core_metadata, read_metadata_bytes


def check_wheel_url(url: str | None) -> str | None:
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise RocmBakeError(
            f"--wheel-url {url!r}: expected an http(s) URL prefix with no query or fragment "
            f"(e.g. https://github.com/OWNER/REPO/releases/download/TAG)"
        )
    return url.rstrip("/")


def check_index_base(base: str | None) -> str | None:
    """``--index-base``: the rule ``which-index`` applies (https, file://, or plain http on loopback only)."""
    if base is None:
        return None
    from rocm_bake.gpu.which import check_index_base as checked

    return checked(base)


def check_dist(dist: Path) -> Path:
    """DIST must be a directory (or not exist yet): ``--out`` naming a file is refused up front."""
    for path in (Path(dist), Path(dist) / "index"):
        if path.exists() and not path.is_dir():
            raise RocmBakeError(f"--out {dist}: {path} exists and is not a directory")
    return Path(dist)


def list_wheels(wheels_dir: Path, arch: ArchSet) -> list[Path]:
    """The ``*.whl`` files in ``wheels_dir`` (fetch's manifest and other files are not wheels)."""
    if not wheels_dir.is_dir():
        from rocm_bake.path_kind import path_kind

        kind = path_kind(wheels_dir)
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}) " + (
            f"is {kind}, not a directory (--wheels names the directory that holds the wheels)" if kind
            else "does not exist"))
    try:
        wheels = sorted(p for p in wheels_dir.iterdir() if p.name.endswith(".whl"))
    except OSError as exc:
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}): {exc.strerror or exc}") from None
    for p in wheels:
        if not p.is_file():
            raise RocmBakeError(f"{p.name} (index {arch}): rule regular-file: not a regular file")
    if not wheels:
        raise RocmBakeError(f"wheels directory {wheels_dir} (index {arch}) holds no .whl files")
    return wheels


def validate_names(paths: list[Path], arch: ArchSet, rocm_version: str) -> list[WheelName]:
    """Every filename rule, all wheels at once; one error listing every violation."""
    problems: list[str] = []
    names: list[WheelName] = []
    for path in paths:
        try:
            name = parse_name(path.name, arch)
            check_version(name, arch, rocm_version)
            names.append(name)
        except RocmBakeError as exc:
            problems.append(str(exc))
    by_project: dict[str, list[WheelName]] = {}
    for name in names:
        by_project.setdefault(name.project, []).append(name)
    for project, group in sorted(by_project.items()):
        versions = sorted({str(n.version) for n in group})
        if len(versions) > 1:
            files = ", ".join(n.filename for n in group)
            problems.append(
                f"{files} (index {arch}): rule one-version-per-project: {project} appears as "
                f"{', '.join(versions)}; the metapackage pins one version with =="
            )
    if problems:
        raise _combined(problems, arch)
    return names


def _combined(problems: list[str], arch: ArchSet) -> RocmBakeError:
    if len(problems) == 1:
        return RocmBakeError(problems[0])
    return RocmBakeError(
        f"{len(problems)} wheels refused for the {arch} index (nothing written):\n  "
        + "\n  ".join(problems)
    )


def read_metadata(path: Path, name: WheelName, arch: ArchSet) -> tuple[bytes, str | None]:
    """The wheel's validated METADATA bytes (served verbatim, PEP 658) and its Requires-Python.

    Member paths, the size cap and the fields a resolver needs are checked
    by ``rocm_bake.index.wheelfile``; here the metadata must also name the
    same project and version as the filename.
    """
    where = f"{path.name} (index {arch})"
    meta = parse_core_metadata(read_metadata_bytes(path, where), where)
    from packaging.utils import canonicalize_name

    if canonicalize_name(meta.name) != name.project or meta.version != name.version:
        raise RocmBakeError(
            f"{where}: rule metadata-matches-filename: METADATA says {meta.name} {meta.version}, "
            f"the filename says {name.project} {name.version}"
        )
    return meta.raw, meta.requires_python


def check_device_code(entry: CacheEntry, target: ArchSet, wheel: str) -> None:
    """Refuse device code that does not cover every arch of ``target``.

    Wheels fetched by the wrong tag (``:latest``, written by whichever arch
    pushed last) look exactly like the right ones afterwards, so the device
    code itself must be for this index. A single
    arch needs code that loads on it; a fat index needs code for *every*
    arch of the build (a torch with only gfx950 code objects would install
    on a gfx950+gfx1201 host and fail on the second GPU). Pure-Python and
    host-only wheels pass; unreadable device code is refused (an unknown
    is exactly how a wrong-arch asset would pass).
    """
    targets = entry.device_targets or []
    if entry.device_unknown:
        raise RocmBakeError(
            f"{wheel}: cannot verify it is for {target}: "
            + "; ".join(n for n in entry.device_notes if "unknown" in n or "cannot" in n)
            + " (refused: an unverifiable asset could be another arch's)"
        )
    if not targets:
        return
    missing = [a for a in target.arches if not any(offload.covers(t, a) for t in targets)]
    if not missing:
        return
    if not target.is_fat:
        raise RocmBakeError(
            f"{wheel}: device code is for {', '.join(targets)}, not {target}: "
            f"refused for the {target} index (a wheel fetched by a tag another arch pushed, "
            f"e.g. :latest, looks exactly like this)"
        )
    raise RocmBakeError(
        f"{wheel} (index {target}): rule covers-every-arch: device code is for {', '.join(targets)}, "
        f"missing {', '.join(missing)}: a fat index serves one install to every GPU of the host, so each "
        f"device-code wheel must carry code objects for every arch of the build ({target})"
    )


def _inspect(path: Path, name: WheelName, target: ArchSet, key: FileKey,
             prior: CacheEntry | None) -> tuple[CacheEntry, int]:
    """Everything derived from a wheel's bytes: metadata, sha256, device code.

    Returns the cache entry and the bytes hashed (0 when the sha256 was cached).
    """
    metadata, requires_python = read_metadata(path, name, target)
    if prior is not None:
        sha, hashed = prior.sha256, 0
    else:
        with progress.track(f"hash {path.name}", key.size) as advance:
            sha, hashed = sha256_file(path, advance), key.size
    check_record(path, f"{path.name} (index {target})")  # once per file (the cache entry then vouches)
    report = offload.wheel_targets(path)
    if FileKey.of(path) != key:
        raise RocmBakeError(f"{path.name} (index {target}): rule stable-input: changed while being read")
    entry = CacheEntry(
        key=key, sha256=sha, metadata_b64=CacheEntry.encode(metadata), requires_python=requires_python,
        device_targets=report.targets, device_unknown=report.compressed_unknown, device_notes=report.notes,
    )
    check_device_code(entry, target, path.name)
    return entry, hashed


def _complete(entry: CacheEntry | None) -> bool:
    return entry is not None and entry.metadata_b64 is not None and entry.device_targets is not None


def inspect_wheels(
    paths: list[Path], names: list[WheelName], target: ArchSet, cache: HashCache, workers: int
) -> tuple[list[CacheEntry], int]:
    """Cached entries for unchanged files; the rest inspected in threads, largest first."""
    keys = [FileKey.of(p) for p in paths]
    entries: list[CacheEntry | None] = []
    todo: list[int] = []
    problems: list[str] = []
    for i, key in enumerate(keys):
        hit = cache.lookup(key)
        if hit is not None and _complete(hit):
            try:
                check_device_code(hit, target, paths[i].name)
            except RocmBakeError as exc:
                problems.append(str(exc))
            entries.append(hit)
        else:
            entries.append(None)
            todo.append(i)
    todo.sort(key=lambda i: -keys[i].size)  # the threads finish together
    hashed = 0
    if todo:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
            futures = {
                i: pool.submit(_inspect, paths[i], names[i], target, keys[i], cache.lookup(keys[i]))
                for i in todo
            }
            for i, future in sorted(futures.items()):
                try:
                    entries[i], nbytes = future.result()
                    hashed += nbytes
                except RocmBakeError as exc:
                    problems.append(str(exc))
    if problems:
        raise _combined(problems, target)
    done = [e for e in entries if e is not None]
    for entry in done:
        cache.record(entry)
    cache.keep_only({e.key.path for e in done})
    try:
        cache.save()
    except OSError as exc:
        raise RocmBakeError(f"cannot write the hash cache {cache.path}: {exc.strerror or exc}") from None
    return done, hashed

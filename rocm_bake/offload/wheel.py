"""Which GPUs a wheel's device code is for, read in place from its members.

A downloaded asset does not say which GPU it is for: a torch wheel's
filename is the same for gfx950 and gfx1201, and the two files differ only
in their device code. So the only trustworthy answer is inside the
binaries. Each ELF member is read in place (never extracted to disk): a
compressed one once, front to back (``ZipExtFile.seek`` backwards restarts
inflation, so seeking about would make the scan quadratic); a stored one by seeking in the
wheel file. Targets are reported as bare processors (``gfx90a`` for
``gfx90a:xnack+``); the target-id features are kept in ``notes``.
"""

from __future__ import annotations

import contextlib
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from rocm_bake import progress
from rocm_bake.archset import Arch
from rocm_bake.errors import RocmBakeError
from rocm_bake.offload.formats import ELF_MAGIC
from rocm_bake.offload.models import CodeObjectSource, WheelTargets
from rocm_bake.offload.scan import Source, Where, scan_stored, scan_stream
from rocm_bake.offload.source import ForwardSource, StoredSource
from rocm_bake.offload.targets import DEVICE_KINDS, covers

#: Members at least this big show progress while scanned (a 1 GB libtorch_hip.so takes seconds).
PROGRESS_MIN_BYTES = 32 << 20


def _open_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    """The member's inflating reader (a seam: tests wrap it to count reads and seeks)."""
    return archive.open(info)


@contextlib.contextmanager
def _progress(wheel: str, info: zipfile.ZipInfo) -> Iterator[progress.Advance]:
    if info.file_size < PROGRESS_MIN_BYTES:
        yield lambda _n: None
        return
    with progress.track(f"scan {wheel}: {info.filename}", info.file_size) as advance:
        yield advance


def _is_stored(info: zipfile.ZipInfo) -> bool:
    return info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1


def _member_sources(
    path: Path, archive: zipfile.ZipFile, raw: IO[bytes], info: zipfile.ZipInfo
) -> list[Source] | None:
    """Device code in one member; None when the member is not ELF."""
    where = Where(path.name, info.filename)
    if _is_stored(info):
        probe = StoredSource.locate(raw, info.header_offset, info.file_size, lambda _n: None)
        if probe.read_at(0, 4) != ELF_MAGIC:
            return None
        with _progress(path.name, info) as advance:
            src = StoredSource.locate(raw, info.header_offset, info.file_size, advance)
            return scan_stored(src, where)
    with contextlib.ExitStack() as again:
        def reopen() -> ForwardSource:
            """A fresh forward pass over the member (bundle-like data can hide a section from the first)."""
            fresh = again.enter_context(_open_member(archive, info))
            return ForwardSource(fresh, info.file_size, b"", lambda _n: None)

        with _open_member(archive, info) as handle:
            head = handle.read(4)
            if head != ELF_MAGIC:
                return None
            with _progress(path.name, info) as advance:
                advance(len(head))
                return scan_stream(ForwardSource(handle, info.file_size, head, advance), where, reopen)


def wheel_targets(path: Path) -> WheelTargets:
    """Report the gfx targets in ``path``'s device code, reading it in place."""
    path = Path(path)
    if not path.is_file():
        from rocm_bake.path_kind import path_kind

        kind = path_kind(path)
        raise RocmBakeError(f"{path}: is {kind}, not a wheel file" if kind else f"{path}: wheel not found")
    sources: list[Source] = []
    elf_members = 0
    with open(path, "rb") as raw:
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise RocmBakeError(f"{path.name}: not a wheel (not a zip archive: {exc})") from None
        with archive:
            for info in archive.infolist():
                if info.is_dir() or info.file_size < 4:
                    continue
                try:
                    found = _member_sources(path, archive, raw, info)
                except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError) as exc:
                    raise RocmBakeError(f"{path.name}: {info.filename}: cannot read member ({exc})") from None
                except RocmBakeError as exc:
                    if str(exc).startswith(path.name):
                        raise
                    raise RocmBakeError(f"{path.name}: {info.filename}: {exc}") from None
                if found is None:
                    continue
                elf_members += 1
                sources.extend(found)
    return _summarise(path.name, sources, elf_members)


def _summarise(wheel: str, sources: list[Source], elf_members: int) -> WheelTargets:
    notes: list[str] = []
    unreadable: list[str] = []
    for s in sources:
        where = f"{s['member']}" + (f" {s['section']}" if s["section"] else "")
        for e in s.get("entries", ()):
            if e["features"] and e["processor"] and e["kind"] in DEVICE_KINDS:
                notes.append(f"{where}: {e['processor']} with features {':'.join(e['features'])}")
        if not s["readable"]:
            unreadable.append(f"{where}: {s['note'] or 'targets unknown'}")
    return WheelTargets(
        wheel=wheel,
        targets=sorted({t for s in sources for t in s["targets"]}),
        pure=elf_members == 0,
        device_code=bool(sources),
        unknown=bool(unreadable),
        unreadable=sorted(set(unreadable)),
        notes=sorted(set(notes + unreadable)),
        sources=[CodeObjectSource.from_scan(s) for s in sources],
    )


def check_wheel_for_arch(path: Path, arch: Arch, allow_unknown: bool = False) -> WheelTargets:
    """Refuse a wheel whose device code is not for ``arch``; return its report.

    This is the failure the ``:latest`` tag causes: "written by whichever
    architecture was pushed last, with the wheels inside indistinguishable
    afterwards". Pure-Python and host-only wheels pass. A fat build that
    includes ``arch`` passes. Device code that cannot be read (a compression
    method or target rocm-bake does not know, a section without a bundle) is
    refused unless ``allow_unknown``: a wrong-arch asset must not pass
    silently, and "unknown" is exactly how one would.
    """
    report = wheel_targets(path)
    if report.unknown and not allow_unknown:
        raise RocmBakeError(
            f"{report.wheel}: cannot verify it is for {arch}: " + "; ".join(report.unreadable)
            + " (refused: an unverifiable asset could be another arch's; pass --allow-unknown to accept it)"
        )
    if report.targets and not any(covers(t, arch) for t in report.targets):
        raise RocmBakeError(
            f"{report.wheel}: device code is for {', '.join(report.targets)}, not {arch}: "
            f"refused for the {arch} index (a wheel fetched by a tag another arch pushed, "
            f"e.g. :latest, looks exactly like this)"
        )
    return report

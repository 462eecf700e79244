"""``rocm-bake index build|check``: one arch's (or one fat build's) pip index, and a real install check.

Only argparse, ``archset`` and the free ``defaults`` module are imported here: every
command module is imported at start-up, and a warm ``index build`` is
answered from its stamp (``rocm_bake.index.stamp``) without importing
pydantic or packaging at all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocm_bake.archset import ArchSet
from rocm_bake.cli import arch_argument
from rocm_bake.index.defaults import DEFAULT_ROCM_VERSION, INSTALLERS, PYPI


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("index", help="per-arch pip index (PEP 503/658) with rocm-torch")
    sub = parser.add_subparsers(dest="index_command", required=True)

    build = sub.add_parser("build", help="write DIST/index/<arch>/ from one arch's (or one fat build's) wheels")
    build.add_argument("--arch", required=True, type=arch_argument(ArchSet),
                       help="the index's architecture, e.g. gfx950, or a fat build in the PYTORCH_ROCM_ARCH "
                            "spelling, e.g. 'gfx950;gfx1201' (served from DIST/index/gfx950-gfx1201/)")
    build.add_argument("--wheels", required=True, type=Path, help="that arch's wheels (DIST/wheels/<arch>/)")
    build.add_argument("--out", required=True, type=Path, help="DIST: the index goes to DIST/index/<arch>/")
    build.add_argument("--wheel-url", default=None,
                       help="href prefix for offsite wheels (e.g. a GitHub release download URL)")
    build.add_argument("--rocm-version", default=DEFAULT_ROCM_VERSION,
                       help=f"ROCm version the wheels' versions must carry (default {DEFAULT_ROCM_VERSION})")
    build.add_argument("--index-base", default=None,
                       help="where the indexes are served (BASE/<arch>/), recorded in rocm-torch so that "
                            "python -m rocm_torch prints real install lines (default: not recorded)")
    build.add_argument("--json", action="store_true", help="print the result as JSON (no progress on stderr)")
    build.add_argument("--quiet", action="store_true", help="no progress on stderr")
    build.set_defaults(func=run_build)

    check = sub.add_parser("check", help="install each arch's index with pip and uv into throwaway venvs")
    check.add_argument("dist", type=Path, help="DIST holding index/<arch>/")
    check.add_argument("--arch", action="append", default=None, dest="arches", type=arch_argument(ArchSet),
                       help="arch to check, e.g. gfx950 or 'gfx950;gfx1201' (repeatable; "
                            "default: every index under DIST/index/)")
    check.add_argument("--installer", action="append", choices=INSTALLERS, default=None, dest="installers",
                       help="pip or uv (repeatable; default both)")
    check.add_argument("--extra-index-url", default=PYPI,
                       help=f"extra index for ordinary dependencies such as numpy (default {PYPI})")
    check.add_argument("--no-extra-index", action="store_true",
                       help="no extra index: every dependency must come from the arch's index")
    check.add_argument("--python", default=None,
                       help="interpreter for the venvs (the wheels' cpXY tags must match; default this one)")
    check.add_argument("--json", action="store_true", help="print the report as JSON (no progress on stderr)")
    check.add_argument("--quiet", action="store_true", help="no progress on stderr")
    check.set_defaults(func=run_check)

    register_page(sub)
    register_lines(sub)


def register_lines(sub: argparse._SubParsersAction) -> None:
    lines = sub.add_parser("lines", help="print the install lines of DIST/index/<arch>/ (hash-locked, pinned pip, uv)")
    lines.add_argument("dist", type=Path, help="DIST holding index/<arch>/")
    lines.add_argument("--arch", required=True, type=arch_argument(ArchSet), help="the index's arch, e.g. gfx950")
    lines.add_argument("--base", default=None,
                       help="where DIST/index is served, e.g. http://127.0.0.1:8081/index "
                            "(default: DIST/index as a file:// URL)")
    lines.set_defaults(func=run_lines)


def local_base(dist: Path) -> str:
    """``DIST/index`` as a ``file://`` URL: the base of the lines for an index on this host."""
    return (Path(dist) / "index").resolve().as_uri()


def index_lines(dist: Path, dir_name: str, base: str | None = None) -> list[str]:
    """The install lines of ``DIST/index/<dir_name>/`` served at ``base``, each indented, then the check hint.

    The version and the lock are read from the index on disk, so a line is
    never printed unpinned nor pointing at a lock that is not there.
    """
    from rocm_bake.install_line import lines_for, local_index_facts, with_hint

    version, locked = local_index_facts(Path(dist) / "index" / dir_name)
    found = lines_for(base or local_base(dist), dir_name, version, locked)
    out = [f"  {line}" for line in with_hint(found)]
    if found and not locked:
        out.append("  (no hash lock beside this index: `rocm-bake index build` could not resolve it)")
    return out


def run_lines(args: argparse.Namespace) -> int:
    from rocm_bake.errors import RocmBakeError

    arch: ArchSet = args.arch
    lines = index_lines(args.dist, arch.dir_name, args.base)
    if not lines:
        raise RocmBakeError(f"{args.dist}/index/{arch.dir_name}: no index with a rocm-torch metapackage here; "
                            f"run `rocm-bake index build` first")
    print("\n".join(lines))
    return 0


def register_page(sub: argparse._SubParsersAction) -> None:
    page = sub.add_parser("page", help="write the landing page (every index, with its install lines) from DIST/index/*")
    page.add_argument("dist", type=Path, nargs="?", default=Path("dist"), help="DIST holding index/<arch>/ (default dist)")
    page.add_argument("--out", required=True, type=Path, help="directory to write index.html into")
    page.add_argument("--base-url", default=None,
                      help="where the indexes are served, e.g. http://HOST:8081/index when DIST is served by "
                           "python3 -m http.server 8081 --directory DIST (default: DIST/index as a file:// URL)")
    page.add_argument("--rocm-version", default=DEFAULT_ROCM_VERSION, help="ROCm version shown for each index")
    page.set_defaults(func=run_page)


def run_page(args: argparse.Namespace) -> int:
    from rocm_bake.publish.landing import write_local_page

    base_url = args.base_url or local_base(args.dist)  # local lines for a local page
    listed = write_local_page(args.dist, args.out, base_url, args.rocm_version)
    print(f"{args.out / 'index.html'}: {len(listed)} index(es): {', '.join(listed)}")
    return 0


def subcommands(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The ``index`` command's own subparsers, for sibling modules adding ``index <name>``.

    Command modules register in name order, so ``commands/index_<x>.py`` runs
    after this one and can call ``subcommands(subparsers).add_parser(...)``.
    """
    parser = subparsers.choices["index"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise LookupError("the index command has no subcommands")  # pragma: no cover - register() adds them


@contextlib.contextmanager
def _quiet(args: argparse.Namespace) -> Iterator[None]:
    """``--json``/``--quiet`` silence progress for this command (restored after: tests call main() often)."""
    from rocm_bake import progress

    before = progress.is_quiet()
    progress.set_quiet(before or args.json or args.quiet)
    try:
        yield
    finally:
        progress.set_quiet(before)


def _print_build(result: dict[str, Any], as_json: bool, dist: Path) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['index_dir']}: {result['wheel_count']} wheels (metapackage {result['metapackage']})"
          + (" — unchanged" if result.get("unchanged") else f" — {result.get('files_written', 0)} file(s) written"))
    print(f"index_sha256 {result['index_sha256']}")
    if result.get("exposed"):
        print(f"exposed pins (no local version segment: a public index could serve the same version; only the "
              f"hash lock refuses another file): {', '.join(result['exposed'])}")
    if result.get("lock_missing"):
        print(f"lock: missing (no requirements.txt beside the index, no hash-locked line): {result['lock_missing']}")
    print("install (from this host; served elsewhere, `rocm-bake index lines --base URL` gives that base's):")
    print("\n".join(index_lines(dist, result["dir_name"])))


def run_build(args: argparse.Namespace) -> int:
    from rocm_bake.index import stamp

    # The warm path: nothing changed since the last build, proven from stat alone.
    arch: ArchSet = args.arch
    if args.index_base:  # as the build records it, so the warm path compares like with like
        args.index_base = args.index_base.rstrip("/") or args.index_base
    hit = stamp.quick_result(args.out, arch.dir_name, arch.spelling, args.wheels, args.wheel_url, args.rocm_version,
                             args.index_base)
    if hit is None or "lock" not in hit:  # built before indexes had locks: built again, with its lock
        from rocm_bake.index import build_index

        with _quiet(args):
            hit = build_index(arch, args.wheels, args.out, wheel_url=args.wheel_url, rocm_version=args.rocm_version,
                              index_base=args.index_base).model_dump(mode="json")
    _print_build(hit, args.json, args.out)
    return 0


def run_check(args: argparse.Namespace) -> int:
    from rocm_bake.index import check_index

    with _quiet(args):
        report = check_index(
            args.dist,
            args.arches,
            installers=tuple(args.installers or INSTALLERS),
            extra_index_url=None if args.no_extra_index else args.extra_index_url,
            python=args.python,
        )
    if args.json:
        print(json.dumps(report.model_dump(), indent=2))
    else:
        print(report.text())
    return 0 if report.ok else 1

"""``rocm-bake wheel arches|check WHEEL…``: which GPUs a wheel's device code is for.

"A downloaded asset does not say which GPU it is for": its filename is the
same for every arch, so this reads the offload bundles inside instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rocm_bake.archset import Arch
from rocm_bake.cli import arch_argument
from rocm_bake.errors import RocmBakeError

if TYPE_CHECKING:
    from rocm_bake.offload import WheelTargets


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("wheel", help="inspect wheels' GPU code objects")
    sub = parser.add_subparsers(dest="wheel_command", required=True)
    arches = sub.add_parser("arches", help="list the gfx targets each wheel's device code carries")
    arches.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    arches.add_argument(
        "--json", action="store_true",
        help='one {"wheel","targets","pure","unknown","unreadable"} object per wheel (no progress lines)',
    )
    arches.set_defaults(func=run_arches)
    check = sub.add_parser("check", help="refuse wheels whose device code is not for --arch")
    check.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    check.add_argument("--arch", required=True, type=arch_argument(Arch), help="the index's arch, e.g. gfx950")
    check.add_argument(
        "--allow-unknown", action="store_true",
        help="accept device code that cannot be read here (an unknown compression method or target)",
    )
    check.set_defaults(func=run_check)


def _unknown_kinds(report: WheelTargets) -> str:
    """Why some device code is unknown, by kind: compressed only when it *is* a compressed bundle."""
    kinds = []
    for source in report.sources:
        if source.readable:
            continue
        if source.kind == "compressed-bundle" and not any(e.foreign for e in source.entries):
            kinds.append("compressed, targets unknown")
        elif any(e.foreign for e in source.entries):
            kinds.append("unknown (non-AMDGPU) targets")
        else:
            kinds.append("unreadable device code")
    return ", ".join(dict.fromkeys(kinds))


def describe(report: WheelTargets) -> str:
    """One human line per wheel."""
    if report.pure:
        what = "pure Python (no native code)"
    elif not report.device_code:
        what = "native, no GPU code objects"
    else:
        what = ", ".join(report.targets) if report.targets else "(no readable targets)"
        if report.unknown:
            what += f" + {_unknown_kinds(report)}"
    return f"{report.wheel}: {what}"


@contextlib.contextmanager
def _quiet(quiet: bool) -> Iterator[None]:
    """``--json`` silences progress for this command (restored after: tests call main() often)."""
    from rocm_bake import progress

    before = progress.is_quiet()
    progress.set_quiet(before or quiet)
    try:
        yield
    finally:
        progress.set_quiet(before)


def run_arches(args: argparse.Namespace) -> int:
    from rocm_bake.offload import wheel_targets

    with _quiet(args.json):
        reports = [wheel_targets(path) for path in args.wheels]
    if args.json:
        print(json.dumps([r.summary() for r in reports], indent=2))
        return 0
    for report in reports:
        print(describe(report))
        for note in report.notes:
            print(f"  note: {note}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    """Check every wheel, then fail naming all refused ones (not just the first)."""
    from rocm_bake.offload import check_wheel_for_arch

    problems: list[str] = []
    for path in args.wheels:
        try:
            report = check_wheel_for_arch(path, args.arch, allow_unknown=args.allow_unknown)
        except RocmBakeError as exc:
            problems.append(str(exc))
            continue
        print(f"ok {args.arch}: {describe(report)}")
    if problems:
        raise RocmBakeError(f"{len(problems)} wheel(s) refused for {args.arch}: " + " | ".join(problems))
    return 0

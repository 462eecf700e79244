"""``rocm-bake index build|check``: one arch's pip index, and a real install check of it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rocm_bake.index import build_index
from rocm_bake.index import INSTALLERS, PYPI, check_index
from rocm_bake.index import DEFAULT_ROCM_VERSION


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("index", help="per-arch pip index (PEP 503/658) with rocm-torch")
    sub = parser.add_subparsers(dest="index_command", required=True)

    build = sub.add_parser("build", help="write DIST/index/<arch>/ from one arch's wheels")
    build.add_argument("--arch", required=True, help="the index's architecture, e.g. gfx950")
    build.add_argument("--wheels", required=True, type=Path, help="that arch's wheels (DIST/wheels/<arch>/)")
    build.add_argument("--out", required=True, type=Path, help="DIST: the index goes to DIST/index/<arch>/")
    build.add_argument("--wheel-url", default=None,
                       help="href prefix for offsite wheels (e.g. a GitHub release download URL)")
    build.add_argument("--rocm-version", default=DEFAULT_ROCM_VERSION,
                       help=f"ROCm version the wheels' versions must carry (default {DEFAULT_ROCM_VERSION})")
    build.add_argument("--json", action="store_true", help="print the result as JSON")
    build.set_defaults(func=run_build)

    check = sub.add_parser("check", help="install each arch's index with pip and uv into throwaway venvs")
    check.add_argument("dist", type=Path, help="DIST holding index/<arch>/")
    check.add_argument("--arch", action="append", default=None, dest="arches",
                       help="arch to check (repeatable; default: every index under DIST/index/)")
    check.add_argument("--installer", action="append", choices=INSTALLERS, default=None, dest="installers",
                       help="pip or uv (repeatable; default both)")
    check.add_argument("--extra-index-url", default=PYPI,
                       help=f"extra index for ordinary dependencies such as numpy (default {PYPI})")
    check.add_argument("--no-extra-index", action="store_true",
                       help="no extra index: every dependency must come from the arch's index")
    check.add_argument("--python", default=None,
                       help="interpreter for the venvs (the wheels' cpXY tags must match; default this one)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(func=run_check)


def run_build(args: argparse.Namespace) -> int:
    result = build_index(args.arch, args.wheels, args.out, wheel_url=args.wheel_url,
                         rocm_version=args.rocm_version)
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print(f"{result.index_dir}: {result.wheel_count} wheels (metapackage {result.metapackage})")
    print(f"index_sha256 {result.index_sha256}")
    print(f'install: pip install --index-url <base>/index/{result.arch}/ '
          f'--extra-index-url {PYPI} "rocm-torch[device-{result.arch}]"')
    return 0


def run_check(args: argparse.Namespace) -> int:
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

"""``rocm-bake wheels fetch``: one arch's wheels out of its images, by arch tag.

Wheels are fetched by architecture-specific tag, never :latest — written by
whichever architecture was pushed last, with the wheels inside
indistinguishable afterwards.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rocm_bake.archset import ArchSet
from rocm_bake.cli import arch_argument
from rocm_bake.http_waits import positive_seconds

if TYPE_CHECKING:  # the registry client (httpx, pydantic) loads when a fetch runs, not for --help
    from rocm_bake.registry import FetchResult


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("wheels", help="per-arch wheel artifacts")
    sub = parser.add_subparsers(dest="wheels_command", required=True)
    fetch = sub.add_parser(
        "fetch",
        help="extract an arch's wheels from its registry images into DIST/wheels/<arch>/",
        description="One arch's wheels out of its images, by arch tag (never :latest).",
    )
    fetch.add_argument("--arch", required=True, type=arch_argument(ArchSet),
                       help="architecture, e.g. gfx950, or a fat build's 'gfx950;gfx1201'")
    fetch.add_argument(
        "--image", dest="images", action="append", required=True, metavar="REF",
        help="registry/repo:<arch>-rocm<version> or registry/repo@sha256:…; repeat for several images",
    )
    fetch.add_argument("--out", type=Path, required=True, metavar="DIST", help="dist dir (wheels go to DIST/wheels/<arch>/)")
    fetch.add_argument("--wheel-dir", default=None, help="in-image wheel directory (default /wheels/)")
    fetch.add_argument("--all-layers", action="store_true", help="fetch every layer, ignoring the config history")
    fetch.add_argument("--timeout", type=positive_seconds, default=60.0, metavar="SECONDS",
                       help="a registry that sends nothing for this long (metadata calls: at most 20 s) is "
                            "tried once more, then the fetch fails (default 60)")
    fetch.add_argument("--quiet", action="store_true", help="no progress or retry lines on stderr")
    fetch.add_argument("--json", action="store_true", help="print the result as JSON")
    fetch.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rocm_bake import progress
    from rocm_bake.registry import DEFAULT_WHEEL_DIR, fetch_wheels

    before = progress.is_quiet()  # restored after: tests call main() many times in one process
    progress.set_quiet(before or args.quiet or args.json)
    try:
        result = fetch_wheels(
            args.arch, args.images, args.out, wheel_dir=args.wheel_dir or DEFAULT_WHEEL_DIR,
            all_layers=args.all_layers, timeout_s=args.timeout,
        )
    finally:
        progress.set_quiet(before)
    if args.json:
        print(json.dumps(result.model_dump(), indent=2))
        return 0
    print_summary(result)
    return 0


def print_summary(result: FetchResult) -> None:
    state = "unchanged (every image digest already extracted)" if result.skipped else "updated"
    print(f"{result.arch}: {result.wheels_dir} {state}")
    for image in result.images:
        how = "skipped (digest already extracted)" if image.skipped else (
            f"fetched {image.bytes_fetched} bytes, {image.layers_fetched} layer(s), "
            f"{image.layers_skipped} skipped by history"
        )
        print(f"  {image.ref}  {image.manifest_digest[:19]}…  {len(image.wheels)} wheel(s), {how}")
    for wheel in result.wheels:
        print(f"    {wheel.name}  sha256={wheel.sha256}  {wheel.size} bytes")
    print(f"  {result.bytes_fetched} bytes fetched for {result.wheel_bytes} bytes of wheels")

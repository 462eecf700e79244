"""``rocm-bake gpu-test --arch ARCH``: run the built image's test on a fleet node with the card."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu_test import run_gpu_test
from rocm_bake.manifests import load_fleet, load_targets


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gpu-test", help="run an arch's image test over SSH on a node that has the card",
        description="Exit status: the test's own; 3 when no fleet node has the arch (not covered); 2 for bad input.",
    )
    parser.add_argument("--arch", required=True)
    parser.add_argument("--host", default=None, help="fleet node to use (default: $GPU_HOST, else gpu_node)")
    parser.add_argument("--image", default=None, help="image pinned by digest: repo:tag@sha256:…")
    parser.add_argument("--target", default="torch", help="target whose gpu_test command runs (default torch)")
    parser.add_argument("--test", default=None, help="override the target's test command")
    parser.add_argument("--lock-timeout", type=int, default=3600, help="seconds to wait for a busy node")
    parser.add_argument("--fleet", type=Path, default=None, help="fleet manifest (default manifests/fleet.yml)")
    parser.add_argument("--known-hosts", type=Path, default=None, help="known_hosts file (default ssh's own)")
    parser.add_argument("--identity", type=Path, default=None, help="ssh private key")
    parser.add_argument("--json", action="store_true", help="print the result as JSON at the end")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    fleet = load_fleet(args.fleet)
    test = args.test or load_targets().target(args.target).gpu_test
    if not test:
        raise RocmBakeError(f"target {args.target} has no gpu_test command in manifests/targets.yml")
    result = run_gpu_test(
        fleet, args.arch, args.image, test,
        host=args.host or os.environ.get("GPU_HOST"), lock_timeout=args.lock_timeout,
        known_hosts=args.known_hosts, identity=args.identity,
    )
    print(("" if result.covered else "rocm-bake: ") + result.message, file=sys.stderr if result.covered else sys.stdout)
    if args.json:
        print(json.dumps(result.model_dump()))
    return result.status

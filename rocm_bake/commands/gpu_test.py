"""``rocm-bake gpu-test --arch ARCH``: run the built image's test on a fleet node with the card."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from rocm_bake.archset import Arch
from rocm_bake.cli import arch_argument
from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu import LOCK_TIMEOUT_STATUS, NOT_COVERED_STATUS  # the face loads only gpu.status for these

EPILOG = f"""exit status:
  N   the test's own status (0: passed)
  2   bad input, or the node refused: unknown/changed host key, ssh failure, node without the card
  {NOT_COVERED_STATUS}   not covered: no fleet node has ARCH; cross-compiled only (never a pass)
  {LOCK_TIMEOUT_STATUS}   node busy: the lock was not obtained within --lock-timeout; the test did not run
"""


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"{value[:40]!r}: seconds must be a finite number >= 0")
    return seconds


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gpu-test", help="run an arch's image test over SSH on a node that has the card",
        description="Run ARCH's image (pinned by digest) on a fleet node holding the card, over ssh with "
                    "verified host keys, one test per node at a time.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--arch", required=True, type=arch_argument(Arch), help="the card to test on, e.g. gfx1151")
    parser.add_argument("--host", default=None, help="fleet node to use (default: $GPU_HOST, else gpu_node)")
    parser.add_argument("--image", default=None, help="image pinned by digest: registry/repo:tag@sha256:…")
    parser.add_argument("--target", default="torch-runtime", help="target whose gpu_test command runs (default torch-runtime)")
    parser.add_argument("--test", default=None, help="override the target's test command")
    parser.add_argument("--lock-timeout", type=_seconds, default=3600.0,
                        help="seconds to wait for a busy node before giving up (default 3600)")
    parser.add_argument("--fleet", type=Path, default=None,
                        help="fleet manifest (default $ROCM_BAKE_FLEET, else manifests/fleet.yml)")
    parser.add_argument("--known-hosts", type=Path, default=None,
                        help="known_hosts file (default $ROCM_BAKE_SSH_KNOWN_HOSTS, else ssh's own)")
    parser.add_argument("--identity", type=Path, default=None,
                        help="ssh private key (default $ROCM_BAKE_SSH_IDENTITY, else ssh's own)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON on stdout (the test's output then streams to stderr)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rocm_bake.gpu import run_gpu_test
    from rocm_bake.gpu.remote_test import ssh_files_from_env
    from rocm_bake.manifests import load_fleet, load_targets

    fleet = load_fleet(args.fleet)
    test = args.test or load_targets().target(args.target).gpu_test
    if not test:
        raise RocmBakeError(f"target {args.target} has no gpu_test command in manifests/targets.yml")
    out = sys.stderr if args.json else sys.stdout
    env_known_hosts, env_identity = ssh_files_from_env()

    def emit_out(line: str) -> None:
        out.write(line)
        out.flush()

    def emit_err(line: str) -> None:
        sys.stderr.write(line)
        sys.stderr.flush()

    result = run_gpu_test(
        fleet, args.arch, args.image, test,
        host=args.host or os.environ.get("GPU_HOST"), lock_timeout=args.lock_timeout,
        known_hosts=args.known_hosts or env_known_hosts, identity=args.identity or env_identity,
        on_stdout=emit_out, on_stderr=emit_err,
    )
    if args.json:
        print(json.dumps(result.model_dump(exclude={"output"})))
    elif not result.covered:
        print(f"rocm-bake: {result.message}")
    else:
        print(f"rocm-bake: {result.message}", file=sys.stderr)
    return result.status

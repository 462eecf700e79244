"""``rocm-bake arches list|preview|up``: fan one operation out over ARCHES.

Each arch is a full pass over every target, so the list multiplies build
time; passes run sequentially because they contend for the same builders
(BuildKit schedules within a pass; we never queue across passes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess

from rocm_bake.arch import validate_arch
from rocm_bake.config import stack_file
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import load_targets


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arches", help="run list/preview/up over every arch stack in turn")
    parser.add_argument("action", choices=["list", "preview", "up"])
    parser.add_argument("--arches", default=None, help="space-separated arch list (default: $ARCHES or the manifest)")
    parser.add_argument("--target", action="append", default=[], help="narrow to these build targets")
    parser.add_argument("--keep-going", action="store_true", help="go on to the next arch after a failure")
    parser.set_defaults(func=run)


def resolve_arches(value: str | None) -> list[str]:
    """ARCHES: the flag, else $ARCHES, else manifests' default_arches; each must have a stack."""
    raw = value if value is not None else os.environ.get("ARCHES")
    arches = raw.split() if raw is not None else list(load_targets().default_arches)
    if not arches:
        raise RocmBakeError("ARCHES is empty: give at least one arch, e.g. --arches gfx950")
    for arch in arches:
        validate_arch(arch)
        if not stack_file(arch).exists():
            raise RocmBakeError(f"arch {arch}: no stack file {stack_file(arch)}")
    return arches


def pulumi_command(action: str, arch: str) -> list[str]:
    cmd = ["pulumi", action, "--stack", arch, "--non-interactive"]
    if action == "up":
        cmd.append("--yes")
    return cmd


def run(args: argparse.Namespace) -> int:
    arches = resolve_arches(args.arches)
    for name in args.target:
        load_targets().target(name)
    if args.action == "list":
        for arch in arches:
            print(arch)
        return 0
    if shutil.which("pulumi") is None:
        raise RocmBakeError(
            "pulumi CLI not found on PATH: install it (https://www.pulumi.com/docs/install/) and run "
            "`pulumi login --local`; `rocm-bake plan STACK` shows a stack's graph without it"
        )
    env = dict(os.environ)
    if args.target:
        env["ROCM_BAKE_TARGETS"] = " ".join(args.target)
    failed: list[str] = []
    for index, arch in enumerate(arches, 1):
        print(f"== [{index}/{len(arches)}] pulumi {args.action} -s {arch}", flush=True)
        status = subprocess.run(pulumi_command(args.action, arch), env=env).returncode
        if status != 0:
            failed.append(arch)
            print(f"== {arch}: pulumi {args.action} exited {status}", flush=True)
            if not args.keep_going:
                break
    if failed:
        skipped = arches[arches.index(failed[-1]) + 1:] if not args.keep_going else []
        note = f"; not run: {', '.join(skipped)}" if skipped else ""
        raise RocmBakeError(f"pulumi {args.action} failed for {', '.join(failed)}{note}")
    return 0

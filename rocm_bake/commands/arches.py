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
from pathlib import Path

from rocm_bake.archset import Arch, ArchError
from rocm_bake.cli import arch_argument
from rocm_bake.errors import RocmBakeError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arches", help="run list/preview/up over every arch stack in turn")
    parser.add_argument("action", choices=["list", "preview", "up"])
    parser.add_argument("--arches", default=None, type=arch_argument(parse_arches),
                        help="space-separated arch list (default: $ARCHES or the manifest)")
    parser.add_argument("--target", action="append", default=[], help="narrow to these build targets")
    parser.add_argument("--keep-going", action="store_true", help="go on to the next arch after a failure")
    parser.set_defaults(func=run)


def parse_arches(value: str) -> list[Arch]:
    """An ARCHES value (``--arches`` or ``$ARCHES``): space-separated arch names, each parsed here, once."""
    return [Arch(arch) for arch in value.split()]


def resolve_arches(arches: list[Arch] | None) -> list[Arch]:
    """ARCHES: the flag, else $ARCHES, else manifests' default_arches; each must have a stack."""
    from rocm_bake.config import stack_file
    from rocm_bake.manifests import load_targets

    if arches is None:
        env = os.environ.get("ARCHES")
        try:
            arches = parse_arches(env) if env is not None else list(load_targets().default_arches)
        except ArchError as exc:
            raise RocmBakeError(f"$ARCHES: {exc}") from None
    if not arches:
        raise RocmBakeError("ARCHES is empty: give at least one arch, e.g. --arches gfx950")
    for arch in arches:
        if not stack_file(arch).exists():
            raise RocmBakeError(f"arch {arch}: no stack file {stack_file(arch)}")
    return arches


PROJECT = "rocm-bake"
#: The arch rules (a pulumi-policy pack): every preview and up is judged by them, as `make up` does.
POLICY_PACK = Path(__file__).resolve().parents[2] / "policy"
#: The type chain of a target's image: the TargetImage component and the docker-build Image inside it.
IMAGE_TYPES = ("rocm-bake:images:TargetImage", "rocm-bake:images:TargetImage$docker-build:index:Image")


def target_urns(stack: str, arch: Arch, targets: list[str]) -> list[str]:
    """The URNs of ``targets``' images in ``stack``, for the engine's own ``--target``."""
    return [f"urn:pulumi:{stack}::{PROJECT}::{kind}::{target}-{arch}" for target in targets for kind in IMAGE_TYPES]


def pulumi_cli() -> str:
    """$ROCM_BAKE_PULUMI, else the project's CLI (.tools/bin/pulumi, from `make setup`), else pulumi on PATH."""
    chosen = os.environ.get("ROCM_BAKE_PULUMI")
    ours = Path(__file__).resolve().parents[2] / ".tools" / "bin" / "pulumi"
    found = (chosen if chosen and Path(chosen).is_file() else None) if chosen is not None else (
        str(ours) if ours.exists() else shutil.which("pulumi"))
    if found is None:
        raise RocmBakeError(
            "pulumi CLI not found: run `make setup` (it builds .tools/bin/pulumi from pinned Go modules); "
            "`rocm-bake plan STACK` shows a stack's graph without it"
        )
    return found


def pulumi_command(action: str, arch: Arch, targets: list[str] | None = None, cli: str = "pulumi") -> list[str]:
    """One pass. Narrowing uses the engine's ``--target URN --target-dependents``, never undeclaring
    resources: an undeclared resource is one the engine deletes (and the index would shrink)."""
    cmd = [cli, action, "--stack", arch, "--non-interactive", "--policy-pack", str(POLICY_PACK)]
    if action == "up":
        cmd.append("--yes")
    for urn in target_urns(arch, arch, targets or []):
        cmd += ["--target", urn]
    if targets:
        cmd.append("--target-dependents")
    return cmd


def run(args: argparse.Namespace) -> int:
    from rocm_bake.manifests import load_targets

    arches = resolve_arches(args.arches)
    for name in args.target:
        load_targets().target(name)
    if args.action == "list":
        for arch in arches:
            print(arch)
        return 0
    cli = pulumi_cli()
    failed: list[Arch] = []
    for index, arch in enumerate(arches, 1):
        print(f"== [{index}/{len(arches)}] pulumi {args.action} -s {arch}", flush=True)
        status = subprocess.run(pulumi_command(args.action, arch, args.target, cli)).returncode
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

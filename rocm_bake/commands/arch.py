"""``rocm-bake arch show ARCH``: the build policy one arch value implies, and which fleet nodes can test it."""

from __future__ import annotations

import argparse
import json

from rocm_bake.archset import ArchSet
from rocm_bake.cli import arch_argument

FIELDS = (
    "arch", "is_rdna4", "use_ck_sdpa_gfx12", "sched_coexec", "prebuild_kernels",
    "rocm_prune_keep", "fleet_nodes", "gpu_testable",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("arch", help="architecture policy")
    sub = parser.add_subparsers(dest="arch_command", required=True)
    show = sub.add_parser("show", help="print what a PYTORCH_ROCM_ARCH value implies")
    show.add_argument("arch", type=arch_argument(ArchSet),
                      help="one arch (gfx950) or a fat-build list ('gfx950;gfx1201')")
    show.add_argument("--prebuild-kernels", type=int, default=None, help="pin AITER PREBUILD_KERNELS")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    from rocm_bake.arch import arch_policy
    from rocm_bake.manifests import load_fleet

    policy = arch_policy(args.arch, prebuild_kernels=args.prebuild_kernels)
    data = {**policy.model_dump(), **load_fleet().coverage(policy.arch).model_dump()}
    if args.json:
        print(json.dumps({k: data[k] for k in FIELDS}, indent=2))
        return 0
    for key in FIELDS:
        value = data[key]
        if isinstance(value, list):
            value = ", ".join(value) if value else "(none)"
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        print(f"{key:18} {value}")
    return 0

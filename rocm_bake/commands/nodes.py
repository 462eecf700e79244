"""``rocm-bake nodes``: fleet nodes and the arches they can GPU-test."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("nodes", help="list fleet nodes and their GPUs (make list-nodes)")
    parser.add_argument("--fleet", type=Path, default=None, help="fleet manifest (default manifests/fleet.yml)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rocm_bake.manifests import load_fleet, load_targets

    fleet = load_fleet(args.fleet)
    default_arches = load_targets().default_arches
    selected = fleet.gpu_host()
    rows = [
        {"name": n.name, "host": n.host, "gpus": n.gpus, "gpu_node": n.name == selected.name}
        for n in fleet.nodes
    ]
    uncovered = [a for a in default_arches if not fleet.nodes_for(a)]
    if args.json:
        print(json.dumps({"nodes": rows, "cross_compile_only": uncovered}, indent=2))
        return 0
    for row in rows:
        mark = "  (gpu_node)" if row["gpu_node"] else ""
        print(f"{row['name']:14} {row['host']:20} {', '.join(row['gpus'])}{mark}")
    print(f"cross-compile only (no node, gpu-test reports not covered): {', '.join(uncovered) or '(none)'}")
    return 0

"""``rocm-bake plan STACK``: the resource graph a stack declares, without the Pulumi CLI.

Runs the real program under Pulumi's mock runtime (nothing is built,
pushed or published) and prints each resource's type, name and inputs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rocm_bake.config import NAMESPACE, load_stack_config, read_stack_file
from rocm_bake.errors import RocmBakeError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plan", help="print the resources a stack declares (mock runtime)")
    parser.add_argument("stack", help="stack name, e.g. gfx950 (stacks/Pulumi.<stack>.yaml)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key, e.g. --set rocm-bake:pytorchRocmArch='gfx950;gfx1201'",
    )
    parser.add_argument("--json", action="store_true", help='print the resources as a JSON list of {"type", "name", "inputs"}')
    parser.add_argument("--outputs-json", action="store_true", help="print the stack outputs as a JSON object")
    parser.set_defaults(func=run)


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise RocmBakeError(f"--set {item!r}: expected KEY=VALUE")
        full_key = key if ":" in key else f"{NAMESPACE}:{key}"
        overrides[full_key] = value
    return overrides


def plan(stack: str, overrides: dict[str, str]) -> dict[str, Any]:
    """Validate config first (a clear error beats a mock-runtime traceback), then declare."""
    config_model = load_stack_config(stack, overrides)
    if config_model.publish and not config_model.is_fat:
        config_model.publish_token()
    from components.plan_runtime import run_program  # imports Pulumi only when planning

    config = read_stack_file(stack)
    config.update(overrides)
    resources, outputs = run_program(stack, config)
    return {"stack": stack, "resources": resources, "outputs": outputs}


def run(args: argparse.Namespace) -> int:
    result = plan(args.stack, parse_overrides(args.overrides))
    if args.json:
        print(json.dumps(result["resources"], indent=2, sort_keys=True, default=str))
        return 0
    if args.outputs_json:
        print(json.dumps(result["outputs"], indent=2, sort_keys=True, default=str))
        return 0
    print(f"stack {result['stack']}: {len(result['resources'])} resources")
    for res in result["resources"]:
        inputs = res["inputs"]
        detail = ""
        if res["type"] == "docker-build:index:Image":
            detail = f"  tags={inputs.get('tags')} target={inputs.get('target')}"
            cache = (inputs.get("cacheTo") or [{}])[0].get("registry", {}).get("ref")
            detail += f" cache={cache}"
        print(f"  {res['type']:40} {res['name']}{detail}")
    print("outputs:")
    for key, value in sorted(result["outputs"].items()):
        print(f"  {key}: {json.dumps(value, default=str)}")
    return 0

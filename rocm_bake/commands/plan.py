"""``rocm-bake plan STACK…``: the resource graph each stack declares, without the Pulumi CLI.

Runs the real program under Pulumi's mock runtime (nothing is built,
pushed or published) and prints each resource's type, name and inputs.
Several stacks plan in one process, so Pulumi's SDK is imported once: most
of a single plan's time is that import.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rocm_bake.errors import RocmBakeError

if TYPE_CHECKING:
    from rocm_bake.config import StackConfig
    from rocm_bake.plan_runtime import Program

#: The config namespace (``rocm_bake.config.NAMESPACE``), here so parsing ``--set`` imports no pydantic.
NAMESPACE = "rocm-bake"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plan", help="print the resources stacks declare (mock runtime)")
    parser.add_argument("stacks", nargs="+", metavar="STACK",
                        help="stack name, e.g. gfx950 (stacks/Pulumi.<stack>.yaml); several plan in one process")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key in every stack planned, e.g. --set rocm-bake:pytorchRocmArch='gfx950;gfx1201'",
    )
    parser.add_argument("--json", action="store_true",
                        help='print the resources as a JSON list of {"type", "name", "inputs"} '
                             "(several stacks: an object of such lists by stack)")
    parser.add_argument("--outputs-json", action="store_true",
                        help="print the stack outputs as a JSON object (several stacks: one per stack); "
                             "image digests in it are placeholders, since plan builds nothing")
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


def project_program() -> "Program":
    """The project's ``define_stack``, from its ``__main__.py`` as the Pulumi CLI finds the program (the project
    directory on ``sys.path``), without running the program's own ``pulumi up`` part."""
    import runpy
    import sys

    from rocm_bake.config import STACKS_DIR

    root = STACKS_DIR.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return runpy.run_path(str(root / "__main__.py"), run_name="rocm_bake.plan")["define_stack"]


def plan(config: "StackConfig", define_stack: "Program") -> dict[str, Any]:
    """Declare one stack, already validated, under the mock runtime; return its resources and outputs."""
    from rocm_bake.plan_runtime import declare_under_mocks  # imports Pulumi only when planning

    secrets = {f"{NAMESPACE}:githubToken": config.github_token} if config.github_token else None
    recorder, outputs = declare_under_mocks(config.stack, config, define_stack, secrets)
    return {"stack": config.stack, "resources": recorder.resources, "outputs": outputs}


def plans(stacks: list[str], overrides: dict[str, str]) -> list[dict[str, Any]]:
    """Every stack's config is read and validated once, all before any is declared: one bad stack changes
    nothing and prints nothing.

    The registry and builder default to this checkout's own, as the program's
    ``read_config`` takes them under ``pulumi up``.
    """
    from rocm_bake.checkout import local_defaults
    from rocm_bake.config import STACKS_DIR, from_engine_values, load_stack_config

    given = from_engine_values(overrides, "--set")  # a mapping given as text is JSON, as the engine passes it
    configs = [load_stack_config(stack, given, local_defaults(STACKS_DIR.parent, stack=stack))
               for stack in dict.fromkeys(stacks)]
    for config in configs:
        if config.publish and not config.is_fat:
            config.publish_token()  # no token is a clear error here, before anything is declared
    define_stack = project_program()
    return [plan(config, define_stack) for config in configs]


#: What a placeholder digest shows as in the text output.
PLACEHOLDER = "sha256:<placeholder>"


def label_placeholders(text: str, resources: list[dict[str, Any]]) -> str:
    """Each image digest the mock runtime made up, shown as ``sha256:<placeholder>``: plan builds nothing."""
    from rocm_bake.plan_runtime import placeholder_digest

    for res in resources:
        if res["type"] == "docker-build:index:Image":
            text = text.replace(placeholder_digest(res["name"]), PLACEHOLDER)
    return text


def print_text(result: dict[str, Any]) -> None:
    print(f"stack {result['stack']}: {len(result['resources'])} resources")
    for res in result["resources"]:
        inputs = res["inputs"]
        detail = ""
        if res["type"] == "docker-build:index:Image":
            detail = f"  tags={inputs.get('tags')} target={inputs.get('target')}"
            cache = (inputs.get("cacheTo") or [{}])[0].get("registry", {}).get("ref")
            detail += f" cache={cache}"
        print(f"  {res['type']:40} {res['name']}{detail}")
    lines = [f"  {key}: {json.dumps(value, default=str)}" for key, value in sorted(result["outputs"].items())]
    labelled = [label_placeholders(line, result["resources"]) for line in lines]
    print("outputs:")
    print("\n".join(labelled))
    if labelled != lines:
        print(f"  ({PLACEHOLDER}: plan builds nothing, so no image has a digest yet; `pulumi up` shows the real ones)")


def run(args: argparse.Namespace) -> int:
    results = plans(args.stacks, parse_overrides(args.overrides))
    field = "resources" if args.json else "outputs" if args.outputs_json else None
    if field is not None:
        data: Any = results[0][field] if len(results) == 1 else {r["stack"]: r[field] for r in results}
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
        return 0
    for result in results:
        print_text(result)
    return 0

"""Run the Pulumi program under Pulumi's own mock runtime and record the graph.

``rocm-bake plan STACK`` uses this so anyone can see what a stack would
declare without the Pulumi CLI or credentials. Nothing is built or pushed:
the mocks return placeholder outputs (a digest derived from the resource
name) and record each resource's type, name and inputs.

The one module of the core that imports Pulumi (only ``plan`` loads it).
The program is given, never imported here: ``rocm-bake plan`` takes it from
the project's ``__main__.py``, as the Pulumi CLI does, so the core does not
depend on the program's ``components`` package.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi.runtime.settings
from pulumi.runtime import mocks as pulumi_mocks

from rocm_bake.config import STACKS_DIR, StackConfig

UNKNOWN_AFTER_APPLY = "(known after apply)"

#: Input keys whose values are never printed.
SECRET_KEYS = frozenset({"token", "githubToken", "github_token", "password", "privateKey"})


def placeholder_digest(name: str) -> str:
    """The digest the mocks give image ``name``: well-formed, derived from the name, never a real build's."""
    return "sha256:" + hashlib.sha256(name.encode()).hexdigest()


class RecordingMocks(pulumi.runtime.Mocks):
    """Record every registered resource; give images a placeholder digest."""

    def __init__(self) -> None:
        self.resources: list[dict[str, Any]] = []
        self.registered: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        self.registered.append(args)
        inputs = dict(args.inputs)
        self.resources.append({"type": args.typ, "name": args.name, "inputs": _clean(inputs)})
        outputs = dict(inputs)
        if args.typ == "docker-build:index:Image":
            digest = placeholder_digest(args.name)
            tags = inputs.get("tags") or []
            outputs["digest"] = digest
            outputs["ref"] = f"{tags[0]}@{digest}" if tags else digest
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        return {}, []


def _clean(value: Any) -> Any:
    """Drop the pickled dynamic-provider blob and mask secrets."""
    if isinstance(value, dict):
        return {
            k: ("[secret]" if k in SECRET_KEYS and v else _clean(v))
            for k, v in value.items()
            if k != "__provider"
        }
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def collect_exports(declared: dict[str, Any], exports: dict[str, Any]) -> pulumi.Output:
    """Resolve each export into ``exports``; one left unknown by preview says so."""
    settled = []
    for key, value in declared.items():
        exports[key] = UNKNOWN_AFTER_APPLY
        settled.append(pulumi.Output.from_input(value).apply(lambda v, k=key: exports.__setitem__(k, v)))
    return pulumi.Output.all(*settled)


#: The program's declaration: every resource of one stack from its config; what the stack exports.
Program = Callable[[StackConfig], dict[str, Any]]


def declare_under_mocks(
    stack: str, config: StackConfig, define_stack: Program, secrets: dict[str, str] | None = None
) -> tuple[RecordingMocks, dict[str, Any]]:
    """Run ``define_stack(config)`` for ``stack`` under mocks; return (mocks, exports).

    ``config`` was read and validated once by the caller. ``secrets`` are
    the stack's secret config keys (``rocm-bake:githubToken``), set as the
    engine sets them, marked secret, for the program to read with
    ``get_secret``; nothing else is passed as raw config.
    """
    recorder = RecordingMocks()
    pulumi.runtime.set_mocks(recorder, project="rocm-bake", stack=stack, preview=True)
    # Mocks answer get_root_directory() with a placeholder; the program plan runs is the one whose
    # stacks/ it reads.
    pulumi.runtime.settings.SETTINGS.root_directory = str(STACKS_DIR.parent)
    pulumi.runtime.set_all_config(dict(secrets or {}), secret_keys=list(secrets or {}))
    exports: dict[str, Any] = {}

    def program() -> pulumi.Output:
        return collect_exports(define_stack(config), exports)

    pulumi_mocks.test(program)()
    return recorder, exports

"""``ImageHome``: where a stack's images live (registry and builder), recorded in its state.

A stack file that names no ``rocm-bake:registry`` or ``rocm-bake:builder``
takes the checkout's own (``rocm_bake.checkout``: a loopback port and a
builder named after the checkout). With the team's state in a bucket,
another checkout's defaults would differ, and its ``up`` would quietly move
every image to its own registry and builder. So the values a stack was
reconciled with are recorded here, with the checkout that chose them; a run
whose values came from a different checkout's defaults is refused in
``diff`` (preview and up alike), naming both. The images depend on this
resource, so nothing is built or moved before the check. Values the stack
file names are the team's decision and are never refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from components.dynamic import ProviderInputs
from rocm_bake.errors import RocmBakeError
from rocm_bake.resource_types import IMAGE_HOME


@dataclass(frozen=True)
class HomeInputs(ProviderInputs):
    """The stack's registry and builder; ``chosen_by``: the checkout whose defaults gave them (None: the stack
    file names both)."""

    stack: str
    registry: str
    builder: str
    chosen_by: str | None = None


def takeover(old: HomeInputs, new: HomeInputs) -> str | None:
    """Why ``new`` may not replace ``old`` (None when it may)."""
    if new.chosen_by is None or new.chosen_by == old.chosen_by:
        return None
    if (old.registry, old.builder) == (new.registry, new.builder):
        return None
    recorded = f"the defaults of {old.chosen_by}" if old.chosen_by else "its stack file"
    return (f"stack {new.stack} is shared and names no rocm-bake:registry or rocm-bake:builder: its images are in "
            f"registry {old.registry}, built by builder {old.builder} (recorded from {recorded}); this run "
            f"({new.chosen_by}) would move them to its own registry {new.registry} and builder {new.builder}. "
            f"Name the team's registry and builder in stacks/Pulumi.{new.stack}.yaml "
            f"(pulumi config set rocm-bake:registry …; rocm-bake:builder …) to move them on purpose")


class ImageHomeProvider(ResourceProvider):
    """create/update record; diff refuses another checkout's defaults."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = HomeInputs.from_props(props)
        return CreateResult(id_=inputs.stack, outs=inputs.outputs())

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        old, new = HomeInputs.from_props(olds), HomeInputs.from_props(news)
        refused = takeover(old, new)
        if refused is not None:
            raise RocmBakeError(refused)
        return DiffResult(changes=old != new)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=HomeInputs.from_props(news).outputs())


class ImageHome(pulumi.dynamic.Resource, module=IMAGE_HOME.module, name=IMAGE_HOME.name):
    """The stack's registry and builder, and whose checkout chose them (see the module's doc)."""

    registry: pulumi.Output[str]
    builder: pulumi.Output[str]

    def __init__(self, name: str, inputs: HomeInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(ImageHomeProvider(), name, inputs.declared(), opts)

"""``WheelIndex``: one arch's pip index as a dynamic resource.

All work is ``rocm_bake.index.build``; this maps create/diff/update/delete onto it.
``diff`` plans the index in memory (validation, cached hashes, pages) and
compares the would-be ``index_sha256`` with the recorded one, so ``pulumi
preview`` shows when the index would change — new wheel bytes, a different
``wheel_url`` — and says nothing when it would not. Warm planning costs no
re-hashing (see ``rocm_bake.index.hashcache``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.dynamic import ProviderInputs, TypedResource, check_inputs, unknown_or_replace
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import DEFAULT_ROCM_VERSION, IndexResult, build_index, index_dir, is_rocm_bake_index
from rocm_bake.index.models import IndexPlan
from rocm_bake.index import check_rocm_version, plan_index, remove_index, tree_matches
from rocm_bake.resource_types import WHEEL_INDEX

#: Changing these moves the index directory, so the old one is replaced.
REPLACE_KEYS = ("arch", "dist")


@dataclass(frozen=True)
class IndexInputs(ProviderInputs):
    """What an index is built from: the arch set, its fetched wheels, where it goes and how its links read."""

    arch: ArchSet
    wheels_dir: str  # FetchedWheels' ``wheels_dir`` Output in the program
    dist: str
    wheel_url: str | None = None
    rocm_version: str = DEFAULT_ROCM_VERSION
    #: Where the indexes are published, recorded in the metapackage for ``python -m rocm_torch`` (None: unknown).
    index_base: str | None = None

    OUTPUTS = ("wheel_count", "index_sha256", "metapackage", "files")
    EDGE_PARSERS = {"arch": ArchSet}

    def declared(self) -> dict[str, Any]:
        """``index_dir`` is known at declaration (``DIST/index/<dir_name>``), so plan and preview show it."""
        return {**super().declared(), "index_dir": str(index_dir(Path(self.dist), self.arch))}

    def plan(self) -> IndexPlan:
        """The index these inputs would build, planned in memory (a bad wheel raises the build's own error)."""
        return plan_index(self.arch, Path(self.wheels_dir), Path(self.dist), self.wheel_url,
                          self.rocm_version or DEFAULT_ROCM_VERSION, index_base=self.index_base)

    def build(self) -> IndexResult:
        return build_index(self.arch, Path(self.wheels_dir), Path(self.dist), wheel_url=self.wheel_url,
                           rocm_version=self.rocm_version or DEFAULT_ROCM_VERSION, index_base=self.index_base)


def outputs(inputs: IndexInputs, result: IndexResult) -> dict[str, Any]:
    return inputs.outputs(
        index_dir=result.index_dir,
        wheel_count=result.wheel_count,
        index_sha256=result.index_sha256,
        metapackage=result.metapackage,
        files=[f.model_dump() for f in result.files],
    )


def on_disk_sha256(props: dict[str, Any]) -> str | None:
    """The recorded index digest if ``DIST/index/<arch>/`` still holds exactly that index, else None."""
    inputs = IndexInputs.from_props(props)
    out = Path(props.get("index_dir") or index_dir(Path(inputs.dist), inputs.arch))
    if not is_rocm_bake_index(out):
        return None
    try:
        plan = inputs.plan()
    except RocmBakeError:
        return None
    return plan.index_sha256 if tree_matches(plan) else None


class WheelIndexProvider(ResourceProvider):
    """check validates; create/update build; diff plans and compares; read reports what is on disk."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return check_inputs(news, {"rocm_version": check_rocm_version})

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = IndexInputs.from_props(props)
        result = inputs.build()
        return CreateResult(id_=result.index_dir, outs=outputs(inputs, result))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        early = unknown_or_replace(olds, news, IndexInputs.keys(), REPLACE_KEYS)
        if early is not None:
            return early
        inputs = IndexInputs.from_props(news)
        if not Path(inputs.wheels_dir).is_dir():
            # deleted behind our back: drift, which the fetch before this index repairs on `up`
            return DiffResult(changes=True)
        plan = inputs.plan()  # a bad wheel fails the preview here, with the build's own error
        if plan.index_sha256 != olds.get("index_sha256"):
            return DiffResult(changes=True)
        # the same index planned: is it still on disk as built? (removed or edited behind our back)
        return DiffResult(changes=not (is_rocm_bake_index(Path(olds.get("index_dir") or _id)) and tree_matches(plan)))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = IndexInputs.from_props(news)
        return UpdateResult(outs=outputs(inputs, inputs.build()))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: a deleted or hand-edited index reads back with no digest (drift)."""
        return ReadResult(id_=id_, outs={**props, "index_sha256": on_disk_sha256(props)})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Remove the index (its link and versioned trees), but only if it is still one rocm-bake wrote."""
        inputs = IndexInputs.from_props(props)
        remove_index(Path(inputs.dist), inputs.arch)


class WheelIndex(TypedResource, module=WHEEL_INDEX.module, name=WHEEL_INDEX.name):
    """``DIST/index/<arch>/`` built from ``wheels_dir`` (pass FetchedWheels' ``wheels_dir`` output).

    ``arch`` is the stack's PYTORCH_ROCM_ARCH, already validated by the stack
    config. Outputs: ``index_dir``, ``wheel_count`` (rocm-torch included),
    ``index_sha256`` (stable digest of the index tree), ``metapackage``, ``files``.
    """

    index_dir: pulumi.Output[str]
    wheel_count: pulumi.Output[int]
    index_sha256: pulumi.Output[str]
    metapackage: pulumi.Output[str]
    files: pulumi.Output[list[dict[str, Any]]]

    def __init__(self, name: str, inputs: IndexInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(WheelIndexProvider(), name, inputs.declared(), opts)

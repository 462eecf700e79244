"""``WheelIndex``: one arch's pip index as a dynamic resource.

All work is ``rocm_bake.index.build``; this maps create/diff/update/delete onto it.
``diff`` plans the index in memory (validation, cached hashes, pages) and
compares the would-be ``index_sha256`` with the recorded one, so ``pulumi
preview`` shows when the index would change — new wheel bytes, a different
``wheel_url`` — and says nothing when it would not. Warm planning costs no
re-hashing (see ``rocm_bake.index.hashcache``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.dynamic import check_inputs, unknown_or_replace
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import DEFAULT_ROCM_VERSION, IndexResult, build_index, index_dir, is_rocm_bake_index
from rocm_bake.index import check_rocm_version, plan_index, remove_index, tree_matches

#: Changing these moves the index directory, so the old one is replaced.
REPLACE_KEYS = ("arch", "dist")
INPUT_KEYS = ("arch", "wheels_dir", "dist", "wheel_url", "rocm_version")


def _build(props: dict[str, Any]) -> IndexResult:
    return build_index(
        props["arch"], Path(props["wheels_dir"]), Path(props["dist"]),
        wheel_url=props.get("wheel_url"), rocm_version=props.get("rocm_version") or DEFAULT_ROCM_VERSION,
    )


def outputs(props: dict[str, Any], result: IndexResult) -> dict[str, Any]:
    return {
        **{k: props.get(k) for k in INPUT_KEYS},
        "index_dir": result.index_dir,
        "wheel_count": result.wheel_count,
        "index_sha256": result.index_sha256,
        "metapackage": result.metapackage,
        "files": [f.model_dump() for f in result.files],
    }


def on_disk_sha256(props: dict[str, Any]) -> str | None:
    """The recorded index digest if ``DIST/index/<arch>/`` still holds exactly that index, else None."""
    out = Path(props.get("index_dir") or index_dir(Path(props["dist"]), props["arch"]))
    if not is_rocm_bake_index(out):
        return None
    try:
        plan = plan_index(
            props["arch"], Path(props["wheels_dir"]), Path(props["dist"]), props.get("wheel_url"),
            props.get("rocm_version") or DEFAULT_ROCM_VERSION,
        )
    except RocmBakeError:
        return None
    return plan.index_sha256 if tree_matches(plan) else None


class WheelIndexProvider(ResourceProvider):
    """check validates; create/update build; diff plans and compares; read reports what is on disk."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return check_inputs(news, {"rocm_version": check_rocm_version})

    def create(self, props: dict[str, Any]) -> CreateResult:
        result = _build(props)
        return CreateResult(id_=result.index_dir, outs=outputs(props, result))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        early = unknown_or_replace(olds, news, INPUT_KEYS, REPLACE_KEYS)
        if early is not None:
            return early
        if not Path(news["wheels_dir"]).is_dir():
            # deleted behind our back (A5a): drift, which the fetch before this index repairs on `up`
            return DiffResult(changes=True)
        plan = plan_index(  # a bad wheel fails the preview here, with the build's own error
            news["arch"], Path(news["wheels_dir"]), Path(news["dist"]), news.get("wheel_url"),
            news.get("rocm_version") or DEFAULT_ROCM_VERSION,
        )
        if plan.index_sha256 != olds.get("index_sha256"):
            return DiffResult(changes=True)
        # the same index planned: is it still on disk as built? (removed or edited behind our back)
        return DiffResult(changes=not (is_rocm_bake_index(Path(olds.get("index_dir") or _id)) and tree_matches(plan)))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=outputs(news, _build(news)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: a deleted or hand-edited index reads back with no digest (drift)."""
        return ReadResult(id_=id_, outs={**props, "index_sha256": on_disk_sha256(props)})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Remove the index (its link and versioned trees), but only if it is still one rocm-bake wrote."""
        remove_index(Path(props["dist"]), props["arch"])


class WheelIndex(pulumi.dynamic.Resource):
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

    def __init__(
        self,
        name: str,
        arch: str,
        wheels_dir: "pulumi.Input[str]",
        dist: str,
        wheel_url: "pulumi.Input[str] | None" = None,
        opts: pulumi.ResourceOptions | None = None,
        rocm_version: str = DEFAULT_ROCM_VERSION,
    ) -> None:
        props = {
            "arch": arch,
            "wheels_dir": wheels_dir,
            "dist": str(dist),
            "wheel_url": wheel_url,
            "rocm_version": rocm_version,
            "index_dir": str(index_dir(Path(dist), arch)),
            "wheel_count": None,
            "index_sha256": None,
            "metapackage": None,
            "files": None,
        }
        super().__init__(WheelIndexProvider(), name, props, opts)

"""``FetchedWheels``: an arch's wheels out of its built images, as a dynamic resource.

All work is ``rocm_bake.registry.extract.fetch_wheels``; this only maps Pulumi's
create/diff/update/delete onto it. The resource is keyed on the images'
resolved *digests*: a new image re-extracts and an unchanged one does not,
whatever the ref string looks like. Wheels are fetched by
architecture-specific tag, never :latest — written by whichever architecture
was pushed last, with the wheels inside indistinguishable afterwards — so a
``:latest`` ref is refused at declaration, not at fetch time.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.dynamic import ProviderInputs, TypedResource, check_inputs, unknown_or_replace
from rocm_bake.archset import ArchSet
from rocm_bake.registry import DEFAULT_WHEEL_DIR, FETCH_MANIFEST, FetchResult, fetch_wheels
from rocm_bake.registry import RegistryClient, check_ref_for_arch, read_fetch_manifest, reusable
from rocm_bake.resource_types import FETCHED_WHEELS

#: Changing these moves the output directory, so the old one is replaced
#: (deleted first: "dist" and "./dist" are the same directory).
REPLACE_KEYS = ("arch", "dist")


@dataclass(frozen=True)
class FetchInputs(ProviderInputs):
    """What a fetch is of: the arch set, its images (refs pinned by digest once built), where the wheels go."""

    arch: ArchSet
    image_refs: list[str]  # the images' ``ref`` Outputs in the program
    dist: str
    wheel_dir: str = DEFAULT_WHEEL_DIR

    OUTPUTS = ("wheels_dir", "manifest_digest", "manifest_digests", "wheel_count", "wheels", "bytes_fetched")
    EDGE_PARSERS = {"arch": ArchSet}


def combined_digest(digests: Sequence[str]) -> str:
    """One image: its digest. Several: sha256 over their digests, in order."""
    if len(digests) == 1:
        return digests[0]
    return "sha256:" + hashlib.sha256("\n".join(digests).encode()).hexdigest()


def resolve_digests(arch: ArchSet, refs: Sequence[str]) -> list[str]:
    """Each ref's manifest digest (pinned refs need no request; tags cost one HEAD)."""
    parsed = [check_ref_for_arch(r, arch) for r in refs]
    pool: dict[str, RegistryClient] = {}
    try:
        out = []
        for ref in parsed:
            client = pool.setdefault(ref.registry, RegistryClient(ref.registry))
            out.append(client.resolve_digest(ref))
        return out
    finally:
        for client in pool.values():
            client.close()


def outputs(inputs: FetchInputs, result: FetchResult) -> dict[str, Any]:
    digests = [image.manifest_digest for image in result.images]
    return inputs.outputs(
        wheels_dir=result.wheels_dir,
        manifest_digest=combined_digest(digests),
        manifest_digests=digests,
        wheel_count=len(result.wheels),
        wheels=[{"name": w.name, "sha256": w.sha256, "size": w.size} for w in result.wheels],
        bytes_fetched=result.bytes_fetched,
    )


def on_disk(wheels_dir: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """(digests, wheels) that ``wheels_dir`` really holds now; empty when gone or tampered with."""
    manifest = read_fetch_manifest(wheels_dir)
    if manifest is None or not all(reusable(image, wheels_dir) for image in manifest.images):
        return [], []
    wheels = [w.model_dump() for image in manifest.images for w in image.wheels]
    return [image.manifest_digest for image in manifest.images], sorted(wheels, key=lambda w: w["name"])


def run_fetch(inputs: FetchInputs) -> FetchResult:
    return fetch_wheels(inputs.arch, list(inputs.image_refs), Path(inputs.dist), wheel_dir=inputs.wheel_dir)


def _check_refs(inputs: FetchInputs) -> None:
    """Every ref against the arch (check_inputs has already held back a list with an unknown in it)."""
    for ref in inputs.image_refs or []:
        if ref != "":
            check_ref_for_arch(ref, inputs.arch)


class FetchedWheelsProvider(ResourceProvider):
    """check validates; create/update fetch; diff compares digests; read reports what is on disk."""

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return check_inputs(news, {"image_refs": lambda _refs: _check_refs(FetchInputs.from_props(news))})

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = FetchInputs.from_props(props)
        result = run_fetch(inputs)
        return CreateResult(id_=result.wheels_dir, outs=outputs(inputs, result))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        early = unknown_or_replace(olds, news, FetchInputs.keys(), REPLACE_KEYS)
        if early is not None:
            return early
        if olds.get("wheel_dir") != news.get("wheel_dir"):
            return DiffResult(changes=True)
        refs = list(news.get("image_refs") or [])
        # docker-build reports an image it will rebuild as its bare tag with no
        # digest during preview: that is "changes", not the old digest again.
        if any("@sha256:" not in ref for ref in refs):
            return DiffResult(changes=True)
        digests, _wheels = on_disk(Path(olds.get("wheels_dir") or _id))
        if digests != list(olds.get("manifest_digests") or []):
            return DiffResult(changes=True)  # deleted or edited behind our back
        return DiffResult(changes=resolve_digests(FetchInputs.from_props(news).arch, refs) != digests)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = FetchInputs.from_props(news)
        return UpdateResult(outs=outputs(inputs, run_fetch(inputs)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: what ``DIST/wheels/<arch>/`` holds now (a deleted directory reads as empty)."""
        digests, wheels = on_disk(Path(props.get("wheels_dir") or id_))
        return ReadResult(id_=id_, outs={
            **props, "manifest_digests": digests, "manifest_digest": combined_digest(digests) if digests else None,
            "wheel_count": len(wheels), "wheels": wheels,
        })

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Remove the arch directory, but only if it is still the one rocm-bake wrote."""
        out = Path(props.get("wheels_dir") or _id)
        if (out / FETCH_MANIFEST).is_file():
            shutil.rmtree(out)


class FetchedWheels(TypedResource, module=FETCHED_WHEELS.module, name=FETCHED_WHEELS.name):
    """``DIST/wheels/<arch>/`` filled from ``image_refs``.

    Pass the docker-build Images' ``ref`` outputs (``repo:<arch>-rocm<v>@sha256:…``)
    so the extraction depends on the image resources. ``arch`` is the stack's
    PYTORCH_ROCM_ARCH, already validated by the stack config. Outputs:
    ``wheels_dir``, ``manifest_digest`` (combined for several images),
    ``manifest_digests``, ``wheel_count``, ``wheels`` (name, sha256, size),
    ``bytes_fetched``.
    """

    wheels_dir: pulumi.Output[str]
    manifest_digest: pulumi.Output[str]
    manifest_digests: pulumi.Output[list[str]]
    wheel_count: pulumi.Output[int]
    wheels: pulumi.Output[list[dict[str, Any]]]
    bytes_fetched: pulumi.Output[int]

    def __init__(self, name: str, inputs: FetchInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(FetchedWheelsProvider(), name, inputs.declared(), opts)

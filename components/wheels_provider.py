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
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from rocm_bake.arch import validate_arch
from rocm_bake.registry import DEFAULT_WHEEL_DIR, FETCH_MANIFEST, FetchResult, fetch_wheels
from rocm_bake.registry import RegistryClient, check_ref_for_arch

#: What the engine passes for a not-yet-known value during preview.
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
#: Changing these moves the output directory, so the old one is replaced
#: (deleted first: "dist" and "./dist" are the same directory).
REPLACE_KEYS = ("arch", "dist")


def combined_digest(digests: Sequence[str]) -> str:
    """One image: its digest. Several: sha256 over their digests, in order."""
    if len(digests) == 1:
        return digests[0]
    return "sha256:" + hashlib.sha256("\n".join(digests).encode()).hexdigest()


def resolve_digests(arch: str, refs: Sequence[str]) -> list[str]:
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


def outputs(props: dict[str, Any], result: FetchResult) -> dict[str, Any]:
    digests = [image.manifest_digest for image in result.images]
    return {
        **props,
        "wheels_dir": result.wheels_dir,
        "manifest_digest": combined_digest(digests),
        "manifest_digests": digests,
        "wheel_count": len(result.wheels),
        "wheels": [{"name": w.name, "sha256": w.sha256, "size": w.size} for w in result.wheels],
        "bytes_fetched": result.bytes_fetched,
    }


def run_fetch(props: dict[str, Any]) -> FetchResult:
    return fetch_wheels(
        props["arch"], list(props["image_refs"]), Path(props["dist"]), wheel_dir=props["wheel_dir"]
    )


class FetchedWheelsProvider(ResourceProvider):
    """create/update fetch; diff compares digests; delete removes the arch directory."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        result = run_fetch(props)
        return CreateResult(id_=result.wheels_dir, outs=outputs(props, result))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        refs = list(news.get("image_refs") or [])
        if UNKNOWN in refs or news.get("image_refs") == UNKNOWN:
            return DiffResult(changes=True)
        replaces = [k for k in REPLACE_KEYS if olds.get(k) != news.get(k)]
        if replaces:
            return DiffResult(changes=True, replaces=replaces, delete_before_replace=True)
        if olds.get("wheel_dir") != news.get("wheel_dir"):
            return DiffResult(changes=True)
        changed = resolve_digests(news["arch"], refs) != list(olds.get("manifest_digests") or [])
        return DiffResult(changes=changed, replaces=[], stables=["wheels_dir"])

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=outputs(news, run_fetch(news)))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Remove the arch directory, but only if it is still the one rocm-bake wrote."""
        out = Path(props.get("wheels_dir") or _id)
        if (out / FETCH_MANIFEST).is_file():
            shutil.rmtree(out)


def validated_refs(arch: str, image_ref: "pulumi.Input[str] | Sequence[pulumi.Input[str]]") -> pulumi.Output[list[str]]:
    """One ref or several, each checked against ``arch`` as soon as it is known."""
    if isinstance(image_ref, (list, tuple)):
        refs = pulumi.Output.all(*image_ref)
    else:
        refs = pulumi.Output.from_input(image_ref).apply(lambda r: [r])

    def check(values: list[str]) -> list[str]:
        for value in values:
            check_ref_for_arch(value, arch)
        return list(values)

    for value in image_ref if isinstance(image_ref, (list, tuple)) else [image_ref]:
        if isinstance(value, str):
            check_ref_for_arch(value, arch)  # a plain string fails at declaration
    return refs.apply(check)


class FetchedWheels(pulumi.dynamic.Resource):
    """``DIST/wheels/<arch>/`` filled from ``image_ref`` (one ref or a list).

    Pass the docker-build Image's ``ref`` output (``repo:<arch>-rocm<v>@sha256:…``)
    so the extraction depends on the image resource. Outputs: ``wheels_dir``,
    ``manifest_digest`` (combined for several images), ``manifest_digests``,
    ``wheel_count``, ``wheels`` (name, sha256, size), ``bytes_fetched``.
    """

    wheels_dir: pulumi.Output[str]
    manifest_digest: pulumi.Output[str]
    manifest_digests: pulumi.Output[list[str]]
    wheel_count: pulumi.Output[int]
    wheels: pulumi.Output[list[dict[str, Any]]]
    bytes_fetched: pulumi.Output[int]
    image_refs: pulumi.Output[list[str]]

    def __init__(
        self,
        name: str,
        arch: str,
        image_ref: "pulumi.Input[str] | Sequence[pulumi.Input[str]]",
        dist: str,
        opts: pulumi.ResourceOptions | None = None,
        wheel_dir: str = DEFAULT_WHEEL_DIR,
    ) -> None:
        validate_arch(arch)
        refs = validated_refs(arch, image_ref)
        props = {
            "arch": arch,
            "image_refs": refs,
            "dist": str(dist),
            "wheel_dir": wheel_dir,
            "wheels_dir": None,
            "manifest_digest": None,
            "manifest_digests": None,
            "wheel_count": None,
            "wheels": None,
            "bytes_fetched": None,
        }
        super().__init__(FetchedWheelsProvider(), name, props, opts)
        #: The checked refs as declared: carries the image resources as dependencies.
        self.image_refs_input = refs

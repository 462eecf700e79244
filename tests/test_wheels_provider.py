"""``FetchedWheels``: provider methods against the real registry; declaration under mocks."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.dynamic import UNKNOWN
from components.wheels_provider import FetchedWheels, FetchedWheelsProvider, FetchInputs, combined_digest
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.extract import FETCH_MANIFEST
from rocm_bake.resource_types import FETCHED_WHEELS

from tests.registry_fixtures import Entry, Layer, Registry, push_image, registry, wheel  # noqa: F401

TAG = "gfx950-rocm10.1.0"


def push(registry: Registry, repo: str, files: dict[str, bytes]) -> str:
    entries = [Entry("wheels", kind="dir")] + [Entry(f"wheels/{n}", d) for n, d in files.items()]
    return push_image(registry.address, repo, TAG, [Layer(entries)]).digest


def props(registry: Registry, dist: Path, *repos: str) -> dict[str, Any]:
    return {
        "arch": "gfx950",
        "image_refs": [f"{registry.address}/{r}:{TAG}" for r in repos],
        "dist": str(dist),
        "wheel_dir": "/wheels/",
    }


def test_create_diff_update_delete_keyed_on_digest(registry: Registry, tmp_path: Path) -> None:
    name = wheel("torch", "2.15.0")
    first = push(registry, "rocm-bake/prov-torch", {name: b"one"})
    provider = FetchedWheelsProvider()
    news = props(registry, tmp_path, "rocm-bake/prov-torch")
    created = provider.create(news)
    outs = created.outs
    assert created.id == str(tmp_path / "wheels" / "gfx950")
    assert outs["manifest_digest"] == first and outs["manifest_digests"] == [first]
    assert outs["wheel_count"] == 1
    assert outs["wheels"] == [{"name": name, "sha256": hashlib.sha256(b"one").hexdigest(), "size": 3}]
    # the same pinned digest: no change
    pinned = {**news, "image_refs": [f"{registry.address}/rocm-bake/prov-torch:{TAG}@{first}"]}
    assert provider.diff(created.id, outs, pinned).changes is False
    # a bare tag is what docker-build reports in preview for an image it will
    # rebuild: that is a change, never "the old digest again"
    assert provider.diff(created.id, outs, news).changes is True
    # a new image pinned by its new digest: a change, and update re-extracts
    second = push(registry, "rocm-bake/prov-torch", {name: b"two"})
    diff = provider.diff(created.id, outs, {**news, "image_refs": [f"{registry.address}/rocm-bake/prov-torch:{TAG}@{second}"]})
    assert diff.changes is True and not diff.replaces
    updated = provider.update(created.id, outs, news).outs
    assert updated["manifest_digest"] == second
    assert (Path(updated["wheels_dir"]) / name).read_bytes() == b"two"
    # unknown refs during preview, and a moved dist dir
    assert provider.diff(created.id, updated, {**news, "image_refs": [UNKNOWN]}).changes is True
    moved = provider.diff(created.id, updated, {**news, "dist": str(tmp_path / "elsewhere")})
    assert moved.changes and moved.replaces == ["dist"] and moved.delete_before_replace
    provider.delete(created.id, updated)
    assert not Path(updated["wheels_dir"]).exists()


def test_refresh_and_diff_notice_a_deleted_wheel_directory(registry: Registry, tmp_path: Path) -> None:
    """``read`` reports what is on disk, so ``refresh`` shows a deleted directory and ``up`` re-fetches."""
    name = wheel("torch", "2.15.0")
    digest = push(registry, "rocm-bake/prov-gone", {name: b"gone"})
    provider = FetchedWheelsProvider()
    news = {**props(registry, tmp_path, "rocm-bake/prov-gone"),
            "image_refs": [f"{registry.address}/rocm-bake/prov-gone:{TAG}@{digest}"]}
    created = provider.create(news)
    assert provider.read(created.id, created.outs).outs["wheels"] == created.outs["wheels"]
    assert provider.diff(created.id, created.outs, news).changes is False
    import shutil

    shutil.rmtree(created.id)
    read = provider.read(created.id, created.outs).outs
    assert read["wheel_count"] == 0 and read["manifest_digests"] == []
    assert provider.diff(created.id, created.outs, news).changes is True
    assert provider.diff(created.id, read, news).changes is True
    provider.update(created.id, read, news)
    assert (Path(created.id) / name).read_bytes() == b"gone"


def test_several_images_combined_digest(registry: Registry, tmp_path: Path) -> None:
    a = push(registry, "rocm-bake/prov-a", {wheel("a"): b"a"})
    b = push(registry, "rocm-bake/prov-b", {wheel("b"): b"b"})
    outs = FetchedWheelsProvider().create(props(registry, tmp_path, "rocm-bake/prov-a", "rocm-bake/prov-b")).outs
    assert outs["manifest_digests"] == [a, b] and outs["wheel_count"] == 2
    assert outs["manifest_digest"] == combined_digest([a, b]) != combined_digest([b, a])


def test_delete_leaves_a_directory_rocm_bake_did_not_write(tmp_path: Path) -> None:
    foreign = tmp_path / "wheels" / "gfx950"
    foreign.mkdir(parents=True)
    (foreign / "keep.whl").write_bytes(b"k")
    FetchedWheelsProvider().delete(str(foreign), {"wheels_dir": str(foreign)})
    assert (foreign / "keep.whl").exists() and not (foreign / FETCH_MANIFEST).exists()


def test_provider_refuses_latest(tmp_path: Path) -> None:
    news = {"arch": "gfx950", "image_refs": ["127.0.0.1:9/rocm-bake/torch:latest"], "dist": str(tmp_path), "wheel_dir": "/wheels/"}
    with pytest.raises(RocmBakeError, match="pushed last"):
        FetchedWheelsProvider().create(news)


# -- check() in preview, declaration under the mock runtime -----------------


def test_check_refuses_latest_and_other_arches_in_preview() -> None:
    """Validation is the provider's ``check``: a bad ref fails the preview, before any apply."""
    provider = FetchedWheelsProvider()
    base = {"arch": "gfx950", "dist": "dist", "wheel_dir": "/wheels/"}
    latest = provider.check({}, {**base, "image_refs": ["127.0.0.1:5000/rocm-bake/torch:latest"]})
    assert [f.property for f in latest.failures] == ["image_refs"]
    assert "whichever architecture was pushed last" in latest.failures[0].reason
    other = provider.check({}, {**base, "image_refs": ["127.0.0.1:5000/rocm-bake/torch:gfx1201-rocm10.1.0"]})
    assert "tagged for gfx1201, not gfx950" in other.failures[0].reason
    ok = provider.check({}, {**base, "image_refs": [f"127.0.0.1:5000/rocm-bake/torch:{TAG}"]})
    assert ok.failures == []
    pending = provider.check({}, {**base, "image_refs": [UNKNOWN]})
    assert pending.failures == []  # checked again once known


class Mocks(pulumi.runtime.Mocks):
    def __init__(self, ref_tag: str = TAG) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []
        self.ref_tag = ref_tag

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        outputs = dict(args.inputs)
        if args.typ == "docker-build:index:Image":
            digest = "sha256:" + hashlib.sha256(args.name.encode()).hexdigest()
            outputs.update(digest=digest, ref=f"127.0.0.1:5000/rocm-bake/torch:{self.ref_tag}@{digest}")
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list]:
        return {}, []


def test_declared_extraction_depends_on_the_image_ref(tmp_path: Path) -> None:
    import pulumi_docker_build as docker_build

    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project="rocm-bake", stack="gfx950", preview=True)
    seen: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        image = docker_build.Image("torch-gfx950", push=True, tags=[f"127.0.0.1:5000/rocm-bake/torch:{TAG}"])
        fetched = FetchedWheels("wheels-gfx950", FetchInputs(arch=ArchSet("gfx950"), image_refs=[image.ref],
                                                             dist=str(tmp_path)),
                                opts=pulumi.ResourceOptions(depends_on=[image]))
        seen["image"] = image
        return pulumi.Output.all(image.ref, fetched.urn).apply(lambda v: seen.update(ref=v[0]))

    program()
    (dynamic,) = [r for r in mocks.resources if r.typ == FETCHED_WHEELS.token]
    assert dynamic.name == "wheels-gfx950"
    assert dynamic.inputs["image_refs"] == [seen["ref"]]
    assert "@sha256:" in seen["ref"] and ":latest" not in seen["ref"]
    assert dynamic.inputs["arch"] == "gfx950" and dynamic.inputs["wheel_dir"] == "/wheels/"


def test_a_fat_stack_fetches_by_its_combined_tag_into_its_own_directory(registry: Registry, tmp_path: Path) -> None:
    """PYTORCH_ROCM_ARCH='gfx950;gfx1201': images tagged gfx950_gfx1201-…, wheels in wheels/gfx950-gfx1201/."""
    entries = [Entry("wheels", kind="dir"), Entry(f"wheels/{wheel('torch', '2.15.0')}", b"fat")]
    digest = push_image(registry.address, "rocm-bake/prov-fat", "gfx950_gfx1201-rocm10.1.0", [Layer(entries)]).digest
    provider = FetchedWheelsProvider()
    news = {"arch": "gfx950;gfx1201", "dist": str(tmp_path), "wheel_dir": "/wheels/",
            "image_refs": [f"{registry.address}/rocm-bake/prov-fat:gfx950_gfx1201-rocm10.1.0@{digest}"]}
    assert provider.check({}, news).failures == []
    created = provider.create(news)
    assert created.id == str(tmp_path / "wheels" / "gfx950-gfx1201")
    single = provider.check({}, {**news, "image_refs": [f"{registry.address}/rocm-bake/torch:gfx950-rocm10.1.0"]})
    assert "tagged for gfx950, not gfx950;gfx1201" in single.failures[0].reason

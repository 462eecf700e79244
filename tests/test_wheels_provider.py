"""``FetchedWheels``: provider methods against the real registry; declaration under mocks."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.wheels_provider import UNKNOWN, FetchedWheels, FetchedWheelsProvider, combined_digest
from rocm_bake.errors import RocmBakeError
from rocm_bake.registry.extract import FETCH_MANIFEST

from registry_fixtures import Entry, Layer, Registry, push_image, registry, wheel  # noqa: F401

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
    # same digest, however it is spelled: no change
    assert provider.diff(created.id, outs, news).changes is False
    pinned = {**news, "image_refs": [f"{registry.address}/rocm-bake/prov-torch:{TAG}@{first}"]}
    assert provider.diff(created.id, outs, pinned).changes is False
    # a new image behind the same tag: a change, and update re-extracts
    second = push(registry, "rocm-bake/prov-torch", {name: b"two"})
    diff = provider.diff(created.id, outs, news)
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


# -- declaration under the mock runtime ---------------------------------------


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

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


def declare(mocks: Mocks, tmp_path: Path) -> dict[str, Any]:
    import pulumi_docker_build as docker_build

    pulumi.runtime.set_mocks(mocks, project="rocm-bake", stack="gfx950", preview=True)
    seen: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        image = docker_build.Image("torch-gfx950", push=True, tags=[f"127.0.0.1:5000/rocm-bake/torch:{TAG}"])
        fetched = FetchedWheels("wheels-gfx950", "gfx950", image.ref, str(tmp_path))

        async def deps() -> set[Any]:
            return await fetched.image_refs_input.resources()

        seen["image"] = image
        return pulumi.Output.all(image.ref, fetched.image_refs_input, pulumi.Output.from_input(deps())).apply(
            lambda v: seen.update(ref=v[0], refs=v[1], deps=v[2])
        )

    program()
    return seen


def test_declared_extraction_depends_on_the_image_ref(tmp_path: Path) -> None:
    mocks = Mocks()
    seen = declare(mocks, tmp_path)
    (dynamic,) = [r for r in mocks.resources if r.typ == "pulumi-python:dynamic:Resource"]
    assert dynamic.name == "wheels-gfx950"
    assert dynamic.inputs["image_refs"] == [seen["ref"]] == seen["refs"]
    assert "@sha256:" in seen["ref"] and ":latest" not in seen["ref"]
    assert dynamic.inputs["arch"] == "gfx950" and dynamic.inputs["wheel_dir"] == "/wheels/"
    assert seen["image"] in seen["deps"]


DECLARE_IN_CHILD = """
import sys
sys.path[:0] = [{tests!r}, {root!r}]
from test_wheels_provider import Mocks, declare
from pathlib import Path
declare(Mocks(ref_tag={tag!r}), Path({tmp!r}))
"""


def declare_in_child(tag: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A refused declaration, in its own interpreter.

    Pulumi's mock runtime leaves CPython 3.11.7 unable to compile modules after
    a resource registration fails, which would break every later test here.
    """
    tests = Path(__file__).resolve().parent
    code = DECLARE_IN_CHILD.format(tests=str(tests), root=str(tests.parent), tag=tag, tmp=str(tmp_path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_declared_latest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RocmBakeError, match="pushed last"):
        FetchedWheels("w", "gfx950", "127.0.0.1:5000/rocm-bake/torch:latest", str(tmp_path))
    latest = declare_in_child("latest", tmp_path)
    assert latest.returncode != 0 and "whichever architecture was pushed last" in latest.stderr
    other = declare_in_child("gfx1201-rocm10.1.0", tmp_path)
    assert other.returncode != 0 and "tagged for gfx1201, not gfx950" in other.stderr
    ok = declare_in_child(TAG, tmp_path)
    assert ok.returncode == 0, ok.stderr

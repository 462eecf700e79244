"""``WheelIndex``: provider methods on real wheels; declaration under the mock runtime."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.dynamic import UNKNOWN
from components.index_provider import IndexInputs, WheelIndex, WheelIndexProvider
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.build import build_index
from rocm_bake.resource_types import WHEEL_INDEX

from tests.index_fixtures import ARCH_SET, arch_wheel_set, make_wheel


def props(dist: Path, arch: str = "gfx950", **extra: Any) -> dict[str, Any]:
    return {"arch": arch, "wheels_dir": str(dist / "wheels" / arch), "dist": str(dist),
            "wheel_url": None, "rocm_version": "10.1.0", **extra}


def test_create_diff_update_delete(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    wheels = dist / "wheels" / "gfx950"
    arch_wheel_set(wheels, "gfx950")
    provider = WheelIndexProvider()
    news = props(dist)
    created = provider.create(news)
    outs = created.outs
    assert created.id == str(dist / "index" / "gfx950") == outs["index_dir"]
    assert outs["wheel_count"] == len(ARCH_SET) + 1
    assert outs["index_sha256"] == build_index(ArchSet("gfx950"), wheels, dist).index_sha256  # stable digest
    assert outs["metapackage"].startswith("rocm_torch-")

    # nothing changed: no diff (and no re-hash needed to know it)
    assert provider.diff(created.id, outs, news).changes is False
    # new bytes under the same filename: a change, and update rebuilds
    nixl = wheels / "nixl-0.7.0-py3-none-any.whl"
    make_wheel(tmp_path / "new", "nixl", "0.7.0", extra_files={"nixl/more.py": b"Y = 1\n"})
    os.replace(tmp_path / "new" / nixl.name, nixl)
    diff = provider.diff(created.id, outs, news)
    assert diff.changes is True and not diff.replaces
    updated = provider.update(created.id, outs, news).outs
    assert updated["index_sha256"] != outs["index_sha256"]
    assert provider.diff(created.id, updated, news).changes is False
    # a wheel_url changes the hrefs, hence the digest
    offsite = {**news, "wheel_url": "https://example.invalid/releases/download/gfx950"}
    assert provider.diff(created.id, updated, offsite).changes is True
    # unknown inputs during preview, and moved/renamed indexes
    assert provider.diff(created.id, updated, {**news, "wheels_dir": UNKNOWN}).changes is True
    moved = provider.diff(created.id, updated, {**news, "dist": str(tmp_path / "elsewhere")})
    assert moved.changes and moved.replaces == ["dist"] and moved.delete_before_replace
    # a bad wheel appearing fails the preview with the build's own error
    make_wheel(wheels, "torchvision", "0.30.0+rocm10.1.0.gfx950", tag="py3-none-any")
    with pytest.raises(RocmBakeError, match="rule no-arch-in-version"):
        provider.diff(created.id, updated, news)
    (wheels / "torchvision-0.30.0+rocm10.1.0.gfx950-py3-none-any.whl").unlink()
    # deleted out of band: the diff notices
    provider.delete(created.id, updated)
    assert not Path(updated["index_dir"]).exists()
    assert wheels.is_dir()  # the input is not ours to delete
    assert provider.diff(created.id, updated, news).changes is True


def test_delete_leaves_a_directory_rocm_bake_did_not_write(tmp_path: Path) -> None:
    foreign = tmp_path / "index" / "gfx950"
    foreign.mkdir(parents=True)
    (foreign / "index.html").write_text("<html>someone else's</html>")
    WheelIndexProvider().delete(str(foreign), {"index_dir": str(foreign), "dist": str(tmp_path), "arch": "gfx950"})
    assert (foreign / "index.html").exists()


class Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return {}, []


def test_resource_declares_inputs_and_outputs() -> None:
    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project="rocm-bake", stack="gfx950", preview=True)
    seen: dict[str, Any] = {}

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        index = WheelIndex("index-gfx950", IndexInputs(
            arch=ArchSet("gfx950"), wheels_dir=pulumi.Output.from_input("dist/wheels/gfx950"), dist="dist",
            wheel_url="https://example.invalid/r/gfx950"))
        # wheel_count / index_sha256 are the provider's to fill: unknown until create runs
        seen["outputs"] = (index.wheel_count, index.index_sha256)
        return index.index_dir.apply(lambda v: seen.update(index_dir=v))

    program()
    (dynamic,) = [r for r in mocks.resources if r.typ == WHEEL_INDEX.token]
    assert dynamic.name == "index-gfx950"
    assert dynamic.inputs["arch"] == "gfx950" and dynamic.inputs["dist"] == "dist"
    assert dynamic.inputs["wheels_dir"] == "dist/wheels/gfx950"
    assert dynamic.inputs["wheel_url"] == "https://example.invalid/r/gfx950"
    assert seen["index_dir"] == os.path.join("dist", "index", "gfx950")
    assert all(isinstance(o, pulumi.Output) for o in seen["outputs"])


def test_check_refuses_a_bad_rocm_version_in_preview() -> None:
    """The arch arrives validated from the stack config; the provider's check covers its own inputs."""
    failures = WheelIndexProvider().check({}, {**props(Path("dist")), "rocm_version": "10.1"}).failures
    assert [f.property for f in failures] == ["rocm_version"]
    assert WheelIndexProvider().check({}, props(Path("dist"))).failures == []


def test_refresh_reports_a_deleted_or_edited_index(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    arch_wheel_set(dist / "wheels" / "gfx950", "gfx950")
    provider = WheelIndexProvider()
    news = props(dist)
    created = provider.create(news)
    assert provider.read(created.id, created.outs).outs["index_sha256"] == created.outs["index_sha256"]
    page = Path(created.id) / "index.html"
    page.write_text(page.read_text() + "<!-- edited by hand -->")
    assert provider.read(created.id, created.outs).outs["index_sha256"] is None
    assert provider.diff(created.id, created.outs, news).changes is True
    provider.update(created.id, created.outs, news)
    assert provider.diff(created.id, created.outs, news).changes is False

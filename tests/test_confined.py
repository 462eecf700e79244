"""Confined and consistent: each rule with the specific thing it guards."""

from __future__ import annotations

import shutil
from pathlib import Path

from components.index_provider import WheelIndexProvider
from rocm_bake.archset import ArchSet
from tests.index_fixtures import arch_wheel_set
from tests.registry_fixtures import registry  # noqa: F401 - fixture
from rocm_bake.archset import ArchSet


def index_props(dist: Path, arch: str = "gfx950") -> dict:
    return {"arch": arch, "wheels_dir": str(dist / "wheels" / arch), "dist": str(dist), "wheel_url": None,
            "rocm_version": "10.1.0"}


def test_deleted_wheels_are_drift_not_a_crash(tmp_path: Path) -> None:
    """With DIST/wheels/<arch> deleted, refresh and the next preview report drift (no traceback)."""
    dist = tmp_path / "dist"
    arch_wheel_set(dist / "wheels" / "gfx950", "gfx950", ["torch", "nixl"])
    provider = WheelIndexProvider()
    news = index_props(dist)
    created = provider.create(news)
    shutil.rmtree(dist / "wheels" / "gfx950")
    refreshed = provider.read(created.id, created.outs).outs
    assert refreshed["index_sha256"] is None  # refresh: the index no longer matches its inputs
    diff = provider.diff(created.id, refreshed, news)
    assert diff.changes is True and not diff.replaces


def test_the_landing_page_links_only_https_or_loopback_http() -> None:
    """A gh-pages index.json whose release_url is javascript: must not become an <a href>."""
    from rocm_bake.publish.landing import ListedIndex, render_landing

    def row(url: str) -> ListedIndex:
        return ListedIndex(dir_name="gfx950", arches=["gfx950"], rocm_version="10.1.0", wheel_count=1,
                           total_bytes=1, release_tag="wheels-gfx950-rocm10.1.0", release_url=url)

    base = "https://octo.github.io/rocm-bake/data/wheels"
    for bad in ("javascript:alert(1)", "JavaScript:alert(1)", " javascript:x", "data:text/html,x",
                "http://evil.example/r", "//evil.example/r", "vbscript:x", "https://", "https://x.example/a\nb"):
        page = render_landing([row(bad)], base).decode()
        assert "<a href" not in page.split("<tbody>")[1], bad
        assert "wheels-gfx950-rocm10.1.0" in page  # the tag is still shown, as text
    for good in ("https://github.com/octo/rocm-bake/releases/tag/wheels-gfx950-rocm10.1.0",
                 "http://127.0.0.1:8080/octo/rocm-bake/releases/tag/x"):
        assert f'<a href="{good}">' in render_landing([row(good)], base).decode()


def test_wheels_are_copied_never_linked_into_an_index(tmp_path: Path) -> None:
    """A symlinked (or hard-linked) input wheel is served as a copy: the bytes cannot change after hashing."""
    import os

    from rocm_bake.index.build import build_index

    real = tmp_path / "elsewhere"
    arch_wheel_set(real, "gfx950", ["torch", "nixl"])
    wheels = tmp_path / "dist" / "wheels" / "gfx950"
    wheels.mkdir(parents=True)
    names = sorted(p.name for p in real.glob("*.whl"))
    os.symlink(real / names[0], wheels / names[0])  # a symlink
    os.link(real / names[1], wheels / names[1])  # a hard link
    build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    files = tmp_path / "dist" / "index" / "gfx950" / "files"
    for name in names:
        served = files / name
        assert not served.is_symlink() and os.stat(served).st_nlink == 1, name
        assert served.read_bytes() == (real / name).read_bytes()
    (real / names[1]).write_bytes(b"changed after the index was built")  # in place: a link would follow
    assert (files / names[1]).read_bytes() != b"changed after the index was built"


def test_record_hashes_are_checked_at_index_build(tmp_path: Path) -> None:
    """A member changed after the wheel was built (its RECORD hash does not match) is refused."""
    import zipfile

    import pytest

    from rocm_bake.errors import RocmBakeError
    from rocm_bake.index.build import build_index

    wheels = tmp_path / "dist" / "wheels" / "gfx950"
    arch_wheel_set(wheels, "gfx950", ["nixl"])
    (good,) = wheels.glob("nixl-*.whl")
    with zipfile.ZipFile(good) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    victim = next(n for n in members if n.startswith("nixl/") and n.endswith(".py"))
    bad = wheels / good.name
    with zipfile.ZipFile(bad, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data + b"# altered\n" if name == victim else data)
    with pytest.raises(RocmBakeError, match=rf"rule record: {victim} does not match its sha256"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    with zipfile.ZipFile(bad, "w") as zf:  # an extra member RECORD never listed
        for name, data in {**members, "nixl/extra.py": b"X = 1\n"}.items():
            zf.writestr(name, data)
    with pytest.raises(RocmBakeError, match="rule record: nixl/extra.py is not listed"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")


def test_fetched_directories_follow_the_umask(registry, tmp_path: Path) -> None:  # noqa: F811 - fixture
    """DIST/wheels/<arch> follows the umask, not mkdtemp's 0700: a web server running as another user reads it."""
    import os
    import stat

    from rocm_bake.registry.extract import fetch_wheels
    from tests.registry_fixtures import Entry, Layer, push_image, wheel

    name = wheel("a")
    pushed = push_image(registry.address, "rocm-bake/torch", "gfx950-rocm10.1.0",
                        [Layer([Entry("wheels", kind="dir"), Entry(f"wheels/{name}", b"A")])])
    old = os.umask(0o022)
    try:
        fetch_wheels(ArchSet("gfx950"), [pushed.ref(registry.address)], tmp_path / "dist")
    finally:
        os.umask(old)
    out = tmp_path / "dist" / "wheels" / "gfx950"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / name).stat().st_mode) & 0o044 == 0o044  # group and others may read


def kfd_node(root: Path, n: int, text: str | None) -> Path:
    node = root / "sys/class/kfd/kfd/topology/nodes" / str(n)
    node.mkdir(parents=True)
    if text is not None:
        (node / "properties").write_text(text)
    return node


def test_which_index_names_every_node_it_cannot_read(tmp_path: Path) -> None:
    """A malformed GPU node is named, never dropped silently (the host would look like it had fewer arches)."""
    import pytest

    from rocm_bake.errors import RocmBakeError
    from rocm_bake.gpu.detect import detect_gpus

    kfd_node(tmp_path, 0, "cpu_cores_count 8\ngfx_target_version 0\n")
    kfd_node(tmp_path, 1, "gfx_target_version 90500\n")
    no_props = kfd_node(tmp_path, 2, None)
    no_version = kfd_node(tmp_path, 3, "simd_count 256\n")
    with pytest.raises(RocmBakeError) as caught:
        detect_gpus(tmp_path, lambda: None)
    message = str(caught.value)
    assert message.startswith("cannot read 2 KFD node(s)")
    assert f"{no_props / 'properties'}: missing" in message
    assert f"{no_version / 'properties'}: no gfx_target_version line" in message


def test_which_index_refuses_a_node_with_two_target_versions(tmp_path: Path) -> None:
    """A node with two gfx_target_version lines is refused: letting the last one win would hide a bad node."""
    import pytest

    from rocm_bake.errors import RocmBakeError
    from rocm_bake.gpu.detect import detect_gpus

    node = kfd_node(tmp_path, 1, "gfx_target_version 90500\ngfx_target_version 120001\n")
    with pytest.raises(RocmBakeError, match=rf"{node / 'properties'}: gfx_target_version appears 2 times"):
        detect_gpus(tmp_path, lambda: None)

"""A fat build's index: ``--arch 'gfx950;gfx1201'`` serves ``rocm-torch[device-gfx950-gfx1201]`` only."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake import cli
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import build_index, check_index
from rocm_bake.index.check import discover_arches, index_wheels, refused_extras

from tests.index_fixtures import ARCH_SET, GIT, NATIVE_TAG, ROCM, arch_wheel_set, device_files, make_wheel

FAT = "gfx950;gfx1201"


def test_arch_set_spellings() -> None:
    fat = ArchSet(FAT)
    assert fat.arches == ("gfx950", "gfx1201") and fat.is_fat
    assert (fat.spelling, fat.dir_name, fat.extra, fat.tag_suffix) == (
        "gfx950;gfx1201", "gfx950-gfx1201", "device-gfx950-gfx1201", "gfx950_gfx1201")
    assert ArchSet("gfx950-gfx1201") == fat  # the directory spelling parses back
    assert ArchSet("gfx1201;gfx950").dir_name == "gfx1201-gfx950"  # declared order, everywhere
    one = ArchSet("gfx950")
    assert (one.dir_name, one.extra, one.tag_suffix, one.is_fat) == ("gfx950", "device-gfx950", "gfx950", False)
    for bad, match in [("gfx950;gfx950", "more than once"), ("gfx950;gfx951", "unknown architecture"),
                       ("", "empty"), ("gfx950,gfx1201", "malformed")]:
        with pytest.raises(RocmBakeError, match=match):
            ArchSet(bad)
    assert ArchSet.from_dir_name(".trees") is None and ArchSet.from_dir_name("gfx950-gfx1201") == fat


def test_fat_index_layout_and_metapackage(tmp_path: Path) -> None:
    wheels = tmp_path / "dist" / "wheels" / "gfx950-gfx1201"
    arch_wheel_set(wheels, FAT)
    dist = tmp_path / "dist"
    result = build_index(ArchSet(FAT), wheels, dist)
    root = dist / "index" / "gfx950-gfx1201"
    assert result.index_dir == str(root) and result.dir_name == "gfx950-gfx1201"
    assert result.arch == FAT and result.arches == ["gfx950", "gfx1201"] and result.extra == "device-gfx950-gfx1201"
    assert result.wheel_count == len(ARCH_SET) + 1
    with zipfile.ZipFile(root / "files" / result.metapackage) as zf:
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith("METADATA"))).decode()
    assert re.findall(r"^Provides-Extra: (.*)$", metadata, re.M) == ["device-gfx950-gfx1201"]  # only the combined one
    assert metadata.count('extra == "device-gfx950-gfx1201"') == len(ARCH_SET)
    assert "rocm-bake index for gfx950;gfx1201" in (root / "index.html").read_text()
    assert discover_arches(dist) == [FAT]
    assert "device-gfx950" in refused_extras(ArchSet(FAT))
    assert "device-gfx1201" in refused_extras(ArchSet(FAT))
    assert set(index_wheels(dist, ArchSet(FAT))) == {n.replace("_", "-") for n, *_ in ARCH_SET} | {"rocm-torch"}


def test_a_wheel_missing_one_arch_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = tmp_path / "w"
    arch_wheel_set(wheels, FAT, names=["triton", "nixl"])
    make_wheel(wheels, "torch", f"2.15.0a0+{GIT}.{ROCM}", extra_files=device_files("torch", "gfx950"), tag=NATIVE_TAG)
    dist = tmp_path / "dist"
    assert cli.main(["index", "build", "--arch", FAT, "--wheels", str(wheels), "--out", str(dist)]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("rocm-bake: error: torch-2.15.0a0")
    assert "rule covers-every-arch: device code is for gfx950, missing gfx1201" in err
    assert not (dist / "index").exists() or not list((dist / "index").iterdir())
    # the same torch is fine for the gfx950 index, and a gfx1201-only one is refused naming gfx950
    single = tmp_path / "single"
    arch_wheel_set(single, "gfx950", names=["torch"])
    assert build_index(ArchSet("gfx950"), single, tmp_path / "d950").wheel_count == 2
    other = tmp_path / "other"
    arch_wheel_set(other, "gfx1201", names=["torch"])
    with pytest.raises(RocmBakeError, match="device code is for gfx1201, missing gfx950"):
        build_index(ArchSet(FAT), other, tmp_path / "d")


def test_fat_index_installs_its_combined_extra_and_refuses_single_arch_extras(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dist = tmp_path / "dist"
    wheels = dist / "wheels" / "gfx950-gfx1201"
    arch_wheel_set(wheels, FAT)
    assert cli.main(["index", "build", "--arch", FAT, "--wheels", str(wheels), "--out", str(dist), "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["dir_name"] == "gfx950-gfx1201"
    report = check_index(dist)  # discovered from DIST/index/
    assert report.ok, report.text()
    assert [(r.installer, r.kind) for r in report.results] == [
        ("pip", "install"), ("pip", "lock"), ("pip", "refusal"),
        ("uv", "install"), ("uv", "lock"), ("uv", "pylock"), ("uv", "refusal")]
    for r in report.results:
        assert r.arch == FAT
        if r.kind == "install":
            assert r.requirement == "rocm-torch[device-gfx950-gfx1201]"
            assert len(r.installed) == len(ARCH_SET) + 1
        elif r.kind in ("lock", "pylock"):  # the fat index's locks install the same set
            assert r.requirement.startswith(f"-r {dist / 'index' / 'gfx950-gfx1201'}/")
            assert len(r.installed) == len(ARCH_SET) + 1
        else:
            offered = r.requirement[len("rocm-torch["):-1].split(",")
            assert "device-gfx950" in offered and "device-gfx1201" in offered
            assert "device-gfx950-gfx1201" not in offered
            assert list(r.installed) == ["rocm-torch"] and r.warnings

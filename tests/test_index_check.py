"""``check_index``: real pip and uv installs from indexes served on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rocm_bake.ports import free_port
from rocm_bake.archset import ArchSet
from rocm_bake import cli
from rocm_bake.index import metapackage
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.build import build_index
from rocm_bake.index.check import check_index, index_wheels

from tests.index_fixtures import ARCH_SET, arch_wheel_set

ARCHES = ("gfx950", "gfx1201")


def build(dist: Path, arches: tuple[str, ...] = ARCHES) -> None:
    for arch in arches:
        arch_wheel_set(dist / "wheels" / arch, arch)
        build_index(ArchSet(arch), dist / "wheels" / arch, dist)


def test_each_index_installs_its_own_and_only_its_own(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build(dist)
    report = check_index(dist)  # arches discovered from DIST/index/
    assert report.ok, report.text()
    assert report.arches == list(ARCHES)
    assert [(r.arch, r.installer, r.kind) for r in report.results] == [
        (a, i, k) for a in ARCHES for i in ("pip", "uv")
        for k in (("install", "lock", "refusal") if i == "pip" else ("install", "lock", "pylock", "refusal"))
    ]
    for r in report.results:
        listed = {k: str(v) for k, v in index_wheels(dist, ArchSet(r.arch)).items()}
        if r.kind == "install":
            assert r.requirement == f"rocm-torch[device-{r.arch}]"
            assert r.installed == listed and len(r.installed) == len(ARCH_SET) + 1
        elif r.kind in ("lock", "pylock"):  # each lock beside the index installs exactly the same set
            name = "requirements.txt" if r.kind == "lock" else "pylock.toml"
            assert r.requirement == f"-r {dist / 'index' / r.arch / name}"
            assert r.installed == listed
        else:
            assert f"device-{r.arch}" not in r.requirement and "device-gfx1151" in r.requirement
            assert r.installed == {"rocm-torch": listed["rocm-torch"]}
            assert r.warnings  # the installer said it ignored the undeclared extras
    # the two metapackages differ: each pins its own arch's extra
    assert index_wheels(dist, ArchSet("gfx950"))["rocm-torch"] != index_wheels(dist, ArchSet("gfx1201"))["rocm-torch"]
    assert "all passed" in report.text()


def test_a_tampered_wheel_fails_the_check_readably(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build(dist, ("gfx950",))
    files = dist / "index" / "gfx950" / "files"
    victim = next(files.glob("torch-*.whl"))
    # the failure the index exists to prevent: same filename, another arch's bytes
    other = next(p for p in arch_wheel_set(tmp_path / "other", "gfx1201") if p.name == victim.name)
    victim.unlink()  # a hard link to the input: replace, never write through it
    victim.write_bytes(other.read_bytes())
    report = check_index(dist, [ArchSet("gfx950")])
    assert not report.ok
    install = [r for r in report.results if r.kind == "install"]
    assert {r.installer for r in install} == {"pip", "uv"} and not any(r.ok for r in install)
    for r in install:
        assert r.problems[0] == f"{r.installer} exited {r.returncode}" and r.returncode != 0
        assert any(p.startswith("missing torch==") for p in r.problems)
    assert all(r.ok for r in report.results if r.kind == "refusal")
    locked = [r for r in report.results if r.kind == "lock"]  # the lock refuses the swapped bytes by their hash
    assert {r.installer for r in locked} == {"pip", "uv"} and not any(r.ok or r.installed for r in locked)
    assert all("hash" in r.output_tail.lower() for r in locked), [r.output_tail for r in locked]
    text = report.text()
    assert "FAILED" in text and "missing torch==" in text and "index check: FAILED" in text


def test_an_index_declaring_another_arch_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metapackage bug that let gfx1201's extra install gfx950's wheels must fail the check."""
    real = metapackage.requirement_lines

    def leaky(arch: ArchSet, pins: dict) -> list[str]:  # type: ignore[type-arg]
        return real(arch, pins) + real(ArchSet("gfx1201"), pins)

    dist = tmp_path / "dist"
    with monkeypatch.context() as m:
        m.setattr(metapackage, "requirement_lines", leaky)
        build(dist, ("gfx950",))
    report = check_index(dist, [ArchSet("gfx950")], installers=("uv",))
    install, locked, pylocked, refusal = report.results
    assert install.ok and locked.ok and pylocked.ok and not refusal.ok and not report.ok
    assert refusal.problems[0] == "the gfx950 index did not refuse other arches' extras cleanly"
    assert any(p.startswith("unexpected torch==") for p in refusal.problems)


def test_cli_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = tmp_path / "dist"
    build(dist, ("gfx1201",))
    capsys.readouterr()  # the build's own progress
    # an unreachable extra index neither hangs nor changes the outcome: every pin is in the index
    dead = f"http://127.0.0.1:{free_port()}/simple"
    assert cli.main(["index", "check", str(dist), "--arch", "gfx1201", "--extra-index-url", dead, "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["ok"] and out["extra_index_url"] == dead and len(out["results"]) == 7
    assert captured.err == ""  # --json: no progress
    assert cli.main(["index", "check", str(dist), "--no-extra-index", "--installer", "uv"]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "gfx1201  uv  installs its own" in text and "gfx1201  pip" not in text
    assert "gfx1201  uv  installs its hash lock" in text and "gfx1201  uv  installs its pylock.toml" in text
    # each install check shows on stderr when it starts and how it ended
    assert captured.err.splitlines()[:2] == ["index check gfx1201: uv install ...",
                                             captured.err.splitlines()[1]]
    assert re.search(r"^index check gfx1201: uv install ok \(9 installed, [\d.]+ s\)$", captured.err, re.M)
    assert re.search(r"^index check gfx1201: uv refusal of other extras ok \(1 installed", captured.err, re.M)
    assert cli.main(["index", "check", str(dist), "--no-extra-index", "--installer", "uv", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(["index", "check", str(dist), "--arch", "gfx950", "--no-extra-index"]) == 2
    assert "no rocm-bake index for gfx950" in capsys.readouterr().err
    assert cli.main(["index", "check", str(dist), "--python", str(tmp_path / "no-python")]) == 2
    err = capsys.readouterr().err
    assert "--python" in err and "no such interpreter" in err and "Traceback" not in err


def test_nothing_to_check(tmp_path: Path) -> None:
    with pytest.raises(RocmBakeError, match="no per-arch indexes found"):
        check_index(tmp_path)
    with pytest.raises(RocmBakeError, match="unknown installer"):
        build(tmp_path / "d", ("gfx950",))
        check_index(tmp_path / "d", installers=("conda",))

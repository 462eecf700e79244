"""``python -m rocm_torch``: installed from a real index with pip and with uv, run against fake KFD hosts.

Each case asserts the verdict, its reason and the exit code: 0 every GPU
covered, 1 one is not (or the install is not what the index served), 2 it
cannot tell.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake import cli
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import checker_copy
from rocm_bake.index.build import build_index
from rocm_bake.index.check import _run, install_cmd, make_venv, serve, uv_binary
from rocm_bake.index.metapackage import build_metapackage
from rocm_bake.install_line import locked_line

from tests.index_fixtures import arch_wheel_set
from tests.kfd_fixtures import host, kfd_tree

BASE = "https://wheels.example.test/data/wheels"
INSTALLERS = ("pip", "uv")
TIMEOUT = 300


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gfx950 index (recording BASE), and gfx1201's wheels beside it: same filenames, other device code."""
    root = tmp_path_factory.mktemp("dist")
    arch_wheel_set(root / "wheels" / "gfx950", "gfx950")
    arch_wheel_set(root / "wheels" / "gfx1201", "gfx1201")
    build_index(ArchSet("gfx950"), root / "wheels" / "gfx950", root, index_base=BASE)
    return root


def install(dist: Path, installer: str, venv: Path) -> Path:
    python = make_venv(installer, venv, sys.executable, TIMEOUT)
    with serve(dist) as served:
        proc = _run(install_cmd(installer, python, f"{served.url}/index/gfx950/", "rocm-torch[device-gfx950]", None),
                    TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return python


@pytest.fixture(scope="module", params=INSTALLERS)
def venv(request: pytest.FixtureRequest, dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv per installer for the read-only cases."""
    return install(dist, request.param, tmp_path_factory.mktemp(f"venv-{request.param}") / "v")


def check(python: Path, root: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = subprocess.run([str(python), "-I", "-m", "rocm_torch", "--sysfs-root", str(root), "--json"],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, json.loads(proc.stdout)


def site_packages(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3*/site-packages"))


def test_matching_host_is_ok(venv: Path, tmp_path: Path) -> None:
    code, report = check(venv, host(tmp_path, ["gfx950", "gfx950"]))
    assert (code, report["verdict"]) == (0, "ok"), report["reason"]
    assert report["reason"] == "every GPU here (gfx950) is covered by this install"
    assert report["index"] == {"arches": ["gfx950"], "dir_name": "gfx950", "base": BASE,
                               "rocm-torch": report["index"]["rocm-torch"]}
    torch = next(d for d in report["distributions"] if d["name"] == "torch")
    assert torch["targets"] == ["gfx950"] and torch["problems"] == [] and torch["files"] > 3
    assert [g["gfx"] for g in report["gpus"]] == ["gfx950", "gfx950"]


def test_host_of_another_arch_gets_that_arch_index_locked_line(venv: Path, tmp_path: Path) -> None:
    code, report = check(venv, host(tmp_path, ["gfx1201"]))
    assert (code, report["verdict"]) == (1, "does-not-fit")
    assert report["reason"] == "gfx1201 is not covered by the gfx950 index (it carries code for gfx950)"
    assert report["next_steps"] == [f"for gfx1201: {locked_line(BASE, 'gfx1201')}"]


def test_mixed_host_names_the_uncovered_arch_only(venv: Path, tmp_path: Path) -> None:
    code, report = check(venv, host(tmp_path, ["gfx950", "gfx1201"]))
    assert (code, report["verdict"]) == (1, "does-not-fit")
    assert report["reason"].startswith("gfx1201 is not covered by the gfx950 index")
    assert report["next_steps"][0] == f"for gfx1201: {locked_line(BASE, 'gfx1201')}"
    assert "GPUs of 2 arches (gfx1201, gfx950)" in report["next_steps"][1]


def test_no_kfd_cannot_tell(venv: Path, tmp_path: Path) -> None:
    code, report = check(venv, tmp_path)
    assert (code, report["verdict"]) == (2, "cannot-tell")
    assert report["reason"] == f"no AMD GPU found (looked at {tmp_path}/sys/class/kfd/kfd/topology/nodes)"
    assert "python -m rocm_torch --sysfs-root DIR" in report["next_steps"][0]


def test_unreadable_node_cannot_tell_with_which_index_message(venv: Path, tmp_path: Path) -> None:
    code, report = check(venv, kfd_tree(tmp_path, {"0": "gfx_target_version 0\n", "1": b"\x00\x01binary"}))
    assert (code, report["verdict"]) == (2, "cannot-tell")
    assert report["reason"].startswith("cannot read 1 KFD node(s), so the GPUs of this host are not known: ")
    assert "binary data" in report["reason"]


def test_text_report_and_bad_sysfs_root(venv: Path, tmp_path: Path) -> None:
    proc = subprocess.run([str(venv), "-I", "-m", "rocm_torch", "check", "--sysfs-root",
                           str(host(tmp_path, ["gfx950"]))], capture_output=True, text=True, timeout=60)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and lines[0].startswith("index: gfx950 (arches gfx950), rocm-torch ")
    assert lines[0].endswith(f"from {BASE}/gfx950/") and lines[1] == "GPUs: gfx950 (kfd node 1)"
    assert lines[-1] == "ok: every GPU here (gfx950) is covered by this install"
    code, report = check(venv, tmp_path / "nowhere")
    assert code == 2 and report["reason"].startswith(f"{tmp_path / 'nowhere'}: not a directory")


def test_checker_writes_nothing_and_importing_torch_does_not_import_it(venv: Path, tmp_path: Path) -> None:
    site = site_packages(venv)
    before = sorted(p for p in site.rglob("*") if p.is_file())
    check(venv, host(tmp_path, ["gfx950"]))
    after = sorted(p for p in site.rglob("*") if p.is_file())
    new = [p.relative_to(site) for p in after if p not in before]
    # the interpreter's own bytecode of the two files it runs before the checker can say otherwise
    assert all(p.parent == Path("rocm_torch/__pycache__") and p.name.split(".")[0] in ("__init__", "__main__")
               for p in new), new
    proc = subprocess.run([str(venv), "-I", "-c", "import sys, torch; print('rocm_torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr


@pytest.mark.parametrize("installer", INSTALLERS)
def test_tampered_installed_file_does_not_fit(installer: str, dist: Path, tmp_path: Path) -> None:
    python = install(dist, installer, tmp_path / "v")
    kernel = site_packages(python) / "torch" / "kernels" / "k0.co"
    kernel.write_bytes(kernel.read_bytes()[:-1] + b"!")
    code, report = check(python, host(tmp_path / "host", ["gfx950"]))
    assert (code, report["verdict"]) == (1, "does-not-fit")
    assert report["reason"] == ("the installed files are not what the index served (torch: torch/kernels/k0.co "
                                "does not hash to its RECORD entry (changed after install))")
    assert report["next_steps"] == [f"reinstall from this index: {locked_line(BASE, 'gfx950')} --force-reinstall"]


@pytest.mark.parametrize("installer", INSTALLERS)
def test_wheel_with_another_arch_code_objects_does_not_fit(installer: str, dist: Path, tmp_path: Path) -> None:
    """The failure the index exists to prevent: gfx1201's torch (same filename, same version) in gfx950's env."""
    python = install(dist, installer, tmp_path / "v")
    other = next((dist / "wheels" / "gfx1201").glob("torch-*.whl"))
    if installer == "uv":
        cmd = [uv_binary(), "pip", "install", "--python", str(python), "--no-deps", "--reinstall",
               "--no-index", str(other)]
    else:
        cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--force-reinstall",
               "--no-index", str(other)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert proc.returncode == 0, proc.stderr
    code, report = check(python, host(tmp_path / "host", ["gfx950"]))
    assert (code, report["verdict"]) == (1, "does-not-fit")
    assert report["reason"] == ("torch carries code objects for gfx1201, none for gfx950: "
                                "not the gfx950 index's wheels")
    torch = next(d for d in report["distributions"] if d["name"] == "torch")
    assert torch["problems"] == []  # its files do hash to its (other) RECORD: only its code objects tell


def test_metapackage_is_reproducible_and_records_its_base() -> None:
    from packaging.version import Version

    pins = {"torch": Version("2.15.0")}
    one, two = (build_metapackage(ArchSet("gfx950;gfx1201"), pins, BASE) for _ in range(2))
    assert one.data == two.data and one.filename == two.filename
    unbased = build_metapackage(ArchSet("gfx950;gfx1201"), pins)
    assert unbased.version != one.version  # the record is part of what the version hashes


def test_copy_refuses_a_module_that_is_not_standard_library_only() -> None:
    with pytest.raises(RocmBakeError, match=r"rocm_bake/x\.py: imports pydantic, which is neither"):
        checker_copy.check_imports("x.py", "import json\nfrom pydantic import BaseModel\n")
    with pytest.raises(RocmBakeError, match=r"imports urllib\.request, which can reach the network"):
        checker_copy.check_imports("x.py", "def f():\n    import urllib.request\n")
    checker_copy.check_imports("x.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pydantic\n")


def test_index_build_records_its_base_and_a_new_base_rebuilds(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    wheels, out = tmp_path / "w", tmp_path / "d"
    arch_wheel_set(wheels, "gfx950", names=["triton"])

    def recorded(*extra: str) -> dict:  # type: ignore[type-arg]
        args = ["index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out", str(out), "--json"]
        assert cli.main([*args, *extra]) == 0
        meta = json.loads(capsys.readouterr().out)["metapackage"]
        with zipfile.ZipFile(out / "index" / "gfx950" / "files" / meta) as zf:
            return json.loads(zf.read("rocm_torch/index.json"))

    assert recorded()["index_base"] is None
    assert recorded("--index-base", BASE + "/")["index_base"] == BASE  # not answered by the warm path
    assert recorded("--index-base", BASE) == recorded("--index-base", BASE + "/")
    assert cli.main(["index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out", str(out),
                     "--index-base", "http://example.com/w"]) == 2
    assert "--index-base: plain http is refused off loopback" in capsys.readouterr().err


def test_without_a_recorded_base_the_lines_say_so(tmp_path: Path) -> None:
    from rocm_bake.fit_check import Built, check as fit_check
    from rocm_bake.install_line import BASE_PLACEHOLDER

    built = Built(arches=["gfx950"], dir_name="gfx950", version="0+h0", pins={}, index_base=None)
    report = fit_check(built, host(tmp_path, ["gfx1201"]))
    assert report.exit == 1 and report.next_steps == [f"for gfx1201: {locked_line(BASE_PLACEHOLDER, 'gfx1201')}"]
    assert "from gfx950 (its URL was not recorded: the index was built without --index-base)" in report.text()


def test_real_shared_object_bundles_are_read(tmp_path: Path) -> None:
    """A gcc-built ``_C.so`` whose ``.hip_fatbin`` holds a plain and a CCOB bundle, as clang writes them."""
    from tests.index_fixtures import ARCH_SET, NATIVE_TAG, make_wheel
    from tests.offload_fixtures import bundle, ccob, hip_ids, shared_object

    fatbin = bundle(hip_ids("gfx950")) + ccob(bundle(hip_ids("gfx950")), "zlib")
    so = shared_object(tmp_path / "build", "_C", fatbin).read_bytes()
    wheels = tmp_path / "dist" / "wheels" / "gfx950"
    arch_wheel_set(wheels, "gfx950", names=["triton"])
    name, version, _, requires = next(row for row in ARCH_SET if row[0] == "torch")
    make_wheel(wheels, name, version, requires, {"torch/_C.so": so}, tag=NATIVE_TAG)
    build_index(ArchSet("gfx950"), wheels, tmp_path / "dist", index_base=BASE)
    python = install(tmp_path / "dist", "pip", tmp_path / "v")
    code, report = check(python, host(tmp_path / "host", ["gfx950"]))
    torch = next(d for d in report["distributions"] if d["name"] == "torch")
    assert (code, torch["targets"], torch["unreadable"]) == (0, ["gfx950"], []), report["reason"]

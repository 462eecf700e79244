"""A squatter on the public index: the printed lines install this index's packages, the lock refuses the copy.

A stand-in public index on loopback (PyPI's role) serves what anyone could
upload under our names: a higher ``rocm-torch`` and ``torch``, and a
same-version, different-content copy of a pinned pure-Python wheel
(``triton_kernels==1.0.0``), beside an honest dependency (``numpy``) the
index really needs from it. Each line ``rocm-bake index lines`` prints is
run as printed, with only the public index's URL swapped for the stand-in's.
"""

from __future__ import annotations

import hashlib
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake.ports import free_port
from rocm_bake.archset import ArchSet
from rocm_bake.commands.index import index_lines
from rocm_bake.index.build import build_index
from rocm_bake.index.check import _run, check_index, installed, make_venv, serve, uv_binary
from rocm_bake.index.defaults import PUBLIC_INDEX_ENV
from rocm_bake.install_line import CHECK_HINT, LOCK_FILE, PYPI
from tests.index_fixtures import arch_wheel_set, make_wheel

SQUATTED = b"SQUATTED = True\n"


def simple_index(root: Path, wheels: list[Path]) -> None:
    """A PEP 503 index of ``wheels`` under ``root/simple/``, files under ``root/files/``."""
    from packaging.utils import canonicalize_name, parse_wheel_filename

    (root / "files").mkdir(parents=True, exist_ok=True)
    pages: dict[str, list[str]] = {}
    for wheel in wheels:
        (root / "files" / wheel.name).write_bytes(wheel.read_bytes())
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        name = canonicalize_name(parse_wheel_filename(wheel.name)[0])
        pages.setdefault(name, []).append(f'<a href="../../files/{wheel.name}#sha256={sha}">{wheel.name}</a>')
    for name, links in pages.items():
        (root / "simple" / name).mkdir(parents=True, exist_ok=True)
        (root / "simple" / name / "index.html").write_text("<html><body>" + "<br>".join(links) + "</body></html>")
    (root / "simple" / "index.html").write_text(
        "<html><body>" + "".join(f'<a href="{n}/">{n}</a>' for n in pages) + "</body></html>")


def squatter(root: Path, same_version_copy: bool = True) -> None:
    made = root / "made"
    wheels = [
        make_wheel(made, "numpy", "2.0.0"),  # what the index really needs from the public index
        make_wheel(made, "rocm-torch", "99.0"),
        make_wheel(made, "torch", "99.0"),
    ]
    if same_version_copy:
        wheels.append(make_wheel(made, "triton_kernels", "1.0.0", ["triton"], {"triton_kernels/squat.py": SQUATTED}))
    simple_index(root, wheels)


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[str]:
    """The squatter's public index, served on loopback: its ``/simple`` URL."""
    squatter(tmp_path / "public")
    with serve(tmp_path / "public") as served:
        yield f"{served.url}/simple"


@pytest.fixture
def dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stand_in: str) -> Path:
    """The gfx950 index whose ``nixl`` needs ``numpy`` from the public index, its lock resolved against the
    squatter's stand-in (its numpy is the real one; its other uploads squat our names)."""
    dist = tmp_path / "dist"
    wheels = dist / "wheels" / "gfx950"
    arch_wheel_set(wheels, "gfx950")
    make_wheel(wheels, "nixl", "0.7.0", ["numpy>=2"])  # the same file name: now with a public dependency
    monkeypatch.setenv(PUBLIC_INDEX_ENV, f"{stand_in}/")
    result = build_index(ArchSet("gfx950"), wheels, dist)
    assert result.lock == LOCK_FILE and result.lock_missing is None
    assert result.exposed == ["nixl==0.7.0", "nixl-rocm==0.7.0", "triton-kernels==1.0.0"]
    lock = (dist / "index" / "gfx950" / LOCK_FILE).read_text()
    assert "numpy==2.0.0" in lock and "triton-kernels==1.0.0" in lock and lock.count("--hash=sha256:") == 10, lock
    return dist


def run_line(line: str, venv: Path) -> str:
    """``line`` as a user runs it, into ``venv`` (only the user's configuration stripped)."""
    words = shlex.split(line)
    if words[:3] == ["uv", "pip", "install"]:
        cmd = [uv_binary(), "pip", "install", "--python", str(venv), "--no-config", "--no-cache", *words[3:]]
    else:
        assert words[:2] == ["pip", "install"], line
        cmd = [sys.executable, "-m", "pip", "--python", str(venv), "install", "--isolated", "--no-cache-dir",
               "--disable-pip-version-check", *words[2:]]
    proc = _run(cmd, 300)
    assert proc.returncode == 0, f"{line}\n{proc.stdout}{proc.stderr}"
    return proc.stdout + proc.stderr


def squatted(venv_python: Path) -> bool:
    return any(venv_python.parent.parent.glob("lib/python*/site-packages/triton_kernels/squat.py"))


def test_every_printed_line_installs_this_index_and_the_lock_refuses_the_copy(dist: Path, tmp_path: Path,
                                                                             stand_in: str) -> None:
    from rocm_bake.index.check import index_wheels

    ours = {k: str(v) for k, v in index_wheels(dist, ArchSet("gfx950")).items()}
    with serve(dist) as served:
        printed = index_lines(dist, "gfx950", f"{served.url}/index")
        lines = [line.strip() for line in printed if "pip install" in line]
        assert printed[len(lines)].strip() == CHECK_HINT and len(lines) == 3
        locked, pip_line, uv_line = (line.replace(PYPI, stand_in) for line in lines)
        assert "--require-hashes" in locked and pip_line.startswith("pip ") and uv_line.startswith("uv ")
        for name, line, installer in (("locked", locked, "pip"), ("pip", pip_line, "pip"), ("uv", uv_line, "uv")):
            venv = make_venv(installer, tmp_path / f"venv-{name}", sys.executable, 120)
            run_line(line, venv)
            got = installed(venv, 60)
            assert got == {**ours, "numpy": "2.0.0"}, f"{name} line installed {got}"  # never 99.0
            if name != "pip":  # pip's merged candidates may take the same-version copy: only the lock refuses it
                assert not squatted(venv), f"the {name} line installed the squatter's triton_kernels 1.0.0"
        report = check_index(dist, [ArchSet("gfx950")], installers=("uv",), extra_index_url=stand_in)
    assert not report.ok and all(r.ok for r in report.results), report.text()
    assert report.exposed == [f"gfx950: triton-kernels==1.0.0 is also offered by {stand_in}: pip could "
                              f"install that file instead (the hash lock refuses it; register the name or rename it)"]


def test_no_public_index_means_no_lock_and_no_hash_locked_line(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    dead = f"http://127.0.0.1:{free_port()}/simple/"
    dist = tmp_path / "dist"
    wheels = dist / "wheels" / "gfx950"
    arch_wheel_set(wheels, "gfx950")
    make_wheel(wheels, "nixl", "0.7.0", ["numpy>=2"])
    monkeypatch.setenv(PUBLIC_INDEX_ENV, dead)
    result = build_index(ArchSet("gfx950"), wheels, dist)
    assert result.lock is None and result.lock_missing and dead in result.lock_missing
    assert "\n" not in result.lock_missing
    assert (dist / "index" / "gfx950" / "files").is_dir() and not (dist / "index" / "gfx950" / LOCK_FILE).exists()
    printed = "\n".join(index_lines(dist, "gfx950"))
    assert "--require-hashes" not in printed and "==2.15.0a0+h" in printed and "no hash lock" in printed


def test_a_relative_dist_gets_both_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's program passes DIST as ``dist``: uv runs in the staging directory, so no path may be relative."""
    from rocm_bake.install_line import PYLOCK_FILE

    monkeypatch.chdir(tmp_path)
    arch_wheel_set(Path("wheels"), "gfx950", ["torch", "triton"])
    result = build_index(ArchSet("gfx950"), Path("wheels"), Path("dist"))
    assert result.lock == LOCK_FILE and result.lock_missing is None
    pylock = (tmp_path / "dist" / "index" / "gfx950" / PYLOCK_FILE).read_text()
    assert 'path = "files/torch-' in pylock and "file://" not in pylock
    report = check_index(Path("dist"), installers=("uv",))  # `make demo` checks `dist`: the locks too
    assert report.ok and [r.kind for r in report.results] == ["install", "lock", "pylock", "refusal"], report.text()

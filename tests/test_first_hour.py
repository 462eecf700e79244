"""The first hour: from the README to a working setup without guessing, and back.

* ``make setup`` installs from ``requirements.lock`` (hashes, every pin of
  pyproject.toml, the right markers), and its stamp exists only after every
  step succeeded; ``rocm-bake`` is reachable from ``.tools/bin``;
* ``make help`` lists every target, ``make clean`` names what it removes;
* no ``--help`` shows reST markup; ``which-index`` without a GPU says what to
  do next; ``plan`` labels its placeholder digests; a landing page built
  locally shows local install lines;
* a setup waiting on another's engine lock says who holds it and for how long.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rocm_bake.archset import ArchSet
from rocm_bake.cli import build_parser, command_modules, main
from tests.index_fixtures import arch_wheel_set

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
MAKEFILES = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]
#: The Pythons rocm-bake supports (requires-python >= 3.11) and the next ones a marker may split on.
PYTHONS = ("3.11", "3.12", "3.13", "3.14", "3.15")


# ------------------------------------------------------------------ the lock


def pyproject_pins() -> list[Requirement]:
    """Every requirement pyproject.toml states: dependencies, every extra, the build backend."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    texts = [*data["project"]["dependencies"], *data["build-system"]["requires"]]
    for extra in data["project"]["optional-dependencies"].values():
        texts += extra
    return [Requirement(text) for text in texts]


def locked() -> dict[str, tuple[str, Marker | None, list[str]]]:
    """requirements.lock as {name: (version, marker, hashes)}; every entry must be an exact pin."""
    entries: dict[str, tuple[str, Marker | None, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        spec, *hashes = re.split(r"\s+--hash=", line)
        req = Requirement(spec)
        pins = [s for s in req.specifier if s.operator == "=="]
        assert len(pins) == 1 and len(req.specifier) == 1, f"requirements.lock: {spec!r} is not an exact pin"
        entries[canonicalize_name(req.name)] = (pins[0].version, req.marker, hashes)
    return entries


def environments(python: str) -> dict[str, str]:
    return {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix"}


def applies(marker: Marker | None, python: str) -> bool:
    return marker is None or marker.evaluate(environments(python))


def test_the_lock_covers_every_pin_of_pyproject_with_its_marker() -> None:
    lock = locked()
    pins = pyproject_pins()
    assert any(canonicalize_name(p.name) == "backports-zstd" for p in pins)
    for pin in pins:
        name = canonicalize_name(pin.name)
        assert name in lock, f"{pin.name} is pinned in pyproject.toml but not in requirements.lock: run `make lock`"
        version, marker, hashes = lock[name]
        assert pin.specifier.contains(version, prereleases=True), (
            f"{pin.name}: pyproject.toml says {pin.specifier}, requirements.lock has {version}: run `make lock`")
        for python in PYTHONS:  # the lock installs it exactly where pyproject.toml asks for it
            assert applies(marker, python) == applies(pin.marker, python), (
                f"{pin.name} on Python {python}: pyproject.toml marker {pin.marker}, lock marker {marker}")
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), f"{pin.name}: no hashes"


def test_backports_zstd_is_only_for_pythons_before_3_14() -> None:
    version, marker, _ = locked()["backports-zstd"]
    assert [p for p in PYTHONS if applies(marker, p)] == ["3.11", "3.12", "3.13"], marker
    from rocm_bake.zstd import zstd

    assert zstd().__name__ == ("compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd")


def test_every_locked_entry_has_hashes_and_the_venv_holds_the_locked_versions() -> None:
    """make setup installed exactly the lock: each entry that applies here is installed at its locked version."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    for name, (version, marker, hashes) in locked().items():
        assert hashes, f"requirements.lock: {name} has no --hash"
        if not applies(marker, python) or name == "pip":
            continue
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{name}=={version} is in requirements.lock but not installed: run `make setup`")
        assert installed == version, f"{name}: the venv has {installed}, requirements.lock {version}: run `make setup`"


def test_setup_installs_the_lock_with_hashes_and_the_project_without_deps() -> None:
    recipe = make_dry_run(ROOT, "-B", ".venv/bin/rocm-bake")
    assert "pip install --quiet --require-hashes -r requirements.lock" in recipe, recipe
    assert "pip install --quiet --no-deps --no-build-isolation -e ." in recipe, recipe
    assert "npm" not in make_dry_run(ROOT, "-B", "setup"), "make setup still runs npm"


# ------------------------------------------------------------- the venv stamp


def make_dry_run(where: Path, *args: str) -> str:
    done = subprocess.run(["make", "-n", *args], cwd=where, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tiny_wheel(out: Path) -> Path:
    """A real, installable wheel (one module), so a lock can name a local file with its true hash."""
    path = out / "tinydep-1.0-py3-none-any.whl"
    files = {"tinydep.py": b"VALUE = 1\n",
             "tinydep-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n",
             "tinydep-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in files) + "tinydep-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("tinydep-1.0.dist-info/RECORD", record)
    return path


PYPROJECT = """\
[build-system]
requires = []
build-backend = "tinybackend"
backend-path = ["."]
[project]
name = "tinyproj"
version = "1.0"
"""

#: An in-tree PEP 660 backend: the scratch venv needs no setuptools (the real lock pins the real backend).
BACKEND = '''
import pathlib, tomllib, zipfile

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    root = pathlib.Path(__file__).resolve().parent
    name = tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"]
    if not name.isidentifier():
        raise SystemExit(f"invalid project name {name!r}")
    info = "tinyproj-1.0.dist-info"
    files = {"tinyproj.pth": f"{root}\\n",
             f"{info}/METADATA": "Metadata-Version: 2.1\\nName: tinyproj\\nVersion: 1.0\\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
             f"{info}/entry_points.txt": "[console_scripts]\\nrocm-bake = tinyproj:main\\n"}
    wheel = "tinyproj-1.0-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{info}/RECORD", "".join(f"{p},,\\n" for p in files) + f"{info}/RECORD,,\\n")
    return wheel
'''


def copy_makefiles(root: Path) -> None:
    """The Makefile, mk/ and what it runs with the system Python (the checkout record, `make down`'s stops)."""
    shutil.copy(ROOT / "Makefile", root / "Makefile")
    shutil.copytree(ROOT / "mk", root / "mk")
    local = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "rocm_bake" / "local").rglob("*.py"))]  # make down's
    for name in ("rocm_bake/__init__.py", "rocm_bake/checkout.py", "rocm_bake/errors.py", "rocm_bake/lazy_face.py",
                 "rocm_bake/loopback.py", "rocm_bake/manifests.py", "rocm_bake/ports.py",
                 "rocm_bake/registry/__init__.py", "rocm_bake/registry/tls.py", *local):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)


@pytest.fixture(scope="module")
def scratch_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Makefile and mk/ over a tiny project whose lock holds one local wheel (no network needed)."""
    root = tmp_path_factory.mktemp("checkout")
    copy_makefiles(root)
    (root / "tinyproj.py").write_text("def main():\n    print('tiny 1.0')\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tinybackend.py").write_text(BACKEND)
    return root


def make_venv(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INDEX": "1", "XDG_CACHE_HOME": str(root / "cache")}
    env.pop("PIP_FIND_LINKS", None)
    return subprocess.run(["make", ".venv/bin/rocm-bake", ".tools/bin/rocm-bake", f"PYTHON={sys.executable}"],
                          cwd=root, capture_output=True, text=True, timeout=300, env=env)


def write_lock(root: Path, wheel: Path, digest: str) -> None:
    (root / "requirements.lock").write_text(f"tinydep @ {wheel.as_uri()} --hash=sha256:{digest}\n")
    time.sleep(0.01)


def test_the_venv_stamp_is_written_only_after_every_step_succeeded(scratch_checkout: Path) -> None:
    root = scratch_checkout
    stamp = root / ".venv" / "bin" / "rocm-bake"
    wheel = tiny_wheel(root)
    good = hashlib.sha256(wheel.read_bytes()).hexdigest()

    write_lock(root, wheel, good)
    done = make_venv(root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert stamp.is_file()
    assert subprocess.run([str(root / ".tools" / "bin" / "rocm-bake")], capture_output=True, text=True,
                          timeout=60).stdout == "tiny 1.0\n"

    write_lock(root, wheel, "0" * 64)  # a lock whose hash the file does not match: the install step fails
    done = make_venv(root)
    assert done.returncode != 0 and "THESE PACKAGES DO NOT MATCH THE HASHES" in done.stderr, done.stderr
    assert not stamp.exists(), "a failed install left the stamp: the next make setup would skip the venv"

    write_lock(root, wheel, good)
    (root / "pyproject.toml").write_text(PYPROJECT.replace('name = "tinyproj"', 'name = "tiny-proj"'))
    done = make_venv(root)  # the lock installs; the project itself does not
    assert done.returncode != 0, done.stdout
    assert not stamp.exists(), "a failed project install left the stamp"

    (root / "pyproject.toml").write_text(PYPROJECT)
    done = make_venv(root)  # fixed: every step runs again and the stamp comes back
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--require-hashes -r requirements.lock" in done.stdout and stamp.is_file()


def test_rocm_bake_is_reachable_from_tools_bin() -> None:
    link = ROOT / ".tools" / "bin" / "rocm-bake"
    if not link.exists():
        pytest.fail(f"{link} is missing: run `make setup` (it links the CLI beside the engines)")
    env = {**os.environ, "PATH": f"{ROOT / '.tools' / 'bin'}:/usr/bin:/bin"}
    done = subprocess.run(["rocm-bake", "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("rocm-bake "), done.stdout + done.stderr


# ------------------------------------------------------------ make help/clean


def phony_targets() -> list[str]:
    targets: list[str] = []
    for path in MAKEFILES:
        for line in path.read_text().splitlines():
            if line.startswith(".PHONY:"):
                targets += line.split(":", 1)[1].split()
    return targets


def test_make_help_lists_every_phony_target_with_one_line() -> None:
    done = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = {}
    for line in done.stdout.splitlines()[1:]:
        name, _, text = line.strip().partition(" ")
        listed[name] = text.strip()
    targets = phony_targets()
    assert {"setup", "demo", "test", "clean", "help", "lock"} <= set(targets), targets
    for target in targets:
        assert listed.get(target), f"make help does not list {target!r} with a description:\n{done.stdout}"


def test_make_clean_names_what_it_removes_and_what_it_keeps(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    root.mkdir()
    copy_makefiles(root)
    for path in (".venv/bin/python", ".tools/bin/pulumi", "build/lib/x", "rocm_bake.egg-info/PKG-INFO",
                 "dist/index/gfx950/index.html", ".rocm-bake/passphrase", "cache/rocm-bake/engines/x"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x")
    done = subprocess.run(["make", "clean"], cwd=root, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "XDG_CACHE_HOME": str(root / "cache")})
    assert done.returncode == 0, done.stderr
    for removed in (".venv", ".tools", "build", "rocm_bake.egg-info"):
        assert f"clean: removing {removed} (" in done.stdout, done.stdout
        assert not (root / removed).exists()
    for kept in ("dist", ".rocm-bake", f"{root}/cache/rocm-bake"):
        assert f"clean: kept {kept} (" in done.stdout, done.stdout
    assert (root / "dist" / "index" / "gfx950" / "index.html").exists()


# ---------------------------------------------------------------- the CLI text


def every_parser() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The top-level parser and every command's and subcommand's, each as the CLI builds it for that command."""
    yield "rocm-bake", build_parser([])

    def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        yield path, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{path} {name}")

    for name in sorted(command_modules()):
        parser = build_parser([name])
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                yield from walk(action.choices[name], f"rocm-bake {name}")


def test_no_help_text_shows_rest_markup() -> None:
    seen = []
    for path, parser in every_parser():
        text = parser.format_help()
        seen.append(path)
        for pattern in (r"``", r"`[^`\s][^`]*`", r":[a-z]+:`", r"^\s*\.\. ", r"\*\*"):
            assert not re.search(pattern, text, re.M), f"{path} --help shows reST ({pattern}):\n{text}"
    assert {"rocm-bake", "rocm-bake index page", "rocm-bake wheels fetch", "rocm-bake publish",
            "rocm-bake which-index"} <= set(seen), seen
    assert len(seen) >= 18, seen


def test_which_index_without_a_gpu_says_what_to_do_next(tmp_path: Path) -> None:
    from rocm_bake.gpu.which import configured_indexes, render, run_which_index

    def no_rocminfo() -> None:
        return None

    base = "https://example.invalid/wheels"
    result = run_which_index(tmp_path, base, no_rocminfo)
    text = render(result)
    assert text.startswith("no AMD GPU found"), text
    assert "rocm-bake which-index --sysfs-root DIR" in text, text
    for arch_set in configured_indexes():
        assert arch_set.dir_name in text, f"{arch_set.dir_name} missing from the arch list:\n{text}"
    assert (f"pip install --require-hashes --index-url {base}/ARCH/ --extra-index-url https://pypi.org/simple "
            f"-r {base}/ARCH/requirements.txt") in text, text
    assert f"every index, with its size and its pip and uv lines: {base}/" in text, text
    assert result.next_steps and not result.install


def test_plan_labels_placeholder_digests() -> None:
    from rocm_bake.plan_runtime import placeholder_digest

    done = subprocess.run([sys.executable, "-m", "rocm_bake", "plan", "gfx950"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    images = next(line for line in done.stdout.splitlines() if line.startswith("  images: "))
    refs = json.loads(images.split(": ", 1)[1])
    assert refs and all(ref.endswith("@sha256:<placeholder>") for ref in refs.values()), refs
    assert placeholder_digest("torch-gfx950") not in done.stdout
    assert "sha256:<placeholder>: plan builds nothing" in done.stdout


def test_a_landing_page_built_locally_shows_local_install_lines(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from rocm_bake.index.build import build_index

    dist = tmp_path / "dist"
    arch_wheel_set(dist / "wheels" / "gfx950", "gfx950", ["torch"])
    build_index(ArchSet("gfx950"), dist / "wheels" / "gfx950", dist)
    assert main(["index", "page", str(dist), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    local = (dist / "index").resolve().as_uri()
    assert f"--index-url {local}/gfx950/ " in page, page
    assert f"rocm-bake which-index --index-base {local}" in page
    assert "github.io" not in page, "a locally built page points at the published site"


# --------------------------------------------------------------- the lock wait


def test_a_lock_wait_names_the_holder_and_how_long(tmp_path: Path) -> None:
    """The holder keeps the lock until the waiter has reported twice: no sleep decides what the waiter sees."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "ROCM_BAKE_LOCK_REPORT_SECONDS": "1"}
    code = "import sys, time; sys.path.insert(0, 'tools'); import engines; engines.hold_lock(); print('held', flush=True); "
    release = tmp_path / "release"
    hold = f"import pathlib\nwhile not pathlib.Path({str(release)!r}).exists(): time.sleep(0.05)"
    holder = subprocess.Popen([sys.executable, "-c", code + hold, "holder-marker", "TOKEN=s3cr3t"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    waiter_err = tmp_path / "waiter.err"
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with open(waiter_err, "w") as err:
            waiter = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                      stderr=err, text=True)
        deadline = time.monotonic() + 30
        while len(waiter_err.read_text().splitlines()) < 2:  # refreshed while waiting, not one line then silence
            assert waiter.poll() is None, f"the waiter ended while the lock was held: {waiter_err.read_text()}"
            assert time.monotonic() < deadline, f"two wait reports within 30 s: {waiter_err.read_text()!r}"
            time.sleep(0.05)
    finally:
        release.touch()
        holder.wait(timeout=60)
    waiter_out, _ = waiter.communicate(timeout=60)
    waiter = subprocess.CompletedProcess(waiter.args, waiter.returncode, waiter_out, waiter_err.read_text())
    assert waiter.returncode == 0 and waiter.stdout == "held\n", waiter.stderr
    lines = waiter.stderr.splitlines()
    assert len(lines) >= 2, waiter.stderr  # refreshed while waiting, not one line then silence
    for line in lines:
        assert f"held by pid {holder.pid} in {ROOT} (" in line and "holder-marker TOKEN=…" in line, line
        assert "s3cr3t" not in line  # a value on the holder's command line is never shown
    held = [int(m[1]) for m in (re.search(r"for (\d+) s; waited", line) for line in lines) if m]
    assert len(held) == len(lines) and held == sorted(held) and held[-1] > held[0], lines


def test_the_salt_is_stripped_in_one_place_the_program() -> None:
    """The program strips the salt (rocm_bake/run_env.py), for make and a plain ``pulumi`` alike: no Makefile, no
    wrapper and no script under tools/ strips it besides."""
    sys.path.insert(0, str(ROOT / "tools"))
    import engines

    for name, text in [*((p.name, p.read_text()) for p in MAKEFILES), ("the pulumi wrapper", engines.WRAPPER),
                       *((p.name, p.read_text(errors="replace")) for p in (ROOT / "tools").iterdir() if p.is_file())]:
        assert "encryptionsalt" not in text and "strip-salt" not in text, f"{name} strips the salt besides the program"
    stripping = [p.relative_to(ROOT) for base in ("rocm_bake", "components") for p in (ROOT / base).rglob("*.py")
                 if "encryptionsalt: " in p.read_text()]
    assert stripping == [Path("rocm_bake/run_env.py")], stripping
    assert "strip_salt(root)" in (ROOT / "components" / "stack.py").read_text(), "the program no longer strips it"


def test_the_program_keeps_a_salt_only_where_secure_values_need_it(tmp_path: Path) -> None:
    from rocm_bake.run_env import strip_salt

    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = "config:\n  rocm-bake:arch: gfx950\n"
    secret = "config:\n  rocm-bake:githubToken:\n    secure: v1:AAAA\n"
    (stacks / "Pulumi.a.yaml").write_text("encryptionsalt: v1:abc:def\n" + text)
    (stacks / "Pulumi.b.yaml").write_text(text)
    (stacks / "Pulumi.c.yaml").write_text("encryptionsalt: v1:abc:def\n" + secret)
    assert strip_salt(tmp_path, {}) == [stacks / "Pulumi.a.yaml"], "a plain pulumi run must leave no salt behind"
    assert (stacks / "Pulumi.c.yaml").read_text().startswith("encryptionsalt: "), \
        "without the fallback a stripped salt could be minted anew, and the secure value would not decrypt"
    assert strip_salt(tmp_path, {"PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true"}) == [stacks / "Pulumi.c.yaml"]
    assert [(stacks / f"Pulumi.{n}.yaml").read_text() for n in "abc"] == [text, text, secret]

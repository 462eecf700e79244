"""A team's installed engines are used, and a team's own `pulumi` either works or names the fix.

The real thing: the engines ``make setup`` built are copied to stand for a
team's installs (``pulumi`` with its language host beside it, ``buildkitd``,
``buildctl``, ``versitygw``, ``actionlint`` in a bin directory on PATH,
``docker buildx``'s plugin in DOCKER_CONFIG, the docker-build plugin in
PULUMI_HOME), with no Go on PATH. In a scratch HOME with no engine cache,
setup takes every one of them and builds nothing; a fresh clone's plain
``make demo`` then passes over them on the real engine. In that clone, the
team's own ``pulumi preview``/``up`` of the demo stack, without this
checkout's BUILDX_CONFIG and SSL_CERT_FILE, stops with one line naming the
export; with that export it works, and the tracked stack file stays as
committed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine_fixtures import ROOT, engine
from tests.test_checkouts import STEERING, processes_inside

sys.path.insert(0, str(ROOT / "tools"))
import engines as engines_tool  # noqa: E402  (tools/engines.py: make setup's own code)

DEMO_STACK = "demo-gfx950"
#: PATH without Go (/usr/local/go/bin): a setup that tried to build an engine would stop, saying so.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def installs(where: Path) -> dict[str, str]:
    """Copies of this checkout's engine builds laid out as a team installs them; the environment that finds them.

    The CLI's directory holds its language host, exec script and dynamic-provider plugin (as Pulumi's release
    does); plugins are plain binaries (no watchdog: that is rocm-bake's way of installing them).
    """
    for name in ("pulumi", "buildkitd", "buildctl", "buildx", "versitygw", "actionlint"):
        engine(name)
    bin_dir, docker, pulumi_home = where / "bin", where / "docker", where / "pulumi-home"
    for directory in (bin_dir, docker / "cli-plugins"):
        directory.mkdir(parents=True)
    built = {e.name: engines_tool.cache_dir(e) for e in engines_tool.ENGINES}
    for eng in engines_tool.ENGINES:
        if eng.plugin is not None or eng.name == "buildx":
            continue
        for name in (*eng.binaries, *(extra[2] for extra in eng.extras)):
            source = built[eng.name] / (f"{name}.watched" if name in eng.watched else name)
            shutil.copy2(source, bin_dir / name)
    shutil.copy2(built["buildx"] / "buildx", docker / "cli-plugins" / "docker-buildx")
    plugin = next(e for e in engines_tool.ENGINES if e.plugin)
    plugin_dir = pulumi_home / "plugins" / f"resource-{plugin.plugin}-v{plugin.version}"
    plugin_dir.mkdir(parents=True)
    shutil.copy2(built[plugin.name] / f"{plugin.binaries[0]}.watched", plugin_dir / plugin.binaries[0])
    return {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "DOCKER_CONFIG": str(docker), "PULUMI_HOME": str(pulumi_home)}


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith((*STEERING, "SSL_CERT_FILE", "XDG_CACHE_HOME"))}
    env.update(extra)
    return env


def engine_lines(output: str) -> dict[str, str]:
    """``engines: NAME VERSION: how`` lines by engine name."""
    return {m[1]: m[2] for m in re.finditer(r"^engines: (\S+) \S+: (.*)$", output, re.M) if m[1] != "all"}


def test_the_compatibility_rule() -> None:
    """The pin's major version and not older: a later release of the line is taken, an older one never."""
    assert engines_tool.compatible("3.274.0", "3.274.0") and engines_tool.compatible("3.280.1", "3.274.0")
    assert not engines_tool.compatible("3.273.9", "3.274.0") and not engines_tool.compatible("4.0.0", "3.274.0")
    assert engines_tool.compatible("0.39.0", "0.38.2") and not engines_tool.compatible("0.38.1", "0.38.2")
    assert engines_tool.parse_version("github.com/docker/buildx v0.38.2 abc") == (0, 38, 2)
    assert engines_tool.parse_version("buildkitd github.com/moby/buildkit v0.34.2 ") == (0, 34, 2)
    assert not engines_tool.compatible("go1.26.0", "1.7.12"), "a Go version is no tool version"


def setup_copy(where: Path) -> Path:
    """A checkout's tools/ alone: what tools/engines.py reads and the .tools/ it writes."""
    shutil.copytree(ROOT / "tools", where / "tools")
    return where


@pytest.mark.services
def test_a_scratch_home_with_engines_installed_builds_nothing(tmp_path: Path) -> None:
    env = clean_env(HOME=str(tmp_path / "home"), **installs(tmp_path / "installed"))
    assert shutil.which("go", path=env["PATH"]) is None, "Go must be out of reach: nothing may be built"
    checkout = setup_copy(tmp_path / "checkout")
    done = subprocess.run([sys.executable, "tools/engines.py"], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = engine_lines(done.stdout)
    assert set(lines) == {e.name for e in engines_tool.ENGINES}, done.stdout
    assert all(how.startswith("installed, ") for how in lines.values()), done.stdout
    assert lines["buildx"].startswith("installed, docker buildx ("), lines["buildx"]
    assert "not built" not in done.stdout and "building" not in done.stdout
    assert not (tmp_path / "home" / ".cache" / "rocm-bake" / "engines").exists(), "an engine cache was made"
    installed = tmp_path / "installed"
    for name in ("buildkitd", "buildctl", "buildx", "versitygw", "actionlint"):
        assert (checkout / ".tools" / "bin" / name).resolve().is_relative_to(installed), name
    for name in ("pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python"):
        assert (checkout / ".tools" / "cli" / name).resolve() == installed / "bin" / name, name
    version = subprocess.run([str(checkout / ".tools" / "bin" / "pulumi"), "version"], env=env, capture_output=True,
                             text=True, timeout=60)
    assert version.stdout.strip() == f"v{engines_tool.PULUMI_VERSION}", version.stdout + version.stderr


@pytest.mark.services
def test_an_older_engine_is_built_and_engines_build_builds_all(tmp_path: Path) -> None:
    """An installed engine older than the pin is named and passed over; ENGINES=build takes none installed
    (the builds come from this machine's engine cache: nothing is compiled here)."""
    other = tmp_path / "other-checkout" / ".tools" / "bin"  # another checkout's links to the cached builds
    other.mkdir(parents=True)
    (other / "buildx").symlink_to(engine("buildx").resolve())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "actionlint").write_text("#!/bin/sh\necho 1.6.26\n")
    (bin_dir / "actionlint").chmod(0o755)
    checkout = setup_copy(tmp_path / "checkout")
    env = clean_env(PATH=f"{other}:{bin_dir}:{os.environ['PATH']}")
    argv = [sys.executable, "tools/engines.py", "--only", "actionlint"]
    done = subprocess.run([*argv, "--only", "buildx"], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert engine_lines(done.stdout)["buildx"].startswith("built from tools/buildx, "), \
        "another checkout's link to the engine cache is our build, not a team's install"
    actionlint = next(e for e in engines_tool.ENGINES if e.name == "actionlint")
    assert engine_lines(done.stdout)["actionlint"] == (
        f"built from tools/actionlint, {engines_tool.cache_dir(actionlint)} "
        f"({bin_dir / 'actionlint'} is 1.6.26; the pin is 1.7.12)"), done.stdout
    (bin_dir / "actionlint").write_text("#!/bin/sh\necho 1.7.20\n")
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert engine_lines(done.stdout)["actionlint"] == f"installed, {bin_dir / 'actionlint'}", done.stdout
    done = subprocess.run([*argv, "--engines", "build"], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=300)
    assert engine_lines(done.stdout)["actionlint"].endswith("(ENGINES=build)"), done.stdout
    assert (checkout / ".tools" / "bin" / "actionlint").resolve().is_relative_to(engines_tool.cache_root())


# -- a fresh clone's make demo over the installed engines, then the team's own pulumi -----------------------


#: This module's fixture that runs make demo on the real engine (tests/conftest.py marks its tests ``services``).
SERVICE_FIXTURES = {"demo"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A fresh clone of HEAD whose plain `make demo` ran over the installed engines (no Go on PATH)."""
    work = tmp_path_factory.mktemp("installed-demo")
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = clean_env(**installs(work / "installed"))
    log = tmp_path_factory.mktemp("installed-demo-log") / "make.log"
    try:
        with log.open("w") as out:
            done = subprocess.run(["make", "demo"], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=1800)
        yield {"clone": clone, "env": env, "log": log.read_text(errors="replace"), "rc": done.returncode,
               "work": work}
    finally:
        subprocess.run(["make", "down"], cwd=clone, env=env, capture_output=True, timeout=120)
        leftover = processes_inside(clone)
        shutil.rmtree(work, ignore_errors=True)
        assert leftover == [], leftover


def test_make_demo_passes_over_the_installed_engines(demo: dict) -> None:
    assert demo["rc"] == 0, demo["log"][-6000:]
    lines = engine_lines(demo["log"])
    assert lines and all(how.startswith("installed, ") for how in lines.values()), lines
    assert "index check: all passed" in demo["log"], demo["log"][-3000:]


def plain_pulumi(demo: dict, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The team's own `pulumi` (the installed one, not .tools/bin/pulumi) in the clone, with the team's own
    backend and passphrase (here: the clone's) and none of the checkout's BUILDX_CONFIG or SSL_CERT_FILE."""
    clone = demo["clone"]
    base = {**demo["env"], "PULUMI_BACKEND_URL": f"file://{clone / '.rocm-bake' / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(clone / ".rocm-bake" / "passphrase"),
            "PULUMI_SKIP_UPDATE_CHECK": "true", **env}
    return subprocess.run(["pulumi", *args, "-s", DEMO_STACK, "--non-interactive"], cwd=clone, env=base,
                          capture_output=True, text=True, timeout=900)


def tracked_changes(clone: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=clone, capture_output=True,
                          text=True, check=True).stdout


def test_plain_pulumi_names_the_export_then_works(demo: dict) -> None:
    assert demo["rc"] == 0, "the demo did not pass: see test_make_demo_passes_over_the_installed_engines"
    clone = demo["clone"]
    for command in (("preview",), ("up", "--yes")):
        done = plain_pulumi(demo, *command)
        said = done.stdout + done.stderr
        assert done.returncode != 0, said[-3000:]
        fixes = re.findall(r"run `(export BUILDX_CONFIG=\S+ SSL_CERT_FILE=\S+)` in this shell first, "
                           rf"or use {re.escape(str(clone))}/\.tools/bin/pulumi", said)
        assert len(set(fixes)) == 1, said[-3000:]
        assert "Traceback" not in said and "no builder found" not in said, said[-3000:]
        assert tracked_changes(clone) == "", "the run left a salt (or else) in a tracked file"
    exports = dict(word.split("=", 1) for word in shlex.split(fixes[0])[1:])
    assert exports["BUILDX_CONFIG"] == str(clone / ".rocm-bake" / "buildx")
    assert (clone / ".rocm-bake" / "tls" / "ca.pem").read_text().strip() in Path(exports["SSL_CERT_FILE"]).read_text()
    done = plain_pulumi(demo, "preview", "--expect-no-changes", **exports)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    done = plain_pulumi(demo, "up", "--yes", **exports)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert tracked_changes(clone) == "", "plain pulumi up left the salt in the tracked stack file"


# -- the rule itself, without an engine ----------------------------------------------------------------------


def test_the_run_environment_check_names_only_what_this_checkouts_stack_lacks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rocm_bake.checkout import ensure_checkout
    from rocm_bake.registry.tls import ensure_tls
    from rocm_bake.run_env import missing_environment

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    record, _ = ensure_checkout(tmp_path)
    tls = ensure_tls(tmp_path / ".rocm-bake" / "tls")
    buildx = str(tmp_path / ".rocm-bake" / "buildx")
    plain = {"HOME": str(tmp_path / "home")}
    line = missing_environment(tmp_path, record.builder, record.registry, plain)
    assert line == (f"this checkout's builder {record.builder!r} is registered in {buildx} and registry "
                    f"{record.registry} serves TLS from {tls.ca_cert}, which this pulumi run is not given: run "
                    f"`export BUILDX_CONFIG={buildx} SSL_CERT_FILE={tls.bundle}` in this shell first, "
                    f"or use {tmp_path}/.tools/bin/pulumi")
    given = {**plain, "BUILDX_CONFIG": buildx, "SSL_CERT_FILE": str(tls.bundle)}
    assert missing_environment(tmp_path, record.builder, record.registry, given) is None
    only_ca = missing_environment(tmp_path, record.builder, record.registry, {**given, "SSL_CERT_FILE": "/nonexistent"})
    assert only_ca is not None and "builder" not in only_ca.split(",")[0] and "serves TLS" in only_ca
    # the team's farm and registry (named in the stack file) are the user's to set up: nothing to say
    assert missing_environment(tmp_path, "the-farm", "registry.example:5000", plain) is None
    # a copy of the program (no checkout record) has no builder or registry of its own
    assert missing_environment(tmp_path / "copy", record.builder, record.registry, plain) is None

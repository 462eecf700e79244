"""The engines ``make setup`` builds and ``make builder`` starts, used for real (nothing mocked).

* ``.tools/bin/pulumi`` is a Pulumi v3 CLI whose language host runs a Python
  program with the project's venv, offline, without a PATH warning;
* the resource plugins are registered at the versions the Python SDKs pin
  (pyproject.toml), so the engine never needs to download one; a pinned SDK
  whose plugin no Go module on the proxy provides is declared as such in
  tools/engines.py (``NOT_BUILDABLE``), never silently missing;
* BuildKit, registered as a buildx ``remote`` builder, builds an image ``FROM
  scratch`` and then one ``FROM`` it with a ``RUN`` step it executes itself,
  and pushes both to a loopback registry over plain HTTP.

A missing engine fails loudly, naming ``make setup`` / ``make builder``.
"""

from __future__ import annotations

import contextlib
import filecmp
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import tomllib
import zlib
from pathlib import Path

import pytest

from tests.engine_fixtures import BuildKit, engine, live_processes
from tests.engine_fixtures import Registry, buildkit, registry  # noqa: F401  (module fixtures)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import engines as engines_tool  # noqa: E402  (tools/engines.py: make setup's own code)

#: Python SDK distribution -> plugin name (the SDK asks the engine for this plugin at this version).
SDK_PLUGINS = {"pulumi-docker-build": "docker-build", "pulumi-command": "command", "pulumi-github": "github"}
BUSYBOX = Path("/bin/busybox")


def offline_env(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update({"PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
                "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi"))})
    return env


def pinned_sdks() -> dict[str, str]:
    """``name==version`` pins of the project's Pulumi SDKs, from pyproject.toml."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = {}
    for dep in deps:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;]+)\s*", dep)
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def test_pulumi_cli_is_v3() -> None:
    result = subprocess.run([str(engine("pulumi")), "version"], capture_output=True, text=True, env=offline_env(),
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"v3\.\d+\.\d+\S*", result.stdout.strip()), result.stdout


def test_plugins_registered_at_the_pinned_sdk_versions() -> None:
    pins = pinned_sdks()
    assert "pulumi-docker-build" in pins, pins
    result = subprocess.run([str(engine("pulumi")), "plugin", "ls", "--json"], capture_output=True, text=True,
                            env=offline_env(), timeout=60)
    assert result.returncode == 0, result.stderr
    installed = {(p["name"], p["version"]) for p in json.loads(result.stdout or "[]") if p.get("kind") == "resource"}
    built = {e.plugin: e.version for e in engines_tool.ENGINES if e.plugin}
    declared = dict(key.split(" ", 1) for key in engines_tool.NOT_BUILDABLE)
    for sdk, plugin in SDK_PLUGINS.items():
        if sdk not in pins:
            continue
        if plugin in built:
            assert built[plugin] == pins[sdk], f"tools/engines.py builds {plugin} {built[plugin]}, " \
                                               f"pyproject.toml pins {sdk}=={pins[sdk]}"
        else:
            assert declared.get(plugin) == pins[sdk], (
                f"pyproject.toml pins {sdk}=={pins[sdk]} but tools/engines.py neither builds plugin {plugin} at "
                f"that version nor declares it in NOT_BUILDABLE")
    assert "docker-build" in built
    missing = sorted(f"{name} {version}" for name, version in built.items() if (name, version) not in installed)
    assert not missing, f"plugins not registered: {missing}: run `make setup`"


def test_cli_and_language_host_are_this_checkouts_own() -> None:
    """The wrapper runs ``.tools/cli/pulumi``, beside which sits the host built from this checkout's tools/.

    Beside the shared cached CLI, the last checkout to run setup would pick the
    host for every checkout on the machine.
    """
    wrapper = engine("pulumi").read_text()
    cli = engines_tool.CLI / "pulumi"
    assert f"exec '{cli}'" in wrapper, wrapper
    assert cli.is_file() and not cli.is_symlink(), f"{cli} must be a hard link or copy (the CLI resolves symlinks)"
    host_engine = next(e for e in engines_tool.ENGINES if e.name == "pulumi-language-python")
    taken = taken_engines()[host_engine.name]
    if taken["source"] == "built":  # else the host installed beside the team's CLI (tests/test_installed_engines.py)
        ours = engines_tool.cache_dir(host_engine)
        assert taken["files"] == {name: str(ours / name) for name in engines_tool.installed_files(host_engine)}
    for name, target in taken["files"].items():
        beside = engines_tool.CLI / name
        assert beside.resolve() == Path(target).resolve(), \
            f"{beside} is {beside.resolve()}, not what setup took ({target}): run `make setup`"


def taken_engines() -> dict:
    """What setup took for each engine (.tools/engines.json): installed or built, and its files."""
    if not engines_tool.RECORD.is_file():
        pytest.fail(f"{engines_tool.RECORD} is missing: run `make setup`")
    return json.loads(engines_tool.RECORD.read_text())


def test_every_plugin_we_install_runs_behind_the_watchdog() -> None:
    """Registered and placed as tools/plugin-watchdog under the plugin's name, the plugin itself beside it
    (every plugin setup built: one installed by the team is used as it is)."""
    watchdog = engines_tool.WATCHDOG.read_bytes()
    taken = taken_engines()
    for eng in engines_tool.ENGINES:
        if taken[eng.name]["source"] != "built":
            continue  # a team's own install runs as the team installed it
        where = engines_tool.plugin_dir(eng) if eng.plugin else engines_tool.CLI
        for name in eng.watched:
            assert (where / name).read_bytes() == watchdog, f"{where / name} is not tools/plugin-watchdog"
            ours = engines_tool.cache_dir(eng) / f"{name}.watched"
            assert filecmp.cmp(where / f"{name}.watched", ours, shallow=False), \
                f"{where / name}.watched is not this checkout's build {ours}: run `make setup`"
    assert {name for eng in engines_tool.ENGINES for name in eng.watched} == \
        {"pulumi-resource-docker-build", "pulumi-resource-pulumi-python"}


def test_the_docker_build_plugin_ends_when_the_engines_pipe_closes() -> None:
    """As the engine starts a plugin: its own process group, a pipe on stdin; the port comes first on stdout.

    The engine closing that pipe (or dying: the kernel closes it) ends the plugin and its watchdog at once;
    upstream's binary alone serves on (its provider.Main waits for SIGINT only).
    """
    docker_build = next(e for e in engines_tool.ENGINES if e.name == "docker-build")
    plugin = engines_tool.plugin_dir(docker_build) / "pulumi-resource-docker-build"
    proc = subprocess.Popen([str(plugin)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=offline_env(), start_new_session=True)
    try:
        port = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert port.isdigit(), f"{plugin} printed {port!r}, not its port"
        proc.stdin.close()  # type: ignore[union-attr]
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{plugin} still runs 10 s after the engine's pipe on its stdin closed")
        assert code == -signal.SIGTERM, f"{plugin} ended with {code}, not with the watchdog's TERM"
        deadline = time.monotonic() + 10
        while left := live_processes(group=proc.pid):
            assert time.monotonic() < deadline, f"left of {plugin}'s process group 10 s after its stdin closed: {left}"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


SMOKE_PROGRAM = """
import pulumi
from pulumi.dynamic import CreateResult, Resource, ResourceProvider


class Echo(ResourceProvider):
    def create(self, props):
        return CreateResult(id_="echo-1", outs={"text": props["text"].upper()})


class EchoResource(Resource):
    text: pulumi.Output[str]

    def __init__(self, name, text):
        super().__init__(Echo(), name, {"text": text})


echo = EchoResource("hello", "engines-ok")
pulumi.export("out", echo.text)
"""


def test_python_program_runs_offline_on_the_real_engine(tmp_path: Path) -> None:
    """A program with a dynamic resource (as components/ use): up, then preview --expect-no-changes.

    The stack has no config at all (the host must still hand the SDK a JSON
    object), the engine may download nothing, and the host beside the CLI
    runs without a PATH warning.
    """
    prog, state = tmp_path / "prog", tmp_path / "state"
    prog.mkdir(), state.mkdir()
    (prog / "Pulumi.yaml").write_text(
        f"name: engines-smoke\nruntime:\n  name: python\n  options:\n    virtualenv: {ROOT / '.venv'}\n")
    (prog / "__main__.py").write_text(SMOKE_PROGRAM)
    env = {**offline_env(), "PULUMI_BACKEND_URL": f"file://{state}", "PULUMI_CONFIG_PASSPHRASE": "test"}
    pulumi = str(engine("pulumi"))

    def run(*args: str) -> subprocess.CompletedProcess:
        result = subprocess.run([pulumi, *args, "--non-interactive"], cwd=prog, env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, f"pulumi {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result

    run("stack", "init", "t")
    up = run("up", "--yes", "--skip-preview")
    assert "warning: using pulumi-language-python from $PATH" not in up.stdout + up.stderr
    assert json.loads(run("stack", "output", "--json").stdout) == {"out": "ENGINES-OK"}
    run("preview", "--expect-no-changes")


# -- BuildKit through buildx -------------------------------------------------------------------------------


def buildx_build(kit: BuildKit, context: Path, ref: str) -> None:
    argv = [str(engine("buildx")), "build", "--builder", kit.builder, "--progress", "plain", "--provenance=false",
            "--output", f"type=image,name={ref},push=true", str(context)]
    result = subprocess.run(argv, env={**os.environ, **kit.env()}, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"buildx build {ref} failed:\n{result.stderr[-4000:]}"


def layer_files(registry: str, repository: str, tag: str) -> dict[str, bytes]:
    """Every regular file of the pushed image's layers (later layers win), read back from the registry."""
    from rocm_bake.registry.client import RegistryClient
    from rocm_bake.registry.reference import parse_ref

    files: dict[str, bytes] = {}
    with RegistryClient(registry) as client:
        image = client.resolve_image(parse_ref(f"{registry}/{repository}:{tag}"))
        for layer in image.layers:
            with client.open_blob(repository, layer) as reader:
                blob = reader.read()
            if blob[:2] == b"\x1f\x8b":
                blob = zlib.decompress(blob, 16 + zlib.MAX_WBITS)
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                for member in tar.getmembers():
                    if member.isfile():
                        files[member.name.lstrip("./")] = tar.extractfile(member).read()  # type: ignore[union-attr]
    return files


def test_buildkit_builds_from_scratch_runs_a_step_and_pushes(tmp_path: Path, registry: Registry,
                                                             buildkit: BuildKit) -> None:
    if not BUSYBOX.is_file():
        pytest.fail(f"{BUSYBOX} is missing: `make setup` installs busybox-static (the test's base image)")
    base = tmp_path / "base"
    base.mkdir()
    shutil.copy(BUSYBOX, base / "busybox")
    (base / "Dockerfile").write_text(
        "FROM scratch\nCOPY busybox /bin/busybox\nCOPY busybox /bin/sh\n")
    buildx_build(buildkit, base, f"{registry.address}/engines-test/base:1")
    derived = tmp_path / "derived"
    derived.mkdir()
    (derived / "Dockerfile").write_text(
        f"FROM {registry.address}/engines-test/base:1\n"
        "RUN [\"/bin/busybox\", \"sh\", \"-c\", \"echo ran-by-buildkit > /x && /bin/busybox uname -s > /kernel\"]\n")
    buildx_build(buildkit, derived, f"{registry.address}/engines-test/derived:1")

    files = layer_files(registry.address, "engines-test/derived", "1")
    assert files["x"] == b"ran-by-buildkit\n", "the RUN step's output is in the pushed image"
    assert files["kernel"] == b"Linux\n"
    assert files["bin/busybox"] == BUSYBOX.read_bytes(), "the base's layer is under the derived image"


def test_plugin_rm_says_the_plugin_cache_is_every_checkouts(tmp_path: Path) -> None:
    """`pulumi plugin rm` through the wrapper names what it takes from the others: PULUMI_HOME is per user."""
    env = {**offline_env(), "PULUMI_HOME": str(tmp_path / "pulumi-home")}
    done = subprocess.run([str(engine("pulumi")), "plugin", "rm", "resource", "rocm-bake-none", "9.9.9", "--yes"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.stderr.splitlines()[0] == (
        f"pulumi plugin rm: {tmp_path / 'pulumi-home'}/plugins is shared: every checkout on this host (and your "
        "other Pulumi projects) uses what you remove there, and fails without it until its make setup registers "
        "it again"), done.stderr

"""The real engines for the lifecycle tests: the Pulumi CLI, BuildKit and buildx, built by ``make setup``.

Each test session gets its own ``buildkitd`` (state, socket and config in a
temp dir, so it may push to the session's loopback registry over plain
HTTP) registered as a buildx ``remote`` builder — the same path a build farm
takes — in a private ``BUILDX_CONFIG``. Nothing here is mocked: a missing
engine fails the test, naming ``make setup``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS_BIN = ROOT / ".tools" / "bin"
VENV_BIN = ROOT / ".venv" / "bin"


def engine(name: str) -> Path:
    """A binary ``make setup`` installs into ``.tools/bin``; fail loudly when it is missing."""
    path = TOOLS_BIN / name
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: run `make setup` (it builds the Pulumi CLI, plugins, buildkitd and buildx)")
    return path


@dataclass
class BuildKit:
    """A running buildkitd and the buildx remote builder that names it."""

    builder: str
    socket: Path
    buildx_config: Path
    process: subprocess.Popen
    log: Path

    def env(self) -> dict[str, str]:
        return {"BUILDX_CONFIG": str(self.buildx_config)}

    def buildx(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([str(engine("buildx")), *args], env={**os.environ, **self.env()}, check=check,
                              capture_output=True, text=True)


def buildkitd_config(registries: list[str]) -> str:
    """Plain HTTP to the loopback registries (they are ours and on this machine only)."""
    lines = ["[worker.oci]", "  enabled = true", "[worker.containerd]", "  enabled = false"]
    for registry in registries:
        lines += [f'[registry."{registry}"]', "  http = true", "  insecure = true"]
    return "\n".join(lines) + "\n"


def start_buildkit(work: Path, registries: list[str], name: str | None = None) -> BuildKit:
    """Start buildkitd (runc worker) on a unix socket under ``work`` and register it with buildx."""
    work.mkdir(parents=True, exist_ok=True)
    socket = work / "buildkitd.sock"
    config = work / "buildkitd.toml"
    config.write_text(buildkitd_config(registries))
    log = work / "buildkitd.log"
    process = subprocess.Popen(
        [str(engine("buildkitd")), "--root", str(work / "root"), "--addr", f"unix://{socket}",
         "--config", str(config)],
        stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not socket.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"buildkitd did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    builder = name or f"rocm-bake-test-{secrets.token_hex(3)}"
    kit = BuildKit(builder, socket, work / "buildx", process, log)
    created = kit.buildx("create", "--name", builder, "--driver", "remote", f"unix://{socket}", check=False)
    if created.returncode != 0:
        stop_buildkit(kit)
        pytest.fail(f"buildx create failed: {created.stderr}")
    return kit


def stop_buildkit(kit: BuildKit) -> None:
    kit.buildx("rm", kit.builder, check=False)
    try:
        os.killpg(kit.process.pid, signal.SIGTERM)
        kit.process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        kit.process.kill()


@dataclass
class PulumiProject:
    """A copy of the Pulumi program in a temp dir, with its own file backend and passphrase.

    A copy, so the lifecycle may edit a Dockerfile and write stack salts
    without touching the repository.
    """

    dir: Path
    state: Path
    env: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def run(self, *args: str, stack: str | None = None, check: bool = True, extra_env: dict[str, str] | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
        argv = [str(engine("pulumi")), *args, "--non-interactive"]
        if stack:
            argv += ["--stack", stack]
        result = subprocess.run(argv, cwd=self.dir, env={**self.env, **(extra_env or {})}, capture_output=True,
                                text=True, timeout=timeout)
        self.log.append(f"$ {' '.join(argv[1:])}\n{result.stdout}\n{result.stderr}")
        if check and result.returncode != 0:
            pytest.fail(f"pulumi {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-6000:]}\n"
                        f"{result.stderr[-6000:]}")
        return result


def copy_project(dest: Path) -> Path:
    """The program's files (Pulumi.yaml, __main__.py, stacks, demo Dockerfiles) with an absolute venv."""
    dest.mkdir(parents=True)
    pulumi_yaml = (ROOT / "Pulumi.yaml").read_text().replace("virtualenv: .venv", f"virtualenv: {ROOT / '.venv'}")
    (dest / "Pulumi.yaml").write_text(pulumi_yaml)
    shutil.copy(ROOT / "__main__.py", dest / "__main__.py")
    shutil.copytree(ROOT / "stacks", dest / "stacks")
    shutil.copytree(ROOT / "dockerfiles", dest / "dockerfiles")
    return dest


def project_env(state: Path, kit: BuildKit, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "GITHUB_"))}
    env.update(kit.env())
    env.update({
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi")),
        "PATH": f"{TOOLS_BIN}:{VENV_BIN}:{env.get('PATH', '')}",
        "PIP_CONFIG_FILE": os.devnull,
    })
    return env


@pytest.fixture(scope="session")
def engines_built() -> None:
    for name in ("pulumi", "buildkitd", "buildx"):
        engine(name)


def free_port_registry(tmp: Path) -> Iterator[str]:
    from rocm_bake.errors import RocmBakeError
    from rocm_bake.registry.server import start_registry

    try:
        running = start_registry(tmp)
    except RocmBakeError as exc:
        pytest.fail(f"cannot start the real registry these tests need: {exc}")
    try:
        yield running.address
    finally:
        running.stop()

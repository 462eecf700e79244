"""The real engines for the lifecycle tests: the Pulumi CLI, BuildKit and buildx, built by ``make setup``.

Each test session gets its own ``buildkitd`` (state, socket and config in a
temp dir, so it may push to the session's loopback registry: over TLS
trusting the test's own CA, as ``make registry`` serves, or plain HTTP)
registered as a buildx ``remote`` builder — the same path a build farm
takes — in a private ``BUILDX_CONFIG``. Nothing here is mocked: a missing
engine fails the test, naming ``make setup``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import services
from tests.registry_fixtures import Registry, registry  # noqa: F401 - the one registry fixture

ROOT = Path(__file__).resolve().parent.parent
from rocm_bake.local import builder as builder_tool  # noqa: E402  (make builder's own code)
from rocm_bake.local import state_server  # noqa: E402  (make state-server's own code)
TOOLS_BIN = ROOT / ".tools" / "bin"
VENV_BIN = ROOT / ".venv" / "bin"
#: What a HEAD of a manifest by digest accepts: OCI and Docker, index and single-platform.
MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])


def engine(name: str) -> Path:
    """A binary ``make setup`` installs into ``.tools/bin``; fail loudly when it is missing."""
    services.require(f"the engine {name}")
    path = TOOLS_BIN / name
    if not (path.exists() and os.access(path, os.X_OK)):
        pytest.fail(f"{path} is missing: run `make setup` (it builds the Pulumi CLI, plugins, buildkitd, buildx and actionlint)")
    return path


@dataclass
class BuildKit:
    """A running buildkitd and the buildx remote builder that names it (rocm_bake/local/builder.py)."""

    builder: str
    state: Path
    buildx_config: Path

    def env(self) -> dict[str, str]:
        return {"BUILDX_CONFIG": str(self.buildx_config)}


def start_buildkit(work: Path, registries: list[str], name: str | None = None, ca: Path | None = None) -> BuildKit:
    """Start a private buildkitd under ``work``, registered in a private BUILDX_CONFIG.

    With ``ca`` it reaches ``registries`` over TLS trusting that CA; without, over plain HTTP.
    """
    engine("buildkitd"), engine("buildx")
    kit = BuildKit(name or f"rocm-bake-test-{secrets.token_hex(3)}", work / "buildkit", work / "buildx")
    builder_tool.start(kit.builder, kit.state, registries, env=kit.env(), ca=ca)
    return kit


def stop_buildkit(kit: BuildKit) -> None:
    builder_tool.stop(kit.builder, kit.state, env=kit.env())


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
            timeout: float = 900, stdin: str | None = None) -> subprocess.CompletedProcess:
        """``stdin``: what the CLI reads as a value it was not given (a secret stays off the command line)."""
        argv = [str(engine("pulumi")), *args, "--non-interactive"]
        if stack:
            argv += ["--stack", stack]
        result = subprocess.run(argv, cwd=self.dir, env={**self.env, **(extra_env or {})}, capture_output=True,
                                text=True, timeout=timeout, input=stdin)
        self.log.append(f"$ {' '.join(argv[1:])}\n{result.stdout}\n{result.stderr}")
        if check and result.returncode != 0:
            pytest.fail(f"pulumi {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-6000:]}\n"
                        f"{result.stderr[-6000:]}")
        return result

    def processes(self, needle: str = "") -> dict[int, str]:
        """Live processes (zombies are not) started with this project's backend, whose command line holds
        ``needle``: the CLI, its language host and plugins, the watchdogs, and what they started."""
        return live_processes(f"PULUMI_BACKEND_URL={self.env['PULUMI_BACKEND_URL']}", needle)


def live_processes(env_entry: str | None = None, needle: str = "", group: int | None = None) -> dict[int, str]:
    """pid -> command line of every live process (zombies are not, nor this one) whose command line holds
    ``needle`` and, when given, whose environment holds ``env_entry`` (``NAME=value``) and whose process group
    is ``group``."""
    marker = env_entry.encode() if env_entry is not None else None
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            # stat: "pid (comm) state ppid pgrp ...", comm may hold spaces and parentheses
            state, _ppid, pgrp = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
            if state == "Z" or (group is not None and int(pgrp) != group):
                continue
            if marker is not None and marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
        if needle in cmdline:
            found[int(entry.name)] = cmdline
    return found


#: Top-level keys of a stack file that belong to one user's secrets provider, not to the stack's config.
STACK_SECRETS_KEYS = ("encryptionsalt:", "encryptedkey:", "secretsprovider:")


def copy_components(dest: Path) -> None:
    """The program's own package beside a program in ``dest``: ``components`` is no installed module, so the
    language host and the dynamic providers import it from the project directory, as in a checkout."""
    shutil.copytree(ROOT / "components", dest / "components", ignore=shutil.ignore_patterns("__pycache__"))


def copy_project(dest: Path) -> Path:
    """The program's files (Pulumi.yaml, __main__.py, components, stacks, demo Dockerfiles) with an absolute venv."""
    dest.mkdir(parents=True)
    pulumi_yaml = (ROOT / "Pulumi.yaml").read_text().replace("virtualenv: .venv", f"virtualenv: {ROOT / '.venv'}")
    (dest / "Pulumi.yaml").write_text(pulumi_yaml)
    shutil.copy(ROOT / "__main__.py", dest / "__main__.py")
    copy_components(dest)
    shutil.copytree(ROOT / "stacks", dest / "stacks")
    for stack_file in (dest / "stacks").glob("Pulumi.*.yaml"):
        # New stacks with the test's own passphrase: drop the salt a local `make demo` wrote with the user's.
        lines = stack_file.read_text().splitlines(keepends=True)
        stack_file.write_text("".join(l for l in lines if not l.startswith(STACK_SECRETS_KEYS)))
    shutil.copytree(ROOT / "dockerfiles", dest / "dockerfiles")
    return dest


def project_env(state: Path, kit: BuildKit | None, home: Path, ssl_cert_file: Path | None = None) -> dict[str, str]:
    """The CLI's environment for a test project; ``kit`` None for previews that build nothing.

    ``ssl_cert_file``: a bundle holding the test registry's CA (system roots + it) as SSL_CERT_FILE;
    .tools/bin/pulumi adds the checkout's own CA (.rocm-bake/tls) to whatever that names.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "GITHUB_"))}
    if ssl_cert_file is not None:
        env["SSL_CERT_FILE"] = str(ssl_cert_file)
    if kit is not None:
        env.update(kit.env())
    env.update({
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        # The stack's salt comes from the state, never from (or into) a tracked stack file.
        "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
        "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi")),
        "PATH": f"{TOOLS_BIN}:{VENV_BIN}:{env.get('PATH', '')}",
        "PIP_CONFIG_FILE": os.devnull,
    })
    return env


@pytest.fixture(scope="session")
def engines_built() -> None:
    for name in ("pulumi", "buildkitd", "buildx"):
        engine(name)


# -- Module fixtures the engine tests share: the module's registry (tests/registry_fixtures.py; https when the
# -- module sets REGISTRY_TLS = True), a buildkitd that pushes to it, and the demo base in it ----------------


@pytest.fixture(scope="module")
def buildkit(tmp_path_factory: pytest.TempPathFactory, registry: Registry) -> Iterator[BuildKit]:
    """A private buildkitd that may push to ``registry`` (trusting its CA when it serves TLS), registered in a
    private BUILDX_CONFIG."""
    kit = start_buildkit(tmp_path_factory.mktemp("buildkit"), [registry.address],
                         ca=registry.tls.ca_cert if registry.tls else None)
    try:
        yield kit
    finally:
        stop_buildkit(kit)


def push_demo_base(registry: Registry, buildkit: BuildKit) -> str:
    """What `make demo-base` does (dockerfiles/demo/base.py: debootstrap, pushed FROM scratch; skipped when the
    registry has it); its reference."""
    sys.path.insert(0, str(ROOT / "dockerfiles" / "demo"))
    import base as demo_base  # dockerfiles/demo/base.py, the code `make demo-base` runs

    env = os.environ.copy()
    os.environ.update(buildkit.env())
    if registry.tls is not None:
        os.environ["SSL_CERT_FILE"] = str(registry.tls.bundle)
    try:
        return demo_base.push_base(registry.address, buildkit.builder, str(TOOLS_BIN / "buildx"))
    finally:
        os.environ.clear()
        os.environ.update(env)


@pytest.fixture(scope="module")
def base_ref(registry: Registry, buildkit: BuildKit) -> str:
    """The demo base in the module's registry."""
    return push_demo_base(registry, buildkit)


#: The bucket the team's state lives in, on the loopback S3 gateway.
STATE_BUCKET = "team-state"


def start_state_bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[state_server.StateServer]:
    """The team's state: an S3 bucket (versitygw, started by make state-server's own code) on a free port."""
    engine("versitygw")
    state = tmp_path_factory.mktemp("state-server")
    try:
        running = state_server.start(state, STATE_BUCKET)
    except state_server.StateServerError as exc:
        pytest.fail(f"the state server did not start: {exc}")
    yield running
    state_server.stop(state)

"""Faults on the farm (rocm_bake/local/farm), each a real ``pulumi up`` of a demo stack on it.

A wrong registry password, a builder whose client certificate another CA
signed, a registry serving a certificate for another name: each `up` fails
with ONE line (``rocm-bake.engine_run``, as ``make up`` runs it) naming what
was refused, and changes nothing: no image resource in the stack's state,
nothing in the registry. Those ups fail before anything is built. Then,
with the demo base pushed: the registry host cut off (its veth down)
mid-push is one line naming the registry, no output names a digest the
registry lacks, and once it is back ``up`` completes and ``refresh
--expect-no-changes`` passes; the state host down mid-``up`` is the engine's
own error, then ``pulumi cancel`` and ``up`` recover. The stack's state
lives in the farm's bucket. Root only, as CI runs; the farm is taken down
after, and must leave nothing.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rocm_bake.local.farm import farm as farm_mod
from rocm_bake.local.farm import hosts
from rocm_bake.registry.tls import RegistryTls, issue_leaf, make_ca
from rocm_bake.local.farm.layout import REGISTRY_USER
from tests.engine_fixtures import ROOT, PulumiProject, copy_project, engine, project_env
from tests.farm_fixtures import farm  # noqa: F401 - the module's farm

STACK = "demo-gfx1201"


@pytest.fixture(scope="module")
def project(farm: farm_mod.Farm, tmp_path_factory: pytest.TempPathFactory) -> PulumiProject:
    """The demo program on the farm: registry, builder and state from the farm's exports."""
    work = tmp_path_factory.mktemp("farm-faults")
    exports = {k: v for k, v in farm.exports.items() if k != "ROCM_BAKE_STACK_BUILDERS"}  # one builder per test
    env = {**project_env(work / "unused-state", None, work), **exports,
           "PULUMI_CONFIG_PASSPHRASE": "farm-faults", "ROCM_BAKE_BUILDER": farm.layout.buildx_name("builder-1")}
    proj = PulumiProject(copy_project(work / "project"), work, env)
    proj.run("stack", "init", STACK, "--secrets-provider", "passphrase")
    return proj


def up(project: PulumiProject, log: Path, **env: str) -> tuple[int, str]:
    """``pulumi up`` through engine_run, as ``make up`` runs it: (exit status, its last stderr line)."""
    command = [sys.executable, "-m", "rocm_bake.engine_run", "--log", str(log),
               "--builder", env.get("ROCM_BAKE_BUILDER", project.env["ROCM_BAKE_BUILDER"]), "--",
               str(engine("pulumi")), "up", "--stack", STACK, "--yes", "--skip-preview", "--non-interactive"]
    result = subprocess.run(command, cwd=project.dir, env={**project.env, **env}, capture_output=True, text=True,
                            timeout=600)
    return result.returncode, (result.stderr.strip().splitlines() or [""])[-1]


def image_resources(project: PulumiProject, stack: str = STACK) -> list[str]:
    state = json.loads(project.run("stack", "export", stack=stack).stdout)
    return [r["urn"] for r in state["deployment"].get("resources") or [] if "docker-build:index:Image" in r["type"]]


def registry_get(farm: farm_mod.Farm, path: str, method: str = "GET") -> bytes:
    """``/v2/<path>`` of the farm registry with the farm login."""
    layout = farm.layout
    auth = json.loads((layout.docker_config / "config.json").read_text())["auths"][layout.endpoint("registry")]["auth"]
    request = urllib.request.Request(f"https://{layout.endpoint('registry')}/v2/{path}", method=method, headers={
        "Authorization": f"Basic {auth}",
        "Accept": "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"})
    context = ssl.create_default_context(cafile=str(layout.tls_dir / "ca.pem"))
    context.check_hostname = False  # one test serves a certificate for another name; the catalog is read anyway
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return response.read()


def catalog(farm: farm_mod.Farm) -> list[str]:
    return json.loads(registry_get(farm, "_catalog"))["repositories"]


def assert_nothing_changed(project: PulumiProject, farm: farm_mod.Farm) -> None:
    assert image_resources(project) == [], "a refused up recorded an image"
    assert catalog(farm) == [], "a refused up pushed something"


def test_a_wrong_registry_password_is_one_line_naming_the_registry(farm: farm_mod.Farm, project: PulumiProject,
                                                                   tmp_path: Path) -> None:
    registry = farm.layout.endpoint("registry")
    wrong = tmp_path / "docker"
    wrong.mkdir()
    (wrong / "config.json").write_text(json.dumps(
        {"auths": {registry: {"auth": base64.b64encode(b"farm:not-the-password").decode()}}}))
    rc, line = up(project, tmp_path / "up.log", DOCKER_CONFIG=str(wrong), ROCM_BAKE_REGISTRY_USERNAME="farm",
                  ROCM_BAKE_REGISTRY_PASSWORD="not-the-password")
    assert rc != 0
    assert line.startswith("rocm-bake: ") and registry in line and ("401" in line or "unauthorized" in line.lower()), line
    assert "not-the-password" not in (tmp_path / "up.log").read_text()
    assert_nothing_changed(project, farm)


def test_a_builder_certificate_from_another_ca_is_one_line_naming_the_builder(farm: farm_mod.Farm,
                                                                              project: PulumiProject,
                                                                              tmp_path: Path) -> None:
    layout = farm.layout
    other = RegistryTls(tmp_path / "other-ca")
    other.dir.mkdir()
    make_ca(other, "some other CA")
    issue_leaf(other, other.dir / "key.pem", other.dir / "cert.pem", "stranger", None, "clientAuth")
    rogue = "farm-rogue"
    opts = f"cacert={layout.tls_dir / 'ca.pem'},cert={other.dir / 'cert.pem'},key={other.dir / 'key.pem'}"
    created = farm_mod.buildx(layout.root, "create", "--name", rogue, "--driver", "remote", "--driver-opt", opts,
                              f"tcp://{layout.endpoint('builder-1')}")
    assert created.returncode == 0, created.stderr
    try:
        rc, line = up(project, tmp_path / "up.log", ROCM_BAKE_BUILDER=rogue)
    finally:
        farm_mod.buildx(layout.root, "rm", rogue)
    assert rc != 0
    assert line.startswith("rocm-bake: ") and f"buildx builder 'farm-rogue' (remote, tcp://{layout.endpoint('builder-1')})" \
        in line and "refused the TLS session" in line and str(other.dir / "cert.pem") in line, line
    assert_nothing_changed(project, farm)


def test_a_registry_certificate_for_another_name_is_one_line_naming_the_registry(farm: farm_mod.Farm,
                                                                                 project: PulumiProject,
                                                                                 tmp_path: Path) -> None:
    layout = farm.layout
    directory = layout.host_dir("registry")
    ca = RegistryTls(layout.tls_dir)
    registry = layout.endpoint("registry")
    elsewhere = f"198.18.{layout.slot}.99"

    def serve(names: str) -> None:
        os.kill(int((directory / "daemon.pid").read_text()), signal.SIGTERM)
        issue_leaf(ca, directory / "server-key.pem", directory / "server.pem", elsewhere, names, "serverAuth")
        hosts.spawn(layout, "registry", [str(hosts.REGISTRY_BINARY), "serve", str(directory / "config.yml")])

    serve(f"IP:{elsewhere}")
    try:
        rc, line = up(project, tmp_path / "up.log")
    finally:
        serve(f"IP:{layout.address('registry')}")
    assert rc != 0
    assert line.startswith("rocm-bake: ") and registry in line and "certificate" in line, line
    assert_nothing_changed(project, farm)


@pytest.fixture(scope="module")
def base(farm: farm_mod.Farm) -> str:
    """The demo base (dockerfiles/demo/base.py, as ``make demo-base`` runs it) pushed to the farm registry
    through builder-1 with the farm login."""
    sys.path.insert(0, str(ROOT / "dockerfiles" / "demo"))
    import base as demo_base

    saved = os.environ.copy()
    os.environ.update(farm.exports)
    try:
        return demo_base.push_base(farm.layout.endpoint("registry"), farm.layout.buildx_name("builder-1"),
                                   str(engine("buildx")))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def registry_login(farm: farm_mod.Farm) -> dict[str, str]:
    """The farm login as the wheel fetch's override variables (the image builds read DOCKER_CONFIG)."""
    layout = farm.layout
    auth = json.loads((layout.docker_config / "config.json").read_text())["auths"][layout.endpoint("registry")]["auth"]
    return {"ROCM_BAKE_REGISTRY_USERNAME": REGISTRY_USER,
            "ROCM_BAKE_REGISTRY_PASSWORD": base64.b64decode(auth).decode().split(":", 1)[1]}


def test_the_registry_cut_off_mid_push_is_one_line_then_up_and_refresh_recover(
        farm: farm_mod.Farm, project: PulumiProject, base: str, tmp_path: Path) -> None:
    layout, login = farm.layout, registry_login(farm)
    registry, veth = layout.endpoint("registry"), layout.veth("registry")
    log = tmp_path / "up.log"
    command = [sys.executable, "-m", "rocm_bake.engine_run", "--log", str(tmp_path / "engine.log"),
               "--builder", project.env["ROCM_BAKE_BUILDER"], "--", str(engine("pulumi")), "up", "--stack", STACK,
               "--yes", "--skip-preview", "--non-interactive"]
    with log.open("w") as out:
        update = subprocess.Popen(command, cwd=project.dir, env={**project.env, **login}, stdout=out,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while "pushing layers" not in log.read_text() and update.poll() is None:
            assert time.monotonic() < deadline, "the up never pushed"
            time.sleep(0.1)
        subprocess.run(["ip", "link", "set", veth, "down"], check=True)
        update.wait(timeout=900)
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
    last = log.read_text().strip().splitlines()[-1]
    assert update.returncode != 0 and last.startswith("rocm-bake: ") and registry in last, last
    images = json.loads(project.run("stack", "output", "--json", stack=STACK).stdout).get("images") or {}
    for ref in images.values():
        repository, digest = ref.split("/", 1)[1].split("@")
        registry_get(farm, f"{repository.rsplit(':', 1)[0]}/manifests/{digest}", method="HEAD")  # 404 raises
    project.run("up", "--yes", "--skip-preview", stack=STACK, extra_env=login)
    project.run("refresh", "--yes", "--expect-no-changes", stack=STACK, extra_env=login)


def test_the_state_host_down_mid_up_is_the_engines_error_then_cancel_and_up_recover(
        farm: farm_mod.Farm, project: PulumiProject, base: str, tmp_path: Path) -> None:
    layout, login = farm.layout, registry_login(farm)
    stack = "demo-gfx950"  # a stack of its own: the one above is up already, and this up must have work to do
    project.run("stack", "init", stack, "--secrets-provider", "passphrase")
    log = tmp_path / "up.log"
    with log.open("w") as out:
        update = subprocess.Popen([str(engine("pulumi")), "up", "--stack", stack, "--yes", "--skip-preview",
                                   "--non-interactive"], cwd=project.dir, env={**project.env, **login},
                                  stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while "docker-build:index:Image" not in log.read_text() and update.poll() is None:
        assert time.monotonic() < deadline, "the up never reached an image"
        time.sleep(0.2)
    os.kill(int((layout.host_dir("state") / "daemon.pid").read_text()), signal.SIGKILL)
    try:
        update.wait(timeout=600)
    finally:
        hosts.start_state(layout, farm.exports["AWS_ACCESS_KEY_ID"], farm.exports["AWS_SECRET_ACCESS_KEY"])
    text = log.read_text()
    assert update.returncode != 0, text[-3000:]
    assert "failed to save snapshot" in text and f"dial tcp {layout.endpoint('state')}: connect: connection refused" \
        in text, text[-3000:]
    locked = project.run("up", "--yes", "--skip-preview", stack=stack, check=False, extra_env=login)
    assert locked.returncode != 0 and "the stack is currently locked" in locked.stderr + locked.stdout
    project.run("cancel", "--yes", stack=stack)
    project.run("up", "--yes", "--skip-preview", stack=stack, extra_env=login)
    project.run("preview", "--expect-no-changes", stack=stack, extra_env=login)
    assert len(image_resources(project, stack)) >= 1

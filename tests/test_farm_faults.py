"""Faults on the farm (rocm_bake/farm), each a real ``pulumi up`` of a demo stack on it.

A wrong registry password, a builder whose client certificate another CA
signed, a registry serving a certificate for another name: each `up` fails
with ONE line (``rocm-bake.engine_run``, as ``make up`` runs it) naming what
was refused, and changes nothing: no image resource in the stack's state,
nothing in the registry. Those ups fail before anything is built. Then,
with the demo base pushed: the registry host cut off (its veth down)
mid-push is one line naming the registry, no output names a digest the
registry lacks, and once it is back ``up`` completes and ``refresh
--expect-no-changes`` passes; the state host down mid-``up`` is the engine's
own error, then ``pulumi cancel`` and ``up`` recover; ``builder-2``'s
buildkitd killed mid-build under ``rocm-bake arches up`` fails only the
stack on it, with one line naming its endpoint, and once the farm restarts
it ``arches up`` completes that stack. The stacks' state lives in the
farm's bucket. Every wait is bounded and says what did not happen. Root
only, as CI runs; the farm is taken down after, and must leave nothing.
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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocm_bake.farm import farm as farm_mod
from rocm_bake.farm import hosts
from rocm_bake.registry.tls import RegistryTls, issue_leaf, make_ca
from rocm_bake.farm.layout import BUCKET, DEMO_STACKS, REGISTRY_USER
from tests.engine_fixtures import ROOT, PulumiProject, copy_project, engine, project_env
from tests.test_arches_engine import rows
from tests.test_farm import checkouts, leftovers, need_root_and_engines, quiet

STACK = "demo-gfx1201"


@pytest.fixture(scope="module")
def farm() -> Iterator[farm_mod.Farm]:
    need_root_and_engines()
    engine("pulumi")
    with pytest.MonkeyPatch.context() as patch, checkouts("checkout") as (root,):
        patch.delenv("BUILDX_CONFIG", raising=False)
        made = farm_mod.up(root, quiet)
        try:
            yield made
        finally:
            farm_mod.down(root, quiet)
        assert leftovers(made.layout) == []


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


def stop(process: subprocess.Popen) -> None:
    """End ``process`` (started with ``start_new_session``): SIGINT to its group as from a terminal, so an
    engine cancels its update and releases its lock; SIGKILL if that is not enough within 2 min."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def finish(process: subprocess.Popen, seconds: float, what: str) -> int:
    """``process``'s exit status once it ends within ``seconds``; else it is stopped and the test fails
    naming ``what``."""
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        stop(process)
        pytest.fail(f"{what} did not end within {seconds:.0f} s (interrupted)")


def wait_until(seen: Callable[[], bool], process: subprocess.Popen, seconds: float, what: str) -> bool:
    """Poll until ``seen()`` (True) or ``process`` ended (False); past ``seconds`` the process is stopped and
    the test fails: ``what`` did not happen."""
    deadline = time.monotonic() + seconds
    while not seen():
        if process.poll() is not None:
            return False
        if time.monotonic() > deadline:
            stop(process)
            pytest.fail(f"{what} within {seconds:.0f} s (the run was interrupted)")
        time.sleep(0.2)
    return True


def image_resources(project: PulumiProject, stack: str = STACK, env: dict[str, str] | None = None) -> list[str]:
    state = json.loads(project.run("stack", "export", stack=stack, extra_env=env).stdout)
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
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: "pushing layers" in log.read_text(), update, 300, "the up pushed nothing")
        subprocess.run(["ip", "link", "set", veth, "down"], check=True)
        finish(update, 300, "the up cut off from the registry")
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
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    wait_until(lambda: "docker-build:index:Image" in log.read_text(), update, 300, "the up reached no image")
    os.kill(int((layout.host_dir("state") / "daemon.pid").read_text()), signal.SIGKILL)
    try:
        finish(update, 600, "the up whose state host went down")
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


def child_processes(pid: int) -> list[int]:
    """The children of process ``pid`` (every thread's), from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def lock_files(locks: Path) -> list[str]:
    """The stack locks of a state folder (``organization/<project>/<stack>/<lock>.json`` under its
    ``.pulumi/locks``)."""
    return sorted(str(path.relative_to(locks)) for path in locks.rglob("*") if path.is_file())


def arches_up(project: PulumiProject, out: Path) -> subprocess.Popen:
    """``rocm-bake arches up`` of both demo stacks, its stdout (the stack-prefixed lines, then the table) to ``out``
    and its stderr to ``out`` + ``.err``."""
    with out.open("w") as stdout, out.with_suffix(".err").open("w") as stderr:
        return subprocess.Popen([sys.executable, "-m", "rocm_bake", "arches", "up", "--stacks", ",".join(DEMO_STACKS)],
                                cwd=project.dir, env=project.env, stdout=stdout, stderr=stderr,
                                start_new_session=True)


def test_builder_2_killed_mid_build_fails_its_stack_alone_then_arches_up_completes_it(
        farm: farm_mod.Farm, project: PulumiProject, base: str, tmp_path: Path) -> None:
    layout = farm.layout
    builder_1, builder_2 = layout.buildx_name("builder-1"), layout.buildx_name("builder-2")
    endpoint = f"tcp://{layout.endpoint('builder-2')}"
    # Both demo stacks anew, in a folder of the farm bucket and a registry repository of their own: the tests
    # above left theirs up, and their images' cache in the registry would leave builder-2 nothing to build.
    folder, repository = "builder-killed", "rocm-bake-builder-killed"
    env = {**project.env, **registry_login(farm), "ROCM_BAKE_PULUMI": str(engine("pulumi")),
           "ROCM_BAKE_STACK_BUILDERS": farm.exports["ROCM_BAKE_STACK_BUILDERS"],
           "PULUMI_BACKEND_URL": farm.exports["PULUMI_BACKEND_URL"].replace(f"s3://{BUCKET}?",
                                                                            f"s3://{BUCKET}/{folder}?")}
    assert env["ROCM_BAKE_STACK_BUILDERS"] == f"demo-gfx950={builder_1},demo-gfx1201={builder_2}"
    own = PulumiProject(copy_project(tmp_path / "project"), project.state, env)
    for stack in DEMO_STACKS:
        with (own.dir / "stacks" / f"Pulumi.{stack}.yaml").open("a") as stack_file:
            stack_file.write(f"  rocm-bake:repository: {repository}\n")
        own.run("stack", "init", stack, "--secrets-provider", "passphrase")
    locks = layout.host_dir("state") / "data" / BUCKET / folder / ".pulumi" / "locks"
    assert (locks.parent / "stacks").is_dir(), f"the stacks are not in {locks.parent}"
    pid = int((layout.host_dir("builder-2") / "daemon.pid").read_text())

    first = arches_up(own, tmp_path / "up-1.log")
    try:
        building = wait_until(lambda: child_processes(pid) != [], first, 300,
                              "builder-2's buildkitd ran no build step for demo-gfx1201")
        assert building, f"arches up ended before builder-2 built: {(tmp_path / 'up-1.log').read_text()[-3000:]}"
        held = lock_files(locks)
        os.kill(pid, signal.SIGKILL)
        rc = finish(first, 300, "arches up with builder-2 killed")
    finally:
        hosts.start_builder(layout, RegistryTls(layout.tls_dir), "builder-2")  # the farm's own code
    assert any("/rocm-bake/demo-gfx1201/" in name for name in held), f"no lock of the update in {locks}: {held}"
    stdout, stderr = (tmp_path / "up-1.log").read_text(), (tmp_path / "up-1.err").read_text()
    assert rc == 2 and stderr.strip().splitlines()[-1] == "rocm-bake: error: pulumi up failed for demo-gfx1201", stderr
    table = rows(stdout)
    assert table["demo-gfx950"][:2] == [builder_1, "ok"] and int(table["demo-gfx950"][3]) > 0, stdout[-3000:]
    assert table["demo-gfx950"][4] == "-", stdout[-3000:]
    assert table["demo-gfx1201"][:2] == [builder_2, "failed (exit 1)"], stdout[-3000:]
    error = table["demo-gfx1201"][4]
    assert error.startswith(f"buildx builder '{builder_2}' (remote, {endpoint}): nothing is listening at {endpoint}"
                            " (buildkitd is dead) (the engine said: "), error
    said = [line for line in stdout.splitlines() if line.startswith("demo-gfx1201 | pulumi up exited ")]
    assert said == [f"demo-gfx1201 | pulumi up exited 1: {error}"], said
    assert lock_files(locks) == [], "a lock was left"
    assert image_resources(own, "demo-gfx950"), "demo-gfx950 recorded no image"

    second = arches_up(own, tmp_path / "up-2.log")
    rc = finish(second, 900, "arches up with builder-2 back")
    stdout = (tmp_path / "up-2.log").read_text()
    assert rc == 0, stdout[-3000:] + (tmp_path / "up-2.err").read_text()
    table = rows(stdout)
    assert {stack: row[1] for stack, row in table.items()} == {"demo-gfx950": "ok", "demo-gfx1201": "ok"}, stdout
    assert table["demo-gfx950"][3] == "0" and int(table["demo-gfx1201"][3]) > 0, stdout[-3000:]
    for stack in DEMO_STACKS:
        own.run("preview", "--expect-no-changes", stack=stack)

"""Team state in a real bucket: two checkouts of the program share one S3 backend, on the real engine.

The bucket is served by versitygw (built from ``tools/versitygw``), started
through ``rocm_bake/local/state_server.py``'s own ``start`` (the code ``make
state-server`` runs) with its data in a temp dir and on a free port. Two
copies of the project ("checkouts" A and B, as two people would have) use
the same ``PULUMI_BACKEND_URL``, keys and passphrase; each has its own
stack file without A's salt, as a fresh clone's tracked file would be. The
stack is a demo stack narrowed with ``rocm-bake:targets`` to triton-wheel
(one small image, its wheels and index), so every ``up`` is cheap.

The steps run in order, sharing one module's bucket, registry and BuildKit:
A's ``up`` lands only in the bucket; B reads A's stack; of two concurrent
``up``s one is refused by the diy backend's lock; a ``kill -9``'d ``up`` is
recovered with ``pulumi cancel`` and ``up``; the server's secret key is in
no output or log.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.engine_fixtures import (
    ROOT,
    BuildKit,
    PulumiProject,
    copy_project,
    engine,
    STATE_BUCKET,
    project_env,
    start_state_bucket,
)
from tests.engine_fixtures import Registry, base_ref, buildkit, registry  # noqa: F401  (module fixtures)

from rocm_bake.local import state_server  # noqa: E402  (make state-server's code)

#: A name no other backend on this machine holds, so "no checkpoint elsewhere" is exact.
STACK = f"team-{secrets.token_hex(3)}"
PROJECT = "rocm-bake"
BUCKET = STATE_BUCKET
LOCK_MESSAGE = ("the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or "
                "delete the lock file with `pulumi cancel`.")
TRITON_DOCKERFILE = Path("dockerfiles/demo/triton-wheel.Dockerfile")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[state_server.StateServer]:
    yield from start_state_bucket(tmp_path_factory)


def stack_file_text(registry: str, builder: str, base: str) -> str:
    """The demo gfx950 stack file, narrowed to triton-wheel and pointed at this module's registry and builder."""
    demo = yaml.safe_load((ROOT / "stacks" / "Pulumi.demo-gfx950.yaml").read_text())
    config = demo["config"]
    config.update({
        "rocm-bake:registry": registry,
        "rocm-bake:builder": builder,
        "rocm-bake:targets": "triton-wheel",
        "rocm-bake:buildArgs": {"ROCM_IMAGE": base, "PYTHON_IMAGE": base},
    })
    return yaml.safe_dump({"config": config})


def checkout(work: Path, name: str, stack_text: str, env: dict[str, str]) -> PulumiProject:
    """One person's copy of the project: same program and stack file, its own file-backend dir unused."""
    proj = PulumiProject(copy_project(work / name), work / name / ".rocm-bake" / "state", env)
    (proj.dir / "stacks" / f"Pulumi.{STACK}.yaml").write_text(stack_text)
    return proj


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, registry: Registry, buildkit: BuildKit, base_ref: str,
         server: state_server.StateServer) -> Iterator[tuple[PulumiProject, PulumiProject]]:
    work = tmp_path_factory.mktemp("team")
    env = {k: v for k, v in project_env(work / "unused-file-backend", buildkit, work).items()
           if not k.startswith("AWS_")}  # no profile or region of the user's own reaches the bucket
    env.update(server.env())  # the bucket replaces the file backend project_env names
    text = stack_file_text(registry.address, buildkit.builder, base_ref)
    a, b = checkout(work, "alice", text, dict(env)), checkout(work, "bob", text, dict(env))
    yield a, b
    (work / "pulumi.log").write_text("\n".join(a.log + b.log))


def checkpoint_path(server: state_server.StateServer) -> Path:
    return server.bucket_dir / ".pulumi" / "stacks" / PROJECT / f"{STACK}.json"


def lock_files(server: state_server.StateServer) -> list[Path]:
    return sorted((server.bucket_dir / ".pulumi" / "locks").rglob(f"{STACK}/*.json"))


def exported(project: PulumiProject) -> dict:
    return json.loads(project.run("stack", "export", stack=STACK).stdout)


def resource_count(deployment: dict) -> int:
    return len(deployment["deployment"].get("resources") or [])


def outputs(project: PulumiProject) -> dict:
    return json.loads(project.run("stack", "output", "--json", "--show-secrets", stack=STACK).stdout)


def edit_triton_kernels_version(projects: tuple[PulumiProject, ...], version: str) -> None:
    """The same commit pulled into every checkout: triton_kernels' wheel version changes, so its image does."""
    for project in projects:
        path = project.dir / TRITON_DOCKERFILE
        text = path.read_text()
        old = text.split("--name triton_kernels --version ", 1)[1].split(" ", 1)[0]
        path.write_text(text.replace(f"--name triton_kernels --version {old} ", f"--name triton_kernels --version "
                                     f"{version} "))


def start_up(project: PulumiProject, log: Path) -> subprocess.Popen:
    """``pulumi up`` in its own process group, so the whole tree (CLI, language host, plugins) can be signalled."""
    argv = [str(engine("pulumi")), "up", "--yes", "--skip-preview", "--non-interactive", "--stack", STACK]
    with log.open("w") as out:
        return subprocess.Popen(argv, cwd=project.dir, env=project.env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def finished(project: PulumiProject, process: subprocess.Popen, log: Path, timeout: float = 900) -> str:
    process.wait(timeout=timeout)
    text = log.read_text()
    project.log.append(f"$ up (background, exit {process.returncode})\n{text}")
    return text


def wait_for(what: str, ready, process: subprocess.Popen, timeout: float = 300) -> None:
    """Poll ``ready()`` while ``process`` runs; fail naming ``what`` if it ends or time runs out first."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"pulumi up ended (exit {process.returncode}) before {what}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"no {what} within {timeout:.0f} s")
        time.sleep(0.05)


def pending_operations(server: state_server.StateServer) -> list[dict]:
    try:
        latest = json.loads(checkpoint_path(server).read_text())["checkpoint"]["latest"]
    except (OSError, ValueError, KeyError):
        return []
    return latest.get("pending_operations") or []


def file_backend_checkpoints(projects: tuple[PulumiProject, ...]) -> list[Path]:
    """Any checkpoint of STACK in a file backend: each checkout's, the wrapper's default, the global login's."""
    places = [p.dir for p in projects] + [ROOT / ".rocm-bake" / "state", Path.home() / ".pulumi"]
    return [hit for place in places if place.exists() for hit in place.rglob(f"{STACK}.json*")]


def test_up_in_one_checkout_lands_in_the_bucket_only(team: tuple[PulumiProject, PulumiProject],
                                                    server: state_server.StateServer, registry: Registry) -> None:
    a, _ = team
    a.run("stack", "init", STACK, "--secrets-provider", "passphrase")
    a.run("up", "--yes", "--skip-preview", stack=STACK)
    assert checkpoint_path(server).is_file(), sorted(server.bucket_dir.rglob("*"))
    checkpoint = json.loads(checkpoint_path(server).read_text())
    names = {r["urn"].rsplit("::", 1)[-1] for r in checkpoint["checkpoint"]["latest"]["resources"]}
    assert {"triton-wheel-gfx950", "wheels-gfx950", "index-gfx950"} <= names, names
    assert "torch-gfx950" not in names, "rocm-bake:targets narrows the stack to triton-wheel"
    assert file_backend_checkpoints(team) == []
    assert lock_files(server) == [], "a finished up leaves no lock"


def test_second_checkout_reads_the_first_ones_stack_and_outputs(team: tuple[PulumiProject, PulumiProject]) -> None:
    a, b = team
    listed = json.loads(b.run("stack", "ls", "--json").stdout)
    assert [s["name"] for s in listed] == [STACK]
    mine, theirs = outputs(a), outputs(b)
    assert theirs["images"]["triton-wheel"] == mine["images"]["triton-wheel"]
    assert "@sha256:" in theirs["images"]["triton-wheel"]
    assert theirs["index_sha256"] == mine["index_sha256"] and len(theirs["index_sha256"]) == 64
    assert theirs["wheel_count"] == mine["wheel_count"] == 2
    # The image is shared through the registry; the fetched wheels and index are files in A's dist/, which
    # B's checkout does not have: B's preview would fetch those, and never rebuild the image.
    preview = json.loads(b.run("preview", "--json", stack=STACK).stdout)
    changed = {s["urn"].rsplit("::", 1)[-1] for s in preview.get("steps", []) if s["op"] not in ("same", "read")}
    assert changed <= {"wheels-gfx950", "index-gfx950"}, changed


def test_of_two_concurrent_ups_one_is_refused_by_the_lock(team: tuple[PulumiProject, PulumiProject],
                                                        server: state_server.StateServer, tmp_path: Path) -> None:
    a, b = team
    before = exported(a)
    digest_before = outputs(a)["images"]["triton-wheel"]
    edit_triton_kernels_version(team, "1.0.1")
    log = tmp_path / "alice-up.log"
    first = start_up(a, log)
    # Hold A inside its update (lock taken) while B tries: stopped, A cannot finish before B's lock check.
    wait_for("A's lock in the bucket", lambda: bool(lock_files(server)), first)
    os.killpg(first.pid, signal.SIGSTOP)
    try:
        refused = b.run("up", "--yes", "--skip-preview", stack=STACK, check=False)
    finally:
        os.killpg(first.pid, signal.SIGCONT)
    text = finished(a, first, log)
    assert refused.returncode != 0
    assert LOCK_MESSAGE in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    assert f"(pid {first.pid})" in refused.stdout + refused.stderr, "the message names the holder"
    assert first.returncode == 0, text[-4000:]

    after = exported(b)
    assert after["deployment"]["manifest"]["time"] != before["deployment"]["manifest"]["time"]
    assert resource_count(after) == resource_count(before)
    assert not after["deployment"].get("pending_operations")
    assert outputs(b)["images"]["triton-wheel"] != digest_before, "A's update landed"
    a.run("preview", "--expect-no-changes", stack=STACK)
    assert lock_files(server) == []


def test_kill_9_mid_update_then_cancel_and_up_recover(team: tuple[PulumiProject, PulumiProject],
                                                     server: state_server.StateServer, tmp_path: Path) -> None:
    a, b = team
    count = resource_count(exported(a))
    edit_triton_kernels_version(team, "1.0.2")
    log = tmp_path / "alice-up.log"
    killed = start_up(a, log)
    wait_for("a pending operation in the bucket's checkpoint", lambda: bool(pending_operations(server)), killed)
    os.killpg(killed.pid, signal.SIGKILL)
    finished(a, killed, log)
    assert killed.returncode == -signal.SIGKILL
    # The plugins and the language host run in process groups of their own, out of the signal's reach:
    # each must end on its own when its engine dies (the docker-build plugin was seen still running minutes later).
    deadline = time.monotonic() + 15
    while left := a.processes():
        assert time.monotonic() < deadline, f"still running 15 s after kill -9 of the up's process group: {left}"
        time.sleep(0.2)
    assert len(lock_files(server)) == 1, "the killed up never released its lock"
    interrupted = [op["resource"]["urn"].rsplit("::", 1)[-1] for op in pending_operations(server)]
    assert interrupted, "killed mid-update: the checkpoint records the step in flight"

    locked = b.run("up", "--yes", "--skip-preview", stack=STACK, check=False)
    assert locked.returncode != 0
    assert LOCK_MESSAGE in locked.stdout + locked.stderr, locked.stdout + locked.stderr
    assert f"(pid {killed.pid})" in locked.stdout + locked.stderr

    a.run("cancel", "--yes", stack=STACK)
    assert lock_files(server) == []
    recovered = a.run("up", "--yes", "--skip-preview", stack=STACK)
    assert "pending operations from previous deployment" in recovered.stdout + recovered.stderr
    state = exported(b)
    assert not state["deployment"].get("pending_operations")
    assert resource_count(state) == count
    a.run("preview", "--expect-no-changes", stack=STACK)
    assert file_backend_checkpoints(team) == []
    assert checkpoint_path(server).is_file()


def test_the_servers_secret_key_is_in_no_output_or_log(team: tuple[PulumiProject, PulumiProject],
                                                       server: state_server.StateServer) -> None:
    """Every pulumi output of both checkouts, their files, versitygw's log and the bucket (names only on failure)."""
    secret = server.credentials.secret_access_key
    assert team[0].log and team[1].log
    outputs_with_it = [entry.split("\n", 1)[0] for project in team for entry in project.log if secret in entry]
    files = [path for project in team for path in project.dir.rglob("*")
             if path.is_file() and path.suffix in (".yaml", ".json", ".log", ".txt", ".html")]
    files += [server.state / "versitygw.log", *(p for p in server.bucket_dir.rglob("*") if p.is_file())]
    files_with_it = [path for path in files if secret.encode() in path.read_bytes()]
    in_repr = secret in repr(server)
    assert outputs_with_it == [] and files_with_it == [] and not in_repr


# --- a shared stack that names no registry or builder -------------------------------------------------------

DEFAULTS_STACK = f"team-defaults-{secrets.token_hex(3)}"


def with_checkout_record(project: PulumiProject, checkout_id: str, registry: str, builder: str) -> PulumiProject:
    """Give the project copy a checkout record (as `make` writes it): its own registry port and builder, and its
    buildx config where this run's BUILDX_CONFIG points (as `make` and .tools/bin/pulumi give it)."""
    record = project.dir / ".rocm-bake" / "checkout.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"id": checkout_id, "registry_port": int(registry.rsplit(":", 1)[1]),
                                  "builder": builder}))
    (project.dir / ".rocm-bake" / "buildx").symlink_to(project.env["BUILDX_CONFIG"])
    project.env = {k: v for k, v in project.env.items() if not k.startswith("ROCM_BAKE_")}
    return project


def changed_resources(before: dict, after: dict) -> dict[str, list[str]]:
    """URN name -> the keys of its inputs and outputs that differ between two exports (added or removed: '*').

    ``__provider`` (a dynamic resource's provider code, serialized anew by every run that declares it) is no
    value of the stack's and is left out.
    """
    def by_urn(export: dict) -> dict[str, dict]:
        return {r["urn"].rsplit("::", 1)[-1] + f" ({r['type']})": r for r in export["deployment"]["resources"]}

    old, new = by_urn(before), by_urn(after)
    changed = {name: ["*"] for name in old.keys() ^ new.keys()}
    for name in old.keys() & new.keys():
        keys = [f"{part}.{key}" for part in ("inputs", "outputs")
                for key in (old[name].get(part) or {}).keys() | (new[name].get(part) or {}).keys()
                if key != "__provider" and (old[name].get(part) or {}).get(key) != (new[name].get(part) or {}).get(key)]
        if keys:
            changed[name] = sorted(keys)
    return changed


def test_a_stack_naming_no_registry_is_never_taken_over_by_another_checkout(
        tmp_path_factory: pytest.TempPathFactory, registry: Registry, buildkit: BuildKit, base_ref: str,
        server: state_server.StateServer) -> None:
    """A's checkout defaults (its registry, its builder) are recorded in the shared stack by A's up; B's own
    defaults differ, so B's preview and up are refused naming both, and the team's stack is left as it was."""
    work = tmp_path_factory.mktemp("team-defaults")
    env = {k: v for k, v in project_env(work / "unused", buildkit, work).items() if not k.startswith("AWS_")}
    env.update(server.env())
    address = registry.address
    config = yaml.safe_load(stack_file_text(address, buildkit.builder, base_ref))["config"]
    del config["rocm-bake:registry"], config["rocm-bake:builder"]
    text = yaml.safe_dump({"config": config})
    a = with_checkout_record(checkout(work, "alice", text, dict(env)), "aaaaaaaa", address, buildkit.builder)
    b = with_checkout_record(checkout(work, "bob", text, dict(env)), "bbbbbbbb", "127.0.0.1:9", "rocm-bake-bbbbbbbb")
    for project in (a, b):
        (project.dir / "stacks" / f"Pulumi.{STACK}.yaml").unlink()
        (project.dir / "stacks" / f"Pulumi.{DEFAULTS_STACK}.yaml").write_text(text)
    a.run("stack", "init", DEFAULTS_STACK, "--secrets-provider", "passphrase")
    a.run("up", "--yes", "--skip-preview", stack=DEFAULTS_STACK)
    before = json.loads(a.run("stack", "export", stack=DEFAULTS_STACK).stdout)
    images = json.loads(a.run("stack", "output", "--json", "images", stack=DEFAULTS_STACK).stdout)
    assert images["triton-wheel"].startswith(f"{address}/"), images

    for command in (("preview",), ("up", "--yes", "--skip-preview")):
        refused = b.run(*command, stack=DEFAULTS_STACK, check=False)
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0, f"pulumi {command[0]} in a second checkout took over the stack:\n{said[-4000:]}"
        for value in (address, buildkit.builder, "127.0.0.1:9", "rocm-bake-bbbbbbbb"):
            assert value in said, f"the refusal does not name {value!r}:\n{said[-4000:]}"
        assert "Traceback" not in said, said[-4000:]
    after = json.loads(a.run("stack", "export", stack=DEFAULTS_STACK).stdout)
    assert changed_resources(before, after) == {}, "B's refused up changed the team's stack"
    a.run("preview", "--expect-no-changes", stack=DEFAULTS_STACK)

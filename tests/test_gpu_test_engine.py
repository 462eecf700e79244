"""The GPU test on the real engine: a demo stack with ``gpuTest: true`` whose fleet node is a real sshd.

A narrowed demo stack (``rocm-bake:targets: torch-runtime``: pytorch-base,
triton-wheel, torch and torch-runtime, then the wheel fetch and the index)
builds torch-runtime for real; the fleet manifest (``ROCM_BAKE_FLEET``) names
one node, the loopback sshd of tests/ssh_fixtures.py, reached with its own
known_hosts and key (``ROCM_BAKE_SSH_KNOWN_HOSTS``/``_IDENTITY``). The node
"runs" an image with a script that logs each run on the node's side, so the
test sees what really ran over SSH. The steps below run in order, on one
project; the last one kills the CLI, as a crashed terminal would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.ssh_fixtures import SshNode, ssh_node  # noqa: F401  (pytest fixture)
from tests.engine_fixtures import (
    BuildKit,
    PulumiProject,
    copy_project,
    engine,
    live_processes,
    project_env,
)
from tests.engine_fixtures import Registry, base_ref, buildkit, registry  # noqa: F401  (module fixtures)
from rocm_bake.resource_types import FETCHED_WHEELS, GPU_TEST, UNTYPED, WHEEL_INDEX


STACK = "demo-gfx1201"
NODE = "fake-navi"
RESOURCE = "gpu-test-gfx1201"

#: What the node does with an image: log the run on the node's side, then pass, fail or hang.
NODE_SCRIPT = """#!/bin/sh
mode=$1; image=$2
echo "ran $mode $image" >> {runs}
case $mode in
  pass) echo "gpu ok: torch sees the card ($image)" ;;
  fail) echo "running torch.ones on the card"; echo "HIP error: invalid device function (no gfx1201 code object)" >&2
        exit 7 ;;
  hang) while echo tick; do sleep 0.2; done ;;
esac
"""


class Node:
    """The fleet manifest (one node, the real sshd) and what the node logged."""

    def __init__(self, root: Path, ssh: SshNode) -> None:
        self.root, self.ssh = root, ssh
        self.runs = root / "runs.log"
        self.script = root / "run-image.sh"
        self.fleet = root / "fleet.yml"
        self.script.write_text(NODE_SCRIPT.format(runs=self.runs))
        self.runs.write_text("")
        self.set_mode("pass")

    def set_mode(self, mode: str) -> None:
        """A different run template is a different test: the next ``up`` runs it again."""
        node = {"name": NODE, "host": "127.0.0.1", "port": self.ssh.port, "user": "root", "gpus": ["gfx1201"],
                "lock_path": str(self.root / "gpu.lock"), "run_template": f"sh {self.script} {mode} {{image}} {{test}}"}
        self.fleet.write_text(yaml.safe_dump({"gpu_node": NODE, "nodes": [node]}))

    def ran(self) -> list[str]:
        return self.runs.read_text().splitlines()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, ssh_node: SshNode) -> Node:  # noqa: F811
    return Node(tmp_path_factory.mktemp("node"), ssh_node)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, registry: Registry, buildkit: BuildKit, base_ref: str,
            node: Node) -> Iterator[PulumiProject]:
    work = tmp_path_factory.mktemp("gpu-engine")
    state = work / "state"
    state.mkdir()
    env = {**project_env(state, buildkit, work), "ROCM_BAKE_FLEET": str(node.fleet),
           "ROCM_BAKE_SSH_KNOWN_HOSTS": str(node.ssh.known_hosts), "ROCM_BAKE_SSH_IDENTITY": str(node.ssh.identity)}
    proj = PulumiProject(copy_project(work / "project"), state, env)
    proj.run("stack", "init", STACK, "--secrets-provider", "passphrase")
    for key, value in {"rocm-bake:registry": registry.address, "rocm-bake:builder": buildkit.builder,
                       "rocm-bake:targets": "torch-runtime", "rocm-bake:gpuTest": "true"}.items():
        proj.run("config", "set", key, value, stack=STACK)
    for arg in ("ROCM_IMAGE", "PYTHON_IMAGE"):
        proj.run("config", "set", "--path", f"rocm-bake:buildArgs.{arg}", base_ref, stack=STACK)
    yield proj
    (work / "pulumi.log").write_text("\n".join(proj.log))
    for pid in proj.processes():  # anything a failed kill test left
        os.kill(pid, signal.SIGKILL)


def outputs(project: PulumiProject) -> dict:
    return json.loads(project.run("stack", "output", "--json", stack=STACK).stdout)


def runtime_digest(project: PulumiProject) -> str:
    return outputs(project)["images"]["torch-runtime"].split("@", 1)[1]


def test_up_runs_the_gpu_test_over_ssh(project: PulumiProject, node: Node) -> None:
    project.run("up", "--yes", "--skip-preview", stack=STACK)
    digest = runtime_digest(project)
    assert node.ran() == [f"ran pass {outputs(project)['images']['torch-runtime']}"]  # the node ran it, by digest
    out = outputs(project)
    assert out["gpu_tested"] is True
    assert out["gpu_test_node"] == {"gfx1201": NODE}
    shown = out["gpu_test_output"]["gfx1201"]  # the test's own output, recorded
    assert "gpu ok: torch sees the card" in shown and digest in shown, shown
    state = json.loads(project.run("stack", "export", stack=STACK).stdout)
    (recorded,) = [r["outputs"] for r in state["deployment"]["resources"] if r["urn"].endswith(f"::{RESOURCE}")]
    assert (recorded["node"], recorded["status"], recorded["digest"]) == (NODE, 0, digest)


def test_a_second_up_does_not_run_it_again(project: PulumiProject, node: Node) -> None:
    project.run("preview", "--expect-no-changes", stack=STACK)
    project.run("up", "--yes", "--skip-preview", stack=STACK)
    project.run("refresh", "--yes", "--expect-no-changes", stack=STACK)
    assert len(node.ran()) == 1, node.ran()
    # a normal end stops the providers and their watchdogs too (nothing waits for the engine's pipe to close)
    assert not project.processes("pulumi.dynamic") and not project.processes("pulumi-resource-pulumi-python")


#: The ComponentResources that hold the dynamic resources now; a stack recorded before them had none.
COMPONENTS = {"rocm-bake:index:ArchIndex": "arch-index-gfx1201", "rocm-bake:gpu:GpuTestRun": "gpu-tests-gfx1201"}


def rename_everywhere(value: object, renamed: dict[str, str]) -> object:
    """``value`` with every string that is a renamed URN replaced (parents, dependencies, property dependencies)."""
    if isinstance(value, str):
        return renamed.get(value, value)
    if isinstance(value, list):
        return [rename_everywhere(v, renamed) for v in value]
    if isinstance(value, dict):
        return {k: rename_everywhere(v, renamed) for k, v in value.items()}
    return value


#: The dynamic resources of this stack that a program without typed classes declared (ImageHome came typed).
ONCE_UNTYPED = frozenset({FETCHED_WHEELS.token, WHEEL_INDEX.token, GPU_TEST.token})


def as_recorded_before_the_types(deployment: dict) -> dict:
    """The same state with every dynamic resource under the SDK's default type ``pulumi-python:dynamic:Resource``,
    in its ``type`` and its URN (every reference renamed): what a stack declared without typed classes holds."""
    def untyped_urn(urn: str) -> str:
        head, qualified, name = urn.rsplit("::", 2)
        return "::".join([head, qualified.rsplit("$", 1)[0] + "$" + UNTYPED if "$" in qualified else UNTYPED, name])

    renamed = {r["urn"]: untyped_urn(r["urn"]) for r in deployment["resources"] if r["type"] in ONCE_UNTYPED}
    assert sorted(u.rsplit("::", 1)[1] for u in renamed) == ["gpu-test-gfx1201", "index-gfx1201", "wheels-gfx1201"]
    resources = [{**r, "type": UNTYPED} if r["type"] in ONCE_UNTYPED else r for r in deployment["resources"]]
    return rename_everywhere({**deployment, "resources": resources}, renamed)  # type: ignore[return-value]


def as_recorded_before_the_components(deployment: dict) -> dict:
    """The same state as a program that declares the fetch, the index and the GPU test at the stack's root, with
    no types of their own, writes it: no ArchIndex or GpuTestRun, each child's URN and parent the root's (every
    reference renamed)."""
    resources = deployment["resources"]
    stack_urn = next(r["urn"] for r in resources if r["type"] == "pulumi:pulumi:Stack")
    components = {r["urn"] for r in resources if r["type"] in COMPONENTS}
    assert len(components) == len(COMPONENTS), [r["urn"] for r in resources]
    renamed = {r["urn"]: f"urn:pulumi:{STACK}::rocm-bake::{r['type']}::{r['urn'].rsplit('::', 1)[1]}"
               for r in resources if r.get("parent") in components}
    assert sorted(u.rsplit("::", 1)[1] for u in renamed) == ["gpu-test-gfx1201", "index-gfx1201", "wheels-gfx1201"]
    renamed.update(dict.fromkeys(components, stack_urn))
    at_the_root = rename_everywhere({**deployment, "resources": [r for r in resources if r["urn"] not in components]},
                                    renamed)
    return as_recorded_before_the_types(at_the_root)  # type: ignore[arg-type]


def operations(project: PulumiProject) -> set[tuple[str, str, str]]:
    """What a preview would do: (operation, type, name) of every step that is not "same"."""
    preview = json.loads(project.run("preview", "--json", stack=STACK).stdout)
    return {(s["op"], s["urn"].split("::")[2].rsplit("$", 1)[-1], s["urn"].rsplit("::", 1)[1])
            for s in preview["steps"] if s["op"] != "same"}


def typed(project: PulumiProject) -> dict[str, str]:
    """The recorded type of each dynamic resource an untyped program declared, by name, with its parent's name."""
    after = json.loads(project.run("stack", "export", stack=STACK).stdout)["deployment"]["resources"]
    return {r["urn"].rsplit("::", 1)[1]: f'{r["type"]} under {r["parent"].rsplit("::", 1)[1]}' for r in after
            if r["type"] in ONCE_UNTYPED | {UNTYPED}}


#: Where each dynamic resource lives now, and under which type.
TYPED = {"wheels-gfx1201": f"{FETCHED_WHEELS.token} under arch-index-gfx1201",
         "index-gfx1201": f"{WHEEL_INDEX.token} under arch-index-gfx1201",
         "gpu-test-gfx1201": f"{GPU_TEST.token} under gpu-tests-gfx1201"}


def test_a_stack_recorded_before_the_types_upgrades_in_place(project: PulumiProject, node: Node,
                                                            tmp_path: Path) -> None:
    """Each dynamic resource now names its own type; state recorded under the one untyped type is adopted by
    alias: the preview changes nothing, ``up`` reruns and rebuilds nothing, and the state then holds the types."""
    exported = json.loads(project.run("stack", "export", stack=STACK).stdout)
    old = tmp_path / "before-types.json"
    old.write_text(json.dumps({**exported, "deployment": as_recorded_before_the_types(exported["deployment"])}))
    project.run("stack", "import", "--file", str(old), stack=STACK)
    assert set(typed(project).values()) == {f"{UNTYPED} under {parent.rsplit(' ', 1)[1]}" for parent in TYPED.values()}
    assert operations(project) == set()  # no replacement, no update: the types move in state only
    ran, digest = len(node.ran()), runtime_digest(project)
    project.run("up", "--yes", "--skip-preview", stack=STACK)
    assert len(node.ran()) == ran and runtime_digest(project) == digest, node.ran()
    assert typed(project) == TYPED
    project.run("preview", "--expect-no-changes", stack=STACK)


def test_a_stack_recorded_before_the_components_keeps_every_resource(project: PulumiProject, node: Node,
                                                                   tmp_path: Path) -> None:
    """Upgrading moves the fetch, the index and the GPU test under their components: aliases adopt them, so
    the preview creates the two components (state only) and nothing else changes, and ``up`` reruns nothing."""
    exported = json.loads(project.run("stack", "export", stack=STACK).stdout)
    old = tmp_path / "before-components.json"
    old.write_text(json.dumps({**exported, "deployment": as_recorded_before_the_components(exported["deployment"])}))
    project.run("stack", "import", "--file", str(old), stack=STACK)
    changed = operations(project)
    assert changed == {("create", typ, name) for typ, name in COMPONENTS.items()}, changed
    ran, digests = len(node.ran()), runtime_digest(project)
    project.run("up", "--yes", "--skip-preview", stack=STACK)
    project.run("preview", "--expect-no-changes", stack=STACK)
    assert len(node.ran()) == ran and runtime_digest(project) == digests, node.ran()  # nothing ran or rebuilt
    assert typed(project) == TYPED


def test_a_torch_runtime_change_runs_it_again(project: PulumiProject, node: Node) -> None:
    before = runtime_digest(project)
    dockerfile = project.dir / "dockerfiles" / "demo" / "torch-runtime.Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN echo edited > /etc/torch-runtime-edited\n")
    project.run("up", "--yes", "--skip-preview", stack=STACK)
    after = runtime_digest(project)
    assert after != before
    assert len(node.ran()) == 2 and node.ran()[1].endswith(f"@{after}"), node.ran()


def test_a_failing_test_fails_the_up_and_shows_its_output(project: PulumiProject, node: Node) -> None:
    node.set_mode("fail")
    failed = project.run("up", "--yes", "--skip-preview", stack=STACK, check=False)
    shown = failed.stdout + failed.stderr
    assert failed.returncode != 0, shown
    assert node.ran()[-1].startswith("ran fail "), node.ran()
    assert f"({RESOURCE}):" in shown  # the engine names the resource
    assert f"gpu-test gfx1201: test on {NODE} exited 7 (node {NODE} at 127.0.0.1:{node.ssh.port}" in shown, shown
    assert "HIP error: invalid device function (no gfx1201 code object)" in shown, shown  # its own stderr
    assert "running torch.ones on the card" in shown, shown  # and stdout
    assert "Traceback" not in shown, shown  # one clear error, not the provider's stack
    # a failure is not recorded as a pass: the next up runs the same test again (and fails again)
    ran = len(node.ran())
    again = project.run("up", "--yes", "--skip-preview", stack=STACK, check=False)
    assert again.returncode != 0 and len(node.ran()) == ran + 1, node.ran()
    # back to the test that passed on this very digest: the recorded pass stands, nothing to run
    node.set_mode("pass")
    project.run("preview", "--expect-no-changes", stack=STACK)


def test_kill_9_of_up_leaves_nothing_of_the_engine_behind(project: PulumiProject, node: Node) -> None:
    """The CLI alone is killed, as a crashed terminal would; nothing it started may outlive it.

    Neither the dynamic providers (the GPU test's ssh under them) nor the docker-build plugin, whose
    upstream code never checks that the engine lives: both run behind tools/plugin-watchdog.
    """
    node.set_mode("hang")
    ran = len(node.ran())
    log = project.state.parent / "killed-up.log"
    with log.open("w") as sink:
        up = subprocess.Popen([str(engine("pulumi")), "up", "--yes", "--skip-preview", "--non-interactive",
                               "--stack", STACK], cwd=project.dir, env=project.env, stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 300
        while len(node.ran()) == ran:  # the test is running on the node, under the provider
            assert up.poll() is None, f"up exited {up.returncode} before the GPU test ran:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, "the GPU test did not start within 300 s"
            time.sleep(0.2)
        started = {what: project.processes(needle) for what, needle in (
            ("dynamic provider", "-m pulumi.dynamic"), ("ssh to the node", f"-p {node.ssh.port}"),
            ("docker-build plugin", "pulumi-resource-docker-build"),
            ("language host", "pulumi-language-python"))}
        assert all(started.values()), f"not running while the GPU test runs: {[k for k, v in started.items() if not v]}"
    finally:
        up.send_signal(signal.SIGKILL)  # the CLI (the wrapper execs it), nothing else
        up.wait()
    deadline = time.monotonic() + 10
    # the node's side too: its session ends with ssh
    while left := {**project.processes(), **live_processes(needle=f"{node.script} hang")}:
        assert time.monotonic() < deadline, f"still running 10 s after kill -9 of pulumi up: {left}"
        time.sleep(0.2)

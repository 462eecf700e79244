"""GPU tests on the fleet: run an arch's image on a node that has the card, over SSH.

The builders cross-compile, so having no card only means gpu-test cannot
cover an arch: that is reported as "not covered" with its own exit status,
never as a pass. SSH is the system client with host keys verified
(``StrictHostKeyChecking=yes``): a node we cannot authenticate does not run
our test.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from rocm_bake.arch import validate_arch
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import Fleet, Node

#: Exit status for an arch no fleet node can test (distinct from pass/fail/bad input).
NOT_COVERED_STATUS = 3
#: Exit status the lock wrapper uses when the node stayed busy past the timeout.
LOCK_TIMEOUT_STATUS = 75
#: ssh's own status for connection and host-key failures.
SSH_FAILURE_STATUS = 255


def not_covered_message(arch: str) -> str:
    return f"not covered: no fleet node has {arch}; cross-compiled only"


def select_node(fleet: Fleet, arch: str, override: str | None = None) -> Node | None:
    """The node to test ``arch`` on, or None when no node holds the card.

    An override (``--host``, ``GPU_HOST``, ``rocm-bake:gpuHost``) moves a test
    off a busy default node, but only to a node that holds the card: a
    test on the wrong GPU would prove nothing.
    """
    validate_arch(arch)
    holders = fleet.nodes_for(arch)
    if override:
        node = fleet.node(override)
        if arch not in node.gpus:
            have = ", ".join(node.gpus) or "no GPUs"
            raise RocmBakeError(
                f"node {node.name} has {have}, not {arch}; "
                f"nodes with {arch}: {', '.join(holders) or '(none)'}"
            )
        return node
    if not holders:
        return None
    return fleet.node(fleet.gpu_node if fleet.gpu_node in holders else holders[0])


def require_digest(image: str) -> str:
    """The image must be pinned by digest: the digest is what was built for this arch."""
    if "@sha256:" not in image:
        raise RocmBakeError(
            f"image {image!r} is not pinned by digest: pass repo:tag@sha256:… (a tag can be "
            "re-pushed by another arch's build; the digest is what was built for this one)"
        )
    return image


def remote_script(node: Node, image: str, test: str, lock_timeout: int) -> str:
    """Shell run on the node: take the node lock (saying so if we wait), then the test."""
    run = node.run_template.format(image=shlex.quote(image), test=test)
    lock = shlex.quote(node.lock_path)
    return (
        f"exec 9>>{lock} || exit 1; "
        f"if ! flock -n 9; then echo \"rocm-bake: waiting for lock {node.lock_path} on {node.name} "
        f"(another gpu-test is running; timeout {lock_timeout}s)\" >&2; "
        f"flock -w {int(lock_timeout)} 9 || {{ echo \"rocm-bake: {node.name} still busy after "
        f"{lock_timeout}s; use --host to move to another node with the card\" >&2; "
        f"exit {LOCK_TIMEOUT_STATUS}; }}; fi; {run}"
    )


def ssh_argv(node: Node, script: str, known_hosts: Path | None, identity: Path | None) -> list[str]:
    argv = [
        "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
        "-o", "LogLevel=ERROR", "-p", str(node.port),
    ]
    if known_hosts is not None:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}"]
    if identity is not None:
        argv += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
    target = f"{node.user}@{node.host}" if node.user else node.host
    return argv + [target, script]


class GpuTestResult(BaseModel):
    arch: str
    node: str | None
    status: int
    covered: bool
    message: str


def run_gpu_test(
    fleet: Fleet,
    arch: str,
    image: str | None,
    test: str,
    *,
    host: str | None = None,
    lock_timeout: int = 3600,
    known_hosts: Path | None = None,
    identity: Path | None = None,
    emit: Callable[[str], None] = lambda line: print(line, end="", flush=True),
) -> GpuTestResult:
    """Run ``test`` in ``image`` on a node holding ``arch``; stream its output."""
    node = select_node(fleet, arch, host)
    if node is None:
        return GpuTestResult(arch=arch, node=None, status=NOT_COVERED_STATUS, covered=False,
                             message=not_covered_message(arch))
    if not image:
        raise RocmBakeError(f"gpu-test {arch} on {node.name}: --image REF@sha256:… is required")
    argv = ssh_argv(node, remote_script(node, require_digest(image), test, lock_timeout), known_hosts, identity)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            emit(line)
            tail = (tail + [line])[-5:]
        status = proc.wait()
    if status == SSH_FAILURE_STATUS:
        reason = "".join(tail).strip() or "ssh failed"
        raise RocmBakeError(f"gpu-test {arch}: cannot reach {node.name} ({node.host}:{node.port}) safely: {reason}")
    if status == LOCK_TIMEOUT_STATUS:
        message = f"{node.name} stayed busy past {lock_timeout}s"
    else:
        message = f"test on {node.name} exited {status}"
    return GpuTestResult(arch=arch, node=node.name, status=status, covered=True, message=message)



"""GPU tests on the fleet: run an arch's image on a node that has the card, over SSH.

The builders cross-compile, so having no card only means gpu-test cannot
cover an arch: that is reported as "not covered" with its own exit status,
never as a pass. SSH is the system client with host keys verified
(``StrictHostKeyChecking=yes``, ``BatchMode=yes``, command-line options
winning over any ssh_config): a node we cannot authenticate does not run
our test, and an unknown key is never trusted on first use.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from pydantic import BaseModel, Field

from rocm_bake.archset import Arch
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import Fleet, Node
from rocm_bake.gpu.node_lock import PREFIX, LockProtocol, LockTimeout, holder_text, locked_command
from rocm_bake.gpu.status import LOCK_TIMEOUT_STATUS, NOT_COVERED_STATUS, SSH_FAILURE_STATUS

Sink = Callable[[str], None]

#: Defaults for ``--known-hosts`` and ``--identity``: environment variables, so the GPU test resource (run
#: by a provider process the Pulumi engine starts) reaches a node the same way the CLI does.
KNOWN_HOSTS_ENV = "ROCM_BAKE_SSH_KNOWN_HOSTS"
IDENTITY_ENV = "ROCM_BAKE_SSH_IDENTITY"
#: How much of a test's output a result keeps for a message or a stack output: its end, where failures are.
TAIL_LINES = 40
TAIL_CHARS = 4000


def ssh_files_from_env() -> tuple[Path | None, Path | None]:
    """(known_hosts, identity) from the environment; None: ssh's own (``~/.ssh``, the agent)."""
    known, identity = os.environ.get(KNOWN_HOSTS_ENV), os.environ.get(IDENTITY_ENV)
    return (Path(known) if known else None), (Path(identity) if identity else None)


def not_covered_message(arch: Arch) -> str:
    return f"not covered: no fleet node has {arch}; cross-compiled only"


def select_node(fleet: Fleet, arch: Arch, override: str | None = None) -> Node | None:
    """The node to test ``arch`` on, or None when no node holds the card.

    An override (``--host``, ``GPU_HOST``, ``rocm-bake:gpuHost``) moves a test
    off a busy default node, but only to a node that holds the card: a test
    on the wrong GPU would prove nothing. When no node has the card at all
    the answer is "not covered" whatever the override (a GPU_HOST exported
    for the whole ARCHES fan-out must not turn gfx950 into an error), but the
    override must still name a fleet node.
    """
    holders = fleet.nodes_for(arch)
    node = fleet.node(override) if override else None  # unknown name: error first
    if not holders:
        return None
    if node is not None:
        if arch not in node.gpus:
            have = ", ".join(node.gpus) or "no GPUs"
            raise RocmBakeError(
                f"node {node.name} has {have}, not {arch}; nodes with {arch}: {', '.join(holders)}"
            )
        return node
    return fleet.node(fleet.gpu_node if fleet.gpu_node in holders else holders[0])


def require_digest(image: str, arch: Arch | None = None) -> str:
    """The image must be pinned by digest: the digest is what was built for this arch.

    A tag is re-pushed by every build of that arch (and ``:latest`` by
    whichever arch pushed last), so a test by tag can report another build's
    binaries as this one's. A tag, when present, must also name ``arch``.
    """
    if "@" not in image:
        raise RocmBakeError(
            f"image {image!r} is not pinned by digest: pass registry/repo:tag@sha256:… (a tag can be "
            "re-pushed by another build; the digest is what was built for this arch)"
        )
    from rocm_bake.registry.reference import parse_ref  # pydantic: only when a test really runs, not for `plan`

    parsed = parse_ref(image)  # validates registry host, repository and sha256:<64 hex>
    if arch is not None and parsed.tag is not None:
        tag_arches = parsed.tag.split("-", 1)[0].split("_")
        if arch not in tag_arches:
            raise RocmBakeError(
                f"image {image!r} is tagged for {parsed.tag.split('-', 1)[0]}, not {arch}: "
                f"refusing to report another arch's image as a {arch} test"
            )
    return str(parsed)


def fill_run_template(template: str, image: str, test: str) -> str:
    """``{image}`` (shell-quoted) and ``{test}`` substituted; other braces left alone.

    Plain replacement rather than str.format, so a template holding shell
    ``${VAR}`` or awk ``{print}`` is not an error.
    """
    if "{image}" not in template:
        raise RocmBakeError(f"run template {template!r} has no {{image}}: the test must run the image by digest")
    return template.replace("{image}", shlex.quote(image)).replace("{test}", test)


def remote_script(node: Node, image: str, test: str, lock_timeout: float, arch: Arch) -> str:
    """Command run on the node: take the node lock (saying who holds it if we wait), then the test."""
    run = fill_run_template(node.run_template, image, test)
    return locked_command(run, node.name, node.lock_path, lock_timeout, holder_text(arch, image))


def ssh_argv(node: Node, script: str, known_hosts: Path | None, identity: Path | None) -> list[str]:
    """ssh argv; host-key checking is forced on and cannot be relaxed by ssh_config."""
    argv = [
        "ssh", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
        "-o", "ConnectTimeout=15", "-o", "LogLevel=ERROR", "-p", str(node.port),
    ]
    if known_hosts is not None:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}"]
    if identity is not None:
        argv += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
    if node.user:
        argv += ["-l", node.user]
    return argv + ["--", node.host, script]


class GpuTestResult(BaseModel):
    arch: str
    node: str | None
    status: int
    covered: bool
    message: str
    image: str | None = None
    lock_waited: bool = False
    output: list[str] = Field(default_factory=list)

    def output_tail(self) -> str:
        """The last lines of the test's own output (stdout and stderr as they came), bounded."""
        text = "".join(self.output[-TAIL_LINES:])
        return text[-TAIL_CHARS:]


def _writer(stream: IO[str]) -> Sink:
    def sink(line: str) -> None:
        stream.write(line)
        stream.flush()

    return sink


def _pump(stream: IO[str], handle: Sink) -> None:
    for line in iter(stream.readline, ""):
        handle(line)


def _ssh_failure(arch: Arch, node: Node, known_hosts: Path | None, stderr: list[str]) -> RocmBakeError:
    text = "".join(stderr).strip()
    last = text.splitlines()[-1] if text else "ssh exited 255"  # the rest was already streamed
    where = f"{node.name} ({node.host}:{node.port})"
    if "Host key verification failed" in text or "IDENTIFICATION HAS CHANGED" in text:
        source = known_hosts or "ssh's known_hosts"
        return RocmBakeError(
            f"gpu-test {arch}: host key of {where} not verified against {source}: refusing to connect "
            f"(check the node's fingerprint out of band and add it; host keys are never trusted on first use). "
            f"ssh said: {last}"
        )
    return RocmBakeError(f"gpu-test {arch}: cannot reach {where} over ssh: {last}")


def run_on_node(
    arch: Arch,
    node: Node,
    script: str,
    *,
    known_hosts: Path | None,
    identity: Path | None,
    on_stdout: Sink,
    on_stderr: Sink,
) -> tuple[int, LockProtocol, list[str]]:
    """Run a lock-wrapped script over ssh, streaming stdout and stderr line by line.

    Returns (status, lock state, output lines). ssh's own failure raises
    RocmBakeError, told apart from a test exiting 255 by the wrapper's
    "acquired" line, which only the node can print. A lock timeout raises
    :class:`LockTimeout`.
    """
    lock = LockProtocol(node.name)
    output: list[str] = []
    before_lock: list[str] = []
    guard = threading.Lock()

    def out(line: str) -> None:
        with guard:
            output.append(line)
            on_stdout(line)

    def err(line: str) -> None:
        with guard:
            if not lock.acquired and not line.startswith(PREFIX):
                before_lock.append(line)
            shown = lock.feed(line)
            if shown is None:
                return
            if not line.startswith(PREFIX):
                output.append(line)
            on_stderr(shown)

    argv = ssh_argv(node, script, known_hosts, identity)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
    except FileNotFoundError:
        raise RocmBakeError("ssh not found: install the Debian package openssh-client") from None
    assert proc.stdout is not None and proc.stderr is not None
    with proc:
        pumps = [
            threading.Thread(target=_pump, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, err), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        status = proc.wait()
        for pump in pumps:
            pump.join()
    if status == SSH_FAILURE_STATUS and not lock.acquired and not lock.messages:
        raise _ssh_failure(arch, node, known_hosts, before_lock)
    lock.check(status)
    return status, lock, output


def run_gpu_test(
    fleet: Fleet,
    arch: Arch,
    image: str | None,
    test: str,
    *,
    host: str | None = None,
    lock_timeout: float = 3600,
    known_hosts: Path | None = None,
    identity: Path | None = None,
    on_stdout: Sink | None = None,
    on_stderr: Sink | None = None,
) -> GpuTestResult:
    """Run ``test`` in ``image`` on a node holding ``arch``; stream its output.

    Not covered (no node has the card) is a result with status 3, never a
    pass; a node busy past ``lock_timeout`` is a result with status 4 and
    the holder named; bad input and ssh failures raise RocmBakeError.
    """
    node = select_node(fleet, arch, host)
    if node is None:
        return GpuTestResult(arch=arch, node=None, status=NOT_COVERED_STATUS, covered=False,
                             message=not_covered_message(arch))
    if not image:
        raise RocmBakeError(f"gpu-test {arch} on {node.name}: --image REF@sha256:… is required")
    ref = require_digest(image, arch)
    script = remote_script(node, ref, test, lock_timeout, arch)
    try:
        status, lock, output = run_on_node(
            arch, node, script, known_hosts=known_hosts, identity=identity,
            on_stdout=on_stdout or _writer(sys.stdout), on_stderr=on_stderr or _writer(sys.stderr),
        )
    except LockTimeout:  # its message, naming the holder, was already streamed
        others = [n for n in fleet.nodes_for(arch) if n != node.name]
        hint = f"; --host {' or --host '.join(others)} also holds {arch}" if others else ""
        return GpuTestResult(arch=arch, node=node.name, status=LOCK_TIMEOUT_STATUS, covered=True,
                             message=f"the test did not run: {node.name} stayed busy past {lock_timeout:g}s "
                                     f"(raise --lock-timeout{hint})", image=ref, lock_waited=True)
    verdict = "passed" if status == 0 else f"exited {status}"
    return GpuTestResult(arch=arch, node=node.name, status=status, covered=True,
                         message=f"test on {node.name} {verdict}", image=ref, lock_waited=lock.waited,
                         output=output)

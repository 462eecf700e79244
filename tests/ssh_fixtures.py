"""A real OpenSSH server on a loopback port standing in for a fleet node."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import services
from rocm_bake.ports import free_port

SSHD = Path("/usr/sbin/sshd")


@dataclass
class SshNode:
    port: int
    known_hosts: Path
    identity: Path
    other_known_hosts: Path  # same host, a different key: must be refused
    empty_known_hosts: Path  # no entry for the host at all: must be refused too
    log: Path


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture(scope="module")
def ssh_node(tmp_path_factory) -> SshNode:
    services.require("sshd")
    if not SSHD.exists() or shutil.which("ssh") is None:
        pytest.fail("sshd/ssh missing: install the Debian packages openssh-server and openssh-client (.ci/run does)")
    root = tmp_path_factory.mktemp("sshd")
    _keygen(root / "host_key")
    _keygen(root / "other_host_key")
    _keygen(root / "client_key")
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    port = free_port()
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
        f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile {root / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        "StrictModes no\nUsePAM no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    # sshd's log goes to a file: an undrained pipe would fill and stall sshd.
    log = root / "sshd.log"
    log_file = log.open("w")
    proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stderr=log_file)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"sshd exited {proc.returncode}: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("sshd did not start listening within 10 s")

    def known(key: str, name: str) -> Path:
        path = root / name
        pub = (root / f"{key}.pub").read_text().split()
        path.write_text(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
        return path

    empty = root / "empty_known_hosts"
    empty.write_text("")
    yield SshNode(port, known("host_key", "known_hosts"), root / "client_key",
                  known("other_host_key", "bad_known_hosts"), empty, log)
    proc.terminate()
    proc.wait(timeout=10)
    log_file.close()

"""The farm's daemons, each started in its host's namespace and waited for across the bridge.

Every daemon runs in its host's network namespace (:func:`in_namespace`), in its own session, its log in
``.rocm-bake/farm/<host>/``; ``down`` ends them by namespace (``ip netns
pids``), so nothing outlives the farm. Secrets (the registry password, the
bucket's keys) reach a daemon through files (0600) or its environment, never
its command line.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import warnings
from pathlib import Path

from rocm_bake.errors import RocmBakeError
from rocm_bake.local.farm import net
from rocm_bake.local.farm.layout import BUCKET, FLEET_NODES, REGISTRY_USER, Layout
from rocm_bake.registry.tls import RegistryTls, issue_leaf, write_private, write_public

TOOLS_BIN = Path(__file__).resolve().parents[3] / ".tools" / "bin"
REGISTRY_BINARY = Path("/usr/bin/docker-registry")
SSHD = Path("/usr/sbin/sshd")
START_TIMEOUT_S = 30.0


def tool(name: str) -> str:
    """An engine from ``.tools/bin`` (``make setup`` builds them), else PATH."""
    path = TOOLS_BIN / name
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise RocmBakeError(f"{name} not found in {TOOLS_BIN} or on PATH: run `make setup`")
    return found


def installed(path: Path, package: str) -> str:
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise RocmBakeError(f"{path} not found: install the Debian package {package!r} (`make setup` does)")
    return str(path)


def server_cert(layout: Layout, ca: RegistryTls, host: str) -> tuple[Path, Path]:
    """A server certificate for the host's address from the farm CA: (cert, key)."""
    directory = layout.host_dir(host)
    cert, key = directory / "server.pem", directory / "server-key.pem"
    issue_leaf(ca, key, cert, layout.address(host), f"IP:{layout.address(host)}", "serverAuth")
    return cert, key


def in_namespace(ns: str) -> list[str]:
    """The argv prefix that runs a program in network namespace ``ns`` with a mount namespace of its own.

    Not ``ip netns exec``: it mounts a fresh /sys, hiding /sys/fs/cgroup, and
    runc then fails every RUN step ("no cgroup mount found in mountinfo").
    The private mount namespace (propagation slave) keeps buildkitd's overlay
    mounts out of this host's table: they end with the process. Both tools
    exec, so the pid is the daemon's own.
    """
    return ["nsenter", f"--net=/run/netns/{ns}", "--", "unshare", "--mount", "--propagation", "slave", "--"]


def spawn(layout: Layout, host: str, argv: list[str], env: dict[str, str] | None = None) -> int:
    """Start ``argv`` in ``host``'s namespace and return its pid once it accepts TCP on the host's endpoint."""
    log = layout.host_dir(host) / "daemon.log"
    with log.open("ab") as out:
        process = subprocess.Popen([*in_namespace(layout.netns(host)), *argv], stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    (layout.host_dir(host) / "daemon.pid").write_text(f"{process.pid}\n")
    address, port = layout.endpoint(host).rsplit(":", 1)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise RocmBakeError(f"farm host {host}: {Path(argv[0]).name} exited with {process.returncode} "
                                f"(log {log}): {tail[0][:300]}")
        try:
            socket.create_connection((address, int(port)), timeout=0.5).close()
            return process.pid
        except OSError:
            if time.monotonic() > deadline:
                raise RocmBakeError(f"farm host {host}: nothing listens on {layout.endpoint(host)} after "
                                    f"{START_TIMEOUT_S:.0f}s (log {log})") from None
            time.sleep(0.1)


def start_builder(layout: Layout, ca: RegistryTls, host: str) -> int:
    """buildkitd on ``tcp://<address>:1234``, mutual TLS: it accepts only clients the farm CA signed.

    It reaches the farm registry over TLS trusting the farm CA; its namespace
    has no route anywhere else.
    """
    directory = layout.host_dir(host)
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = server_cert(layout, ca, host)
    config = directory / "buildkitd.toml"
    config.write_text("\n".join([
        "[worker.oci]", "  enabled = true", "[worker.containerd]", "  enabled = false",
        f'[registry."{layout.endpoint("registry")}"]', "  http = false", f"  ca = [{json.dumps(str(ca.ca_cert))}]",
    ]) + "\n")
    return spawn(layout, host, [
        tool("buildkitd"), "--root", str(directory / "root"), "--addr", f"tcp://{layout.endpoint(host)}",
        "--tlscacert", str(ca.ca_cert), "--tlscert", str(cert), "--tlskey", str(key), "--config", str(config),
    ])


#: bcrypt's work factor (2**5 rounds): the registry checks it on every request (a push makes dozens), and a
#: password of 192 random bits needs no slow hash to resist guessing.
BCRYPT_ROUNDS = 2**5


def bcrypt_hash(password: str) -> str:
    """docker-registry's htpasswd takes bcrypt only; glibc/libxcrypt's crypt(3) makes it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            raise RocmBakeError("this Python has no crypt module (bcrypt for the registry's htpasswd)") from None
        hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=BCRYPT_ROUNDS))
    if not hashed or not hashed.startswith("$2"):
        raise RocmBakeError("this system's crypt(3) makes no bcrypt hashes; the registry's htpasswd needs them")
    return hashed


def start_registry(layout: Layout, ca: RegistryTls, password: str) -> int:
    """docker-registry serving https with a farm certificate, refusing requests without the htpasswd login."""
    directory = layout.host_dir("registry")
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = server_cert(layout, ca, "registry")
    htpasswd = directory / "htpasswd"
    write_private(htpasswd, f"{REGISTRY_USER}:{bcrypt_hash(password)}\n".encode())
    config = directory / "config.yml"  # JSON is YAML: no YAML writer needed
    config.write_text(json.dumps({
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(directory / "storage")}, "delete": {"enabled": True}},
        "auth": {"htpasswd": {"realm": "rocm-bake farm registry", "path": str(htpasswd)}},
        "http": {"addr": layout.endpoint("registry"), "tls": {"certificate": str(cert), "key": str(key)},
                 "headers": {"X-Content-Type-Options": ["nosniff"]}},
    }, indent=2))
    return spawn(layout, "registry", [installed(REGISTRY_BINARY, "docker-registry"), "serve", str(config)])


def start_state(layout: Layout, access_key: str, secret_key: str) -> int:
    """versitygw's POSIX gateway on the state host, the bucket a directory; its keys in its environment only."""
    data = layout.host_dir("state") / "data"
    (data / BUCKET).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ROOT_", "VGW_"))}
    env.update({"ROOT_ACCESS_KEY": access_key, "ROOT_SECRET_KEY": secret_key})
    return spawn(layout, "state", [tool("versitygw"), "--port", layout.endpoint("state"), "posix", str(data)], env)


def keygen(path: Path) -> str:
    """A new ed25519 key pair at ``path``; returns the public key's ``type base64`` part."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rocm-bake farm", "-f", str(path)],
                   check=True, capture_output=True)
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def start_gpu_node(layout: Layout) -> int:
    """sshd on the gpu-node host, on the address of each fleet node the farm names (``FLEET_NODES``).

    Key login only; its host key is pinned for each address in the farm's known_hosts.
    """
    directory = layout.host_dir("gpu-node")
    directory.mkdir(parents=True, exist_ok=True)
    layout.known_hosts.parent.mkdir(parents=True, exist_ok=True)
    addresses = [layout.fleet_address(node) for node in FLEET_NODES]
    for address in addresses:
        if address != layout.address("gpu-node"):
            net.ip("-n", layout.netns("gpu-node"), "addr", "add", f"{address}/24", "dev", "eth0")
    host_key = keygen(directory / "host_key")
    write_public(directory / "authorized_keys", (keygen(layout.ssh_identity) + "\n").encode())
    write_public(layout.known_hosts, "".join(f"{address} {host_key}\n" for address in addresses).encode())
    config = directory / "sshd_config"
    config.write_text(
        "".join(f"ListenAddress {address}:22\n" for address in addresses) + f"HostKey {directory / 'host_key'}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\nPidFile {directory / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        "StrictModes no\nUsePAM no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    return spawn(layout, "gpu-node", [installed(SSHD, "openssh-server"), "-D", "-e", "-f", str(config)])

"""Run Debian's ``docker-registry`` on 127.0.0.1 with a generated config.

``make registry`` runs ``python -m rocm_bake.local start registry``, which
refuses a port another process holds and then starts one through this
module's ``main`` (``--port PORT --root DIR --tls-dir DIR --daemon``): it serves TLS with a
certificate from the checkout's own CA (``rocm_bake.registry.tls``), because
the docker-build provider reads registries over https only and its
``refresh`` cannot see a plain-http one. Without ``--tls-dir`` it serves plain
HTTP (loopback only), as the registry tests' own registries do. Both go
through :func:`start_registry`, which picks a free loopback port when given
none (the tests and the extract benchmark). No Docker daemon is
involved: the registry is the upstream distribution binary, storing blobs
under ``ROOT/storage/docker/registry/v2``.
"""

from __future__ import annotations

import argparse
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import yaml

from rocm_bake.local.daemons import daemon_env
from rocm_bake.errors import RocmBakeError
from rocm_bake.ports import free_port
from rocm_bake.registry.tls import RegistryTls, ensure_tls

REGISTRY_BINARY = Path("/usr/bin/docker-registry")
APT_PACKAGE = "docker-registry"
START_TIMEOUT_S = 20.0


class RunningRegistry(NamedTuple):
    """``address`` is ``127.0.0.1:PORT`` (image refs carry no scheme); ``tls`` is None for plain HTTP."""

    address: str
    process: subprocess.Popen[bytes]
    tls: RegistryTls | None = None

    def stop(self) -> None:
        terminate(self.process)


def registry_binary() -> Path:
    """The registry binary, or a loud error naming the apt package."""
    if not (REGISTRY_BINARY.is_file() and os.access(REGISTRY_BINARY, os.X_OK)):
        raise RocmBakeError(
            f"{REGISTRY_BINARY} not found: install the Debian package {APT_PACKAGE!r} "
            f"(sudo apt-get install {APT_PACKAGE}); .ci/run installs it"
        )
    return REGISTRY_BINARY


def write_config(root: Path, port: int, tls: RegistryTls | None = None, htpasswd: Path | None = None) -> Path:
    """Write a loopback-only registry config under ``root``: TLS when ``tls`` is given, and basic auth against
    an ``htpasswd`` file (bcrypt entries) when one is (the registry takes basic auth over TLS only)."""
    if htpasswd is not None and tls is None:
        raise RocmBakeError(f"htpasswd {htpasswd}: basic auth needs TLS (the password would cross in clear)")
    root.mkdir(parents=True, exist_ok=True)
    http: dict[str, object] = {"addr": f"127.0.0.1:{port}", "headers": {"X-Content-Type-Options": ["nosniff"]}}
    if tls is not None:
        http["tls"] = {"certificate": str(tls.server_cert), "key": str(tls.server_key)}
    config = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(root / "storage")},
            "delete": {"enabled": True},
        },
        "http": http,
    }
    if htpasswd is not None:
        config["auth"] = {"htpasswd": {"realm": "rocm-bake", "path": str(htpasswd)}}
    path = root / "config.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def v2_url(address: str, tls: RegistryTls | None) -> str:
    return f"{'https' if tls is not None else 'http'}://{address}/v2/"


def wait_for_v2(address: str, proc: subprocess.Popen[bytes] | None, log: Path | None,
                tls: RegistryTls | None = None) -> None:
    """Poll ``/v2/`` until the registry answers (200, or 401 when it asks for a login; over TLS, trusting only
    our CA, when ``tls``), or fail with its log."""
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(tls.ca_cert)) if tls else True
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise RocmBakeError(f"docker-registry on {address} exited with {proc.returncode}: {tail}")
        try:
            if httpx.get(v2_url(address, tls), timeout=1.0, verify=verify).status_code in (200, 401):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RocmBakeError(f"docker-registry on {address} did not answer /v2/ within {START_TIMEOUT_S:.0f}s")


def spawn(root: Path, port: int, *, detach: bool, tls: RegistryTls | None = None,
          htpasswd: Path | None = None) -> subprocess.Popen[bytes]:
    binary = registry_binary()
    config = write_config(root, port, tls, htpasswd)
    log = open(root / "registry.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [str(binary), "serve", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=detach,
            env=daemon_env(),
        )
    finally:
        log.close()


def start_registry(root: Path, port: int | None = None, tls: RegistryTls | None = None, *,
                   detach: bool = False, htpasswd: Path | None = None) -> RunningRegistry:
    """Start a registry storing under ``root`` and return once ``/v2/`` answers.

    With no ``port`` a free one is picked; a lost race for it is retried.
    With ``tls`` it serves https with that server certificate; with ``htpasswd`` too, it asks for a login
    from that file. ``detach`` puts it in its own session, so it outlives the caller
    (``rocm_bake.local.registry``).
    """
    attempts = 1 if port is not None else 3
    last: RocmBakeError | None = None
    for _ in range(attempts):
        chosen = port if port is not None else free_port()
        proc = spawn(root, chosen, detach=detach, tls=tls, htpasswd=htpasswd)
        address = f"127.0.0.1:{chosen}"
        try:
            wait_for_v2(address, proc, root / "registry.log", tls)
        except RocmBakeError as exc:
            terminate(proc)
            last = exc
            continue
        return RunningRegistry(address, proc, tls)
    assert last is not None
    raise last


def terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.local.registry_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--root", type=Path, required=True, help="registry storage and config dir")
    parser.add_argument("--tls-dir", type=Path, default=None,
                        help="serve https with the CA and certificate kept here (made once: rocm_bake.registry.tls)")
    parser.add_argument("--daemon", action="store_true", help="start in the background and return once /v2/ answers")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    try:
        tls = ensure_tls(args.tls_dir) if args.tls_dir is not None else None
        running = start_registry(root, args.port, tls, detach=args.daemon)
    except (RocmBakeError, OSError) as exc:
        print(f"rocm-bake: error: {exc}", file=sys.stderr)
        return 2
    address, proc = running.address, running.process
    scheme = f"https, CA {tls.ca_cert}" if tls is not None else "plain http"
    if args.daemon:
        (root / "registry.pid").write_text(f"{proc.pid}\n", encoding="utf-8")
        print(f"registry on {address} ({scheme}; pid {proc.pid}, root {root}, log {root / 'registry.log'})")
        return 0
    print(f"registry on {address} ({scheme}; root {root}); Ctrl-C stops it")
    signal.signal(signal.SIGTERM, lambda *_: running.stop())
    try:
        return proc.wait()
    except KeyboardInterrupt:
        running.stop()
        return 0


if __name__ == "__main__":
    sys.exit(main())

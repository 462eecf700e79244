"""This checkout's registry (``make registry`` / ``make down``): started once, never another's adopted.

The registry runs on the checkout's own port (``rocm_bake.checkout``) with
its storage, config, log and pidfile under ``REGISTRY_DIR``. ``start`` finds
it running by its pidfile (the pid must still be ``docker-registry`` serving
this dir's config); a port that answers without being ours is refused,
naming the port, rather than used: pushing into another checkout's registry
is how two checkouts' builds got mixed up.

With ``--tls-dir`` (``make registry``: ``.rocm-bake/tls``) it serves https
with a certificate from the checkout's own CA (``rocm_bake.registry.tls``);
a running plain-http one is restarted with TLS, and so is one started before
its certificate was reissued (a replaced CA, a renewal): it would go on
serving a certificate that the CA in the bundle no longer vouches for.

Usage: ``python -m rocm_bake.local start registry --port P --root DIR [--tls-dir DIR]`` (``stop`` and
``status`` through ``rocm_bake.local`` too).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocm_bake.local.daemons import cmdline, running_pid, stop
from rocm_bake.ports import port_in_use
from rocm_bake.errors import RocmBakeError

PROGRAM = "docker-registry"


def pidfile(root: Path) -> Path:
    return root / "registry.pid"


def ours(root: Path) -> int | None:
    """The pid of the registry serving ``root``'s config, if it runs."""
    return running_pid(pidfile(root), PROGRAM, root / "config.yml")


def configured_port(root: Path) -> int | None:
    """The port the running registry's config names (``http.addr``)."""
    try:
        for line in (root / "config.yml").read_text(encoding="utf-8").splitlines():
            if line.strip().startswith("addr:"):
                return int(line.rsplit(":", 1)[1].strip().strip("'\""))
    except (OSError, ValueError):
        return None
    return None


def serves_tls(root: Path) -> bool:
    """Whether the running registry's config names a TLS certificate (``http.tls``)."""
    try:
        return "certificate:" in (root / "config.yml").read_text(encoding="utf-8")
    except OSError:
        return False


def serves_old_certificate(root: Path, tls_dir: Path | None) -> bool:
    """The server certificate in ``tls_dir`` was written after the running registry started (its pidfile)."""
    if tls_dir is None:
        return False
    from rocm_bake.registry.tls import RegistryTls

    try:
        return RegistryTls(tls_dir).server_cert.stat().st_mtime_ns > pidfile(root).stat().st_mtime_ns
    except OSError:
        return False


def start(root: Path, port: int, tls_dir: Path | None = None) -> str:
    """Start this checkout's registry on ``port`` unless it already runs there; refuse a port held by others."""
    root = root.resolve()
    pid = ours(root)
    scheme = "https" if tls_dir is not None else "http"
    if pid is not None and configured_port(root) == port and serves_tls(root) == (tls_dir is not None) \
            and str(root / "config.yml").encode() in b" ".join(cmdline(pid)) \
            and not serves_old_certificate(root, tls_dir):  # a moved root: it would serve the old path
        return f"registry already running on {scheme}://127.0.0.1:{port} (pid {pid}, this checkout's, root {root})"
    if pid is not None:
        print(f"registry: restarting this checkout's registry (pid {pid}) on {scheme}://127.0.0.1:{port}", flush=True)
        stop_registry(root)
    if port_in_use(port):
        raise RocmBakeError(
            f"127.0.0.1:{port} is in use by a process that is not this checkout's registry (no live pid in "
            f"{pidfile(root)}); it is never adopted: free the port or choose another with REGISTRY_PORT="
        )
    from rocm_bake.local.registry_server import main as serve

    tls_args = ["--tls-dir", str(tls_dir)] if tls_dir is not None else []
    if serve(["--port", str(port), "--root", str(root), *tls_args, "--daemon"]) != 0:
        raise RocmBakeError(f"the registry did not start on 127.0.0.1:{port} (see {root / 'registry.log'})")
    return f"registry: this checkout's, on {scheme}://127.0.0.1:{port}"


def stop_registry(root: Path) -> str:
    root = root.resolve()
    return stop(pidfile(root), PROGRAM, root / "config.yml", "registry", grace_s=10.0)


def status(root: Path) -> str:
    pid = ours(root.resolve())
    return f"registry: running, pid {pid}, 127.0.0.1:{configured_port(root)}" if pid else "registry: not running"


def start_main(argv: list[str]) -> int:
    """``python -m rocm_bake.local start registry --port P --root DIR [--tls-dir DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.local start registry",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-dir", type=Path, default=None,
                        help="serve https with the CA and certificate kept here (make: .rocm-bake/tls)")
    args = parser.parse_args(argv)
    try:
        print(start(args.root, args.port, args.tls_dir))
    except RocmBakeError as exc:
        print(f"rocm-bake: error: {exc}", file=sys.stderr)
        return 2
    return 0

#!/usr/bin/env python3
"""A BuildKit daemon on a unix socket, registered as a buildx ``remote`` builder.

This is the path a build farm takes: the stack's ``rocm-bake:builder`` names
a buildx builder, and with the ``remote`` driver (or ``kubernetes``) every
image build runs wherever that BuildKit runs. Scale-out is BuildKit's; here
it is one ``buildkitd`` (runc worker from Debian's runc) with its state,
socket, config and log under ``.rocm-bake/buildkit/``.

The runc worker's snapshotter is BuildKit's ``auto``: overlayfs where the
kernel allows it, else native (the log's first line says which). buildkitd
runs as root; it is idempotent: a second ``start`` finds it running and says
so (a changed registry list restarts it), ``stop`` ends it.

The local registry serves TLS (``make registry``: a certificate from the
checkout's own CA in ``.rocm-bake/tls``), and ``--registry-ca`` makes
buildkitd trust that CA for the registries named (``buildkitd.toml``:
``ca = [...]`` and ``http = false``; without ``http = false`` BuildKit speaks
plain HTTP to any 127.0.0.1 port). Without ``--registry-ca`` the registries
named are loopback ones reached over plain HTTP (``http``/``insecure``), as
the engine tests' plain registries are. Tests start their own daemon with
:func:`start` to keep state and the buildx config private.

Nothing here is global. The builder's name carries the checkout's id
(``rocm-bake-<id>``, chosen once in ``.rocm-bake/checkout.json``) and it is
registered in the checkout's own buildx config, ``$BUILDX_CONFIG``, which the
Makefile and ``.tools/bin/pulumi`` set to ``.rocm-bake/buildx`` (so ``docker
buildx``, standalone ``buildx`` and the docker-build plugin all find it).
A name that is already registered for another endpoint is never re-pointed:
``start`` refuses and names the owner (the checkout whose buildkitd socket it
names), and ``stop`` removes only a registration that points at our socket.

Usage: ``python -m rocm_bake.local start builder [--name NAME] [--registry HOST:PORT ...]
[--registry-ca CA.pem]`` (the name and registry default to this checkout's); ``stop`` and ``status``
go through ``rocm_bake.local`` as every daemon's do.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rocm_bake.local import daemons
from rocm_bake.loopback import is_loopback_registry

ROOT = Path(__file__).resolve().parents[2]

TOOLS_BIN = ROOT / ".tools" / "bin"
STATE = ROOT / ".rocm-bake" / "buildkit"


@dataclass
class Builder:
    """A started buildkitd and the buildx builder that names it."""

    name: str
    state: Path
    pid: int

    @property
    def socket(self) -> Path:
        return self.state / "buildkitd.sock"

    @property
    def log(self) -> Path:
        return self.state / "buildkitd.log"


def find(name: str) -> str | None:
    """``name`` in .tools/bin, else on PATH; None when neither has it (a fresh clone, or after `make clean`)."""
    path = TOOLS_BIN / name
    return str(path) if path.exists() else shutil.which(name)


def binary(name: str) -> str:
    found = find(name)
    if found is None:
        sys.exit(f"builder: {name} not found in .tools/bin or on PATH: run `make setup`")
    return found


def config_text(registries: list[str], ca: Path | None = None) -> str:
    """TLS trusting ``ca`` for the registries named; without ``ca``, plain HTTP, and only to loopback ones."""
    lines = ["[worker.oci]", "  enabled = true", "[worker.containerd]", "  enabled = false"]
    for registry in registries:
        if ca is not None:
            lines += [f'[registry."{registry}"]', "  http = false", f"  ca = [{json.dumps(str(ca))}]"]
            continue
        if not is_loopback_registry(registry):
            sys.exit(f"builder: {registry} is not a loopback registry; only loopback registries may be plain HTTP")
        lines += [f'[registry."{registry}"]', "  http = true", "  insecure = true"]
    return "\n".join(lines) + "\n"


def buildx(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([binary("buildx"), *args], env={**os.environ, **(env or {})}, check=check,
                          capture_output=True, text=True)


def running_pid(state: Path) -> int | None:
    """The pid of the buildkitd this state dir started, if it still runs (a reused pid is not ours)."""
    return daemons.running_pid(state / "buildkitd.pid", "buildkitd", state)


def registered_endpoint(name: str, env: dict[str, str] | None) -> str | None:
    """The endpoint buildx has for builder ``name`` (None when there is no such builder)."""
    result = buildx("inspect", name, env=env, check=False)
    if result.returncode != 0:
        return None
    for line in result.stdout.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Endpoint":
            return value.strip()
    return ""


def owner(endpoint: str) -> str:
    """Who registered a builder: the checkout whose buildkitd socket the endpoint names, else the endpoint."""
    path = endpoint.removeprefix("unix://")
    if endpoint.startswith("unix://") and "/.rocm-bake/" in path:
        return f"checkout {path.split('/.rocm-bake/', 1)[0]} ({endpoint})"
    return f"another owner ({endpoint or 'a non-remote driver'})"


def abandoned(endpoint: str) -> bool:
    """A unix socket endpoint whose checkout directory no longer exists: nobody owns it any more."""
    path = endpoint.removeprefix("unix://")
    return endpoint.startswith("unix://") and "/.rocm-bake/" in path and \
        not Path(path.split("/.rocm-bake/", 1)[0]).exists()


def claimed_endpoint(name: str, socket: Path, env: dict[str, str] | None) -> str | None:
    """Where ``name`` points if it is ours (None: unregistered); another checkout's name is refused, naming it."""
    endpoint = registered_endpoint(name, env)
    if endpoint is None or endpoint == f"unix://{socket}":
        return endpoint
    if not abandoned(endpoint):
        sys.exit(f"builder: buildx builder {name!r} is registered by {owner(endpoint)}; it is not re-pointed. "
                 f"Name another (BUILDER=...), or stop it there (make down)")
    print(f"builder: buildx builder {name!r} named {endpoint}, whose checkout is gone; re-registering", flush=True)
    buildx("rm", name, env=env, check=False)
    return None


def start(name: str, state: Path, registries: list[str], env: dict[str, str] | None = None,
          ca: Path | None = None) -> Builder:
    """Start buildkitd unless it already runs, then (re)register the buildx remote builder ``name``.

    With ``ca`` the registries named are reached over TLS trusting it; without, over plain HTTP.
    """
    if ca is not None and not ca.is_file():
        sys.exit(f"builder: registry CA {ca} not found: `make registry` makes it (.rocm-bake/tls/ca.pem)")
    if os.geteuid() != 0:
        sys.exit("builder: buildkitd runs as root here (runc worker; rootless needs rootlesskit): run as root")
    state.mkdir(parents=True, exist_ok=True)
    socket = state / "buildkitd.sock"
    claimed_endpoint(name, socket, env)  # refuse another's name before starting anything
    pid = running_pid(state)
    config = state / "buildkitd.toml"
    wanted = config_text(registries, ca.resolve() if ca else None)
    if pid is not None and config.exists() and config.read_text() != wanted:
        print(f"builder: restarting buildkitd (pid {pid}): its registries change to {', '.join(registries)}",
              flush=True)
        daemons.stop(state / "buildkitd.pid", "buildkitd", state, "builder")
        pid = None
    if pid is None:
        config.write_text(wanted)
        socket.unlink(missing_ok=True)
        with (state / "buildkitd.log").open("a") as log:
            process = subprocess.Popen(
                [binary("buildkitd"), "--root", str(state / "root"), "--addr", f"unix://{socket}",
                 "--config", str(state / "buildkitd.toml")],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=daemons.daemon_env(),
            )
        pid = process.pid
        (state / "buildkitd.pid").write_text(str(pid))
        deadline = time.monotonic() + 30
        while not socket.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (state / "buildkitd.log").read_text()[-2000:]
                sys.exit(f"builder: buildkitd did not start (see {state / 'buildkitd.log'}):\n{tail}")
            time.sleep(0.1)
        print(f"builder: buildkitd started (pid {pid}, unix://{socket})", flush=True)
    else:
        print(f"builder: buildkitd already running (pid {pid}, unix://{socket})", flush=True)
    endpoint = claimed_endpoint(name, socket, env)
    if endpoint is None:
        created = buildx("create", "--name", name, "--driver", "remote", f"unix://{socket}", env=env, check=False)
        if created.returncode != 0:
            sys.exit(f"builder: buildx create failed: {created.stderr.strip()}")
        print(f"builder: registered buildx builder {name!r} (remote driver)", flush=True)
    return Builder(name, state, pid)


def stop(name: str | None, state: Path, env: dict[str, str] | None = None) -> None:
    """Stop our buildkitd (by its pidfile: buildx is not needed), then remove the registration if it is ours.

    Ours: it names our socket, or a socket in a checkout directory that no longer exists (this checkout
    before it was moved). Without buildx (a fresh clone, after `make clean`) the registration stays in
    this checkout's own buildx config; the next `make builder` takes it up again.
    """
    print(daemons.stop(state / "buildkitd.pid", "buildkitd", state, "builder"))
    if name is None or find("buildx") is None:
        return
    endpoint = registered_endpoint(name, env)
    if endpoint is not None and (endpoint == f"unix://{state / 'buildkitd.sock'}" or abandoned(endpoint)):
        buildx("rm", name, env=env, check=False)


def checkout_defaults() -> tuple[str, str]:
    """This checkout's builder name and registry (``.rocm-bake/checkout.json``, made on first use)."""
    from rocm_bake.checkout import ensure_checkout
    from rocm_bake.errors import RocmBakeError

    try:
        checkout, _ = ensure_checkout(ROOT)
    except RocmBakeError as exc:
        sys.exit(f"builder: {exc}")
    return checkout.builder, checkout.registry


def recorded_name(root: Path = ROOT) -> str | None:
    """The checkout's builder name if it has chosen one (stop never makes the record, nor fails on a bad one)."""
    from rocm_bake.checkout import load_checkout
    from rocm_bake.errors import RocmBakeError

    try:
        checkout = load_checkout(root)
    except RocmBakeError as exc:
        print(f"builder: {exc} (the buildkitd is still stopped; its buildx registration is left)", file=sys.stderr)
        return None
    return checkout.builder if checkout is not None else None


def buildx_env(root: Path = ROOT) -> dict[str, str]:
    """The checkout's own buildx config unless the caller chose one (the Makefile exports it)."""
    return {"BUILDX_CONFIG": os.environ.get("BUILDX_CONFIG") or str(root / ".rocm-bake" / "buildx")}


def status(state: Path = STATE) -> str:
    pid = running_pid(state)
    return f"builder: {'running, pid ' + str(pid) if pid else 'not running'}"


def start_main(argv: list[str]) -> int:
    """``python -m rocm_bake.local start builder [--name NAME] [--registry HOST:PORT ...] [--registry-ca CA]``."""
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.local start builder",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=None, help="buildx builder name (default: this checkout's)")
    parser.add_argument("--state", type=Path, default=STATE)
    parser.add_argument("--registry", "--insecure-registry", dest="registry", action="append", default=None,
                        help="a registry this builder pushes to and pulls from (default: this checkout's)")
    parser.add_argument("--registry-ca", type=Path, default=None,
                        help="reach the registries named over TLS trusting this CA (make registry's "
                             ".rocm-bake/tls/ca.pem); without it, plain HTTP to loopback only")
    args = parser.parse_args(argv)
    name, registry = checkout_defaults()
    start(args.name or name, args.state, args.registry or [registry], env=buildx_env(), ca=args.registry_ca)
    return 0

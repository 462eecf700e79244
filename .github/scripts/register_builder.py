"""Register the build farm as the buildx ``remote`` builder the stack config names, and reach it once.

Usage::

    python3 .github/scripts/register_builder.py --name rocm-bake --buildx .tools/bin/buildx \\
        --tls-dir "$RUNNER_TEMP/buildkit-tls"

Reads ``BUILDKIT_HOST`` and, for ``tcp://``, ``BUILDKIT_CA_CERT``,
``BUILDKIT_CLIENT_CERT`` and ``BUILDKIT_CLIENT_KEY`` (PEM text) from the
environment. The images build on the farm, never on the runner: the stack's
``rocm-bake:builder`` names a buildx builder, and here that name points at
the farm's BuildKit through the ``remote`` driver (``make builder`` takes the
same path with a local buildkitd on a unix socket). Scale-out is BuildKit's.

Over ``tcp://`` the connection is mutual TLS, always: BuildKit runs any build
step for whoever reaches it, so the farm checks the runner's client
certificate and the runner checks the farm's against the CA. The PEMs are
written 0600 into ``--tls-dir`` (the runner's temp dir, wiped after the job).

After ``buildx create``, ``buildx inspect --bootstrap`` reaches the farm, so
an unreachable or misconfigured farm fails here, naming the host, and not an
hour into ``pulumi up``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_secrets import README, SecretsError, farm_secrets  # noqa: E402

TLS_FILES = {"BUILDKIT_CA_CERT": "cacert", "BUILDKIT_CLIENT_CERT": "cert", "BUILDKIT_CLIENT_KEY": "key"}


def create_argv(name: str, host: str, tls: Mapping[str, Path]) -> list[str]:
    """``buildx create`` arguments for the farm (driver options name absolute PEM paths)."""
    argv = ["create", "--name", name, "--driver", "remote"]
    for option, path in tls.items():
        argv += ["--driver-opt", f"{option}={path}"]
    return [*argv, host]


def write_tls(env: Mapping[str, str], names: tuple[str, ...], tls_dir: Path) -> dict[str, Path]:
    """Write the farm's PEM secrets, 0600, and return {driver option: path}."""
    if not names:
        return {}
    lacking = [n for n in names if not env.get(n, "").strip()]
    if lacking:
        raise SecretsError(f"BUILDKIT_HOST is tcp://, which needs mutual TLS: set {', '.join(lacking)}")
    tls_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    paths = {}
    for name in names:
        path = (tls_dir / f"{TLS_FILES[name]}.pem").resolve()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(env[name].strip() + "\n")
        paths[TLS_FILES[name]] = path
    return paths


def run(buildx: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([buildx, *args], capture_output=True, text=True, timeout=120)


def register(name: str, buildx: str, tls_dir: Path, env: Mapping[str, str]) -> str:
    """Register and bootstrap the farm; return what ``buildx inspect`` says about it."""
    host = env.get("BUILDKIT_HOST", "").strip()
    if not host:
        raise SecretsError("BUILDKIT_HOST is not set: the build farm's BuildKit endpoint")
    tls = write_tls(env, farm_secrets(host), tls_dir)
    if run(buildx, "inspect", name).returncode == 0:
        run(buildx, "rm", name)  # a reused machine: re-register with this run's endpoint and certificates
    created = run(buildx, *create_argv(name, host, tls))
    if created.returncode != 0:
        raise SecretsError(f"buildx create --name {name} --driver remote {host} failed: {created.stderr.strip()}")
    booted = run(buildx, "inspect", "--bootstrap", name)
    if booted.returncode != 0:
        raise SecretsError(f"the build farm at {host} did not answer as builder {name!r}: "
                           f"{booted.stderr.strip()[-1500:]}")
    return booted.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the builder name the stack config gives (rocm-bake:builder)")
    parser.add_argument("--buildx", default="buildx")
    parser.add_argument("--tls-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        inspect = register(args.name, args.buildx, args.tls_dir, os.environ)
    except SecretsError as exc:
        print(f"::error title=build farm::{exc} ({README})")
        return 1
    host = os.environ["BUILDKIT_HOST"].strip()
    version = next((line.split(":", 1)[1].strip() for line in inspect.splitlines()
                    if line.strip().startswith("BuildKit version")), "unknown")
    tls = " over mutual TLS" if farm_secrets(host) else ""
    print(f"builder {args.name!r}: the build farm at {host}{tls} (remote driver, BuildKit {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

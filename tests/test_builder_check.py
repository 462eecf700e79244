"""A dead builder is named with its endpoint; only rocm-bake's own gets the ``make builder`` remedy."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from rocm_bake.builder_check import builder_problem


def closed_endpoint() -> str:
    """A loopback TCP endpoint nothing listens on (a port the kernel just gave out and was let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"tcp://127.0.0.1:{port}"


def register(buildx_config: Path, name: str, endpoint: str) -> None:
    """A ``remote`` builder as buildx records it in ``$BUILDX_CONFIG/instances/<name>``."""
    (buildx_config / "instances").mkdir(parents=True, exist_ok=True)
    (buildx_config / "instances" / name).write_text(json.dumps(
        {"Name": name, "Driver": "remote", "Nodes": [{"Name": f"{name}0", "Endpoint": endpoint}]}))


def test_a_dead_remote_builder_is_named_with_its_endpoint_and_only_ours_gets_make_builder(tmp_path: Path) -> None:
    endpoint = closed_endpoint()
    env = {"BUILDX_CONFIG": str(tmp_path)}
    for name in ("rocm-bake-0a1b2c3d", "farm-builder-2"):
        register(tmp_path, name, endpoint)
    dead = f"(remote, {endpoint}): nothing is listening at {endpoint} (buildkitd is dead)"
    assert builder_problem("rocm-bake-0a1b2c3d", env) == \
        f"buildx builder 'rocm-bake-0a1b2c3d' {dead}; `make builder` starts rocm-bake's own"
    # another host's buildkitd (a farm's, a team's): `make builder` would start a local one, not revive it
    assert builder_problem("farm-builder-2", env) == f"buildx builder 'farm-builder-2' {dead}"

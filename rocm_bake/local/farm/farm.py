"""Bring a farm up and take it down: the order of the steps, and the undo of all of them.

``up`` claims a slot, makes the network, the farm CA and each host, then
registers both builders with buildx (``remote`` driver over mutual TLS) in
the checkout's ``BUILDX_CONFIG`` and writes the registry login into the
farm's own ``DOCKER_CONFIG`` as ``docker login`` would. Any failure, Ctrl-C
included, takes down whatever part was made. ``down`` removes what a farm of
this checkout made, found by its recorded slot, and nothing else.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocm_bake.errors import RocmBakeError
from rocm_bake.local import builder
from rocm_bake.local.farm import fleet, hosts, net, slots
from rocm_bake.local.farm.layout import BUILDERS, DEMO_STACKS, HOSTS, REGISTRY_USER, Layout, farm_dir
from rocm_bake.registry.tls import RegistryTls, issue_leaf, make_ca, write_bundle, write_private

Say = Callable[[str], None]


def read_exports(env_file: Path) -> dict[str, str]:
    """The ``export NAME=VALUE`` lines ``make farm`` wrote (:meth:`Farm.export_lines`), as a mapping."""
    found = {}
    for line in env_file.read_text().splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            found[name] = value
    return found


@dataclass(frozen=True)
class Farm:
    """A farm that is up: its layout and the lines a shell needs to use it."""

    layout: Layout
    exports: dict[str, str]

    def export_lines(self) -> list[str]:
        return [f"export {name}={shlex.quote(value)}" for name, value in self.exports.items()]

    def host_lines(self) -> list[str]:
        layout = self.layout
        what = {
            "builder-1": f"buildkitd, mTLS; buildx builder {layout.buildx_name('builder-1')}",
            "builder-2": f"buildkitd, mTLS; buildx builder {layout.buildx_name('builder-2')}",
            "registry": f"docker-registry, https, login in {layout.docker_config}/config.json",
            "state": f"versitygw, bucket in PULUMI_BACKEND_URL",
            "gpu-node": f"sshd, host key pinned in {layout.known_hosts}; fleet nodes in {layout.fleet}",
        }
        return [f"{host:<10} {layout.endpoint(host):<22} netns {layout.netns(host)}: {what[host]}" for host in HOSTS]


def buildx(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """buildx in checkout ``root``'s own buildx config, where ``make builder`` registers its builder too."""
    return builder.buildx(*args, env=builder.buildx_env(root), check=False)


def register_builders(layout: Layout, ca: RegistryTls) -> None:
    """Both builders as buildx ``remote`` builders, each with the farm client certificate."""
    client = layout.dir / "client"
    client.mkdir(exist_ok=True)
    issue_leaf(ca, client / "key.pem", client / "cert.pem", "rocm-bake farm client", None, "clientAuth")
    for host in BUILDERS:
        name = layout.buildx_name(host)
        if builder.registered_endpoint(name, builder.buildx_env(layout.root)) is not None:
            buildx(layout.root, "rm", name)  # an earlier farm of this checkout's: re-pointed to this one
        opts = f"cacert={ca.ca_cert},cert={client / 'cert.pem'},key={client / 'key.pem'}"
        created = buildx(layout.root, "create", "--name", name, "--driver", "remote", "--driver-opt", opts,
                         f"tcp://{layout.endpoint(host)}")
        if created.returncode != 0:
            raise RocmBakeError(f"buildx create {name}: {created.stderr.strip().splitlines()[-1:]}")


def unregister_builders(layout: Layout) -> list[str]:
    """Remove the builders that point at this farm's endpoints, never one re-pointed elsewhere since."""
    removed = []
    for host in BUILDERS:
        name = layout.buildx_name(host)
        if builder.registered_endpoint(name, builder.buildx_env(layout.root)) == f"tcp://{layout.endpoint(host)}":
            buildx(layout.root, "rm", name)
            removed.append(f"buildx builder {name}")
    return removed


def write_docker_login(layout: Layout, password: str) -> None:
    """``$DOCKER_CONFIG/config.json`` as ``docker login`` writes it: ``auths`` with base64 ``user:password``."""
    layout.docker_config.mkdir(mode=0o700, exist_ok=True)
    auth = base64.b64encode(f"{REGISTRY_USER}:{password}".encode()).decode()
    config = {"auths": {layout.endpoint("registry"): {"auth": auth}}}
    write_private(layout.docker_config / "config.json", (json.dumps(config, indent="\t") + "\n").encode())


def exports(layout: Layout, ca: RegistryTls, access_key: str, secret_key: str) -> dict[str, str]:
    return {
        **builder.buildx_env(layout.root),
        "DOCKER_CONFIG": str(layout.docker_config),
        "SSL_CERT_FILE": str(ca.bundle),
        "ROCM_BAKE_REGISTRY": layout.endpoint("registry"),
        # Each demo stack on a builder of its own: `rocm-bake arches up` runs them at the same time.
        "ROCM_BAKE_STACK_BUILDERS": ",".join(f"{stack}={layout.buildx_name(host)}"
                                             for stack, host in zip(DEMO_STACKS, BUILDERS)),
        "PULUMI_BACKEND_URL": layout.backend_url,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
        "ROCM_BAKE_FLEET": str(layout.fleet),
        "ROCM_BAKE_SSH_KNOWN_HOSTS": str(layout.known_hosts),
        "ROCM_BAKE_SSH_IDENTITY": str(layout.ssh_identity),
    }


def build(layout: Layout, say: Say) -> Farm:
    net.create(layout)
    say(f"network: bridge {layout.bridge} {layout.gateway}/24, namespaces {layout.prefix}-*")
    ca = RegistryTls(layout.tls_dir)
    ca.dir.mkdir(mode=0o700)
    make_ca(ca, "rocm-bake farm CA", layout.ca_constraints)
    write_bundle(ca)
    for host in BUILDERS:
        say(f"{host}: buildkitd pid {hosts.start_builder(layout, ca, host)}")
    password = secrets.token_urlsafe(24)
    say(f"registry: docker-registry pid {hosts.start_registry(layout, ca, password)}")
    access_key, secret_key = "rb" + secrets.token_hex(9), secrets.token_urlsafe(30)
    say(f"state: versitygw pid {hosts.start_state(layout, access_key, secret_key)}")
    say(f"gpu-node: sshd pid {hosts.start_gpu_node(layout)}")
    register_builders(layout, ca)
    write_docker_login(layout, password)
    fleet.write_fleet(layout, password)
    farm = Farm(layout, exports(layout, ca, access_key, secret_key))
    write_private(layout.env_file, ("\n".join(farm.export_lines()) + "\n").encode())
    return farm


def up(root: Path, say: Say = print) -> Farm:
    """A new farm for checkout ``root``; a farm it already has is taken down first."""
    if os.geteuid() != 0:
        raise RocmBakeError("a farm needs root (ip netns, veths, a bridge): run make farm as root")
    if slots.held_slot(root) is not None:
        say("farm: this checkout's earlier farm is taken down first")
        down(root, say)
    layout = slots.claim_slot(root)
    say(f"farm: slot {layout.slot}, subnet {layout.subnet}, files in {layout.dir}")
    try:
        return build(layout, say)
    except BaseException as exc:
        say(f"farm: setup failed ({str(exc)[:300] or type(exc).__name__}); taking down what was made")
        try:
            down(root, say)
        except RocmBakeError as undo:
            say(f"farm: taking it down failed too: {undo}")
        raise


def down(root: Path, say: Say = print) -> list[str]:
    """Remove this checkout's farm: processes, namespaces, veths, bridge, buildx builders, files, claim."""
    slot = slots.held_slot(root)
    if slot is None:
        if farm_dir(root).exists():
            shutil.rmtree(farm_dir(root))
            say(f"farm: no slot recorded; removed {farm_dir(root)}")
        else:
            say("farm: none")
        return []
    layout = Layout(root, slot)
    removed = net.destroy(layout) + unregister_builders(layout)
    if layout.dir.exists():
        shutil.rmtree(layout.dir)
    slots.release_slot(layout)
    removed.append(f"files {layout.dir}")
    say(f"farm: removed {', '.join(removed)}")
    return removed

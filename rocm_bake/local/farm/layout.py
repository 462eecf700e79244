"""Where a farm's hosts live: names, addresses, ports and files, all derived from its slot.

Interface names carry at most 15 characters (IFNAMSIZ): ``rbf255-gpu`` and
``rbf255br`` are the longest this makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The farm's hosts, in the order they are made.
HOSTS = ("builder-1", "builder-2", "registry", "state", "gpu-node")
BUILDERS = ("builder-1", "builder-2")
#: The demo stacks, one per builder (in BUILDERS' order) in the exports' ROCM_BAKE_STACK_BUILDERS.
DEMO_STACKS = ("demo-gfx950", "demo-gfx1201")
#: Each host's last address octet and the short name its host-side veth carries.
HOST_OCTET = {"builder-1": 11, "builder-2": 12, "registry": 20, "state": 30, "gpu-node": 40}
VETH_SUFFIX = {"builder-1": "b1", "builder-2": "b2", "registry": "reg", "state": "st", "gpu-node": "gpu"}
#: The port each host's daemon listens on.
HOST_PORT = {"builder-1": 1234, "builder-2": 1234, "registry": 5000, "state": 7070, "gpu-node": 22}
#: The fleet nodes the farm's fleet manifest names, each an address of the gpu-node host (last octet): the
#: default one and a second to move a test to with GPU_HOST=.
FLEET_NODES = {"gpu-node": 40, "gpu-node-2": 41}
#: Slots are the third octet of 198.18.<slot>.0/24.
SLOTS = range(1, 256)
BUCKET = "rocm-bake-state"
REGION = "us-east-1"
REGISTRY_USER = "farm"
FARM_DIR = ".rocm-bake/farm"


@dataclass(frozen=True)
class Layout:
    """One farm: checkout ``root``'s, in ``slot``."""

    root: Path
    slot: int

    @property
    def prefix(self) -> str:
        return f"rbf{self.slot}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    def netns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def veth(self, host: str) -> str:
        return f"{self.prefix}-{VETH_SUFFIX[host]}"

    @property
    def subnet(self) -> str:
        return f"198.18.{self.slot}.0/24"

    @property
    def ca_constraints(self) -> str:
        """The farm CA vouches for the farm's own subnet only (openssl ``nameConstraints``)."""
        return f"nameConstraints=critical,permitted;IP:198.18.{self.slot}.0/255.255.255.0"

    @property
    def gateway(self) -> str:
        """The bridge's own address: how this host's namespace (make, buildx, pulumi) reaches the farm."""
        return f"198.18.{self.slot}.1"

    def address(self, host: str) -> str:
        return f"198.18.{self.slot}.{HOST_OCTET[host]}"

    def endpoint(self, host: str) -> str:
        return f"{self.address(host)}:{HOST_PORT[host]}"

    def buildx_name(self, host: str) -> str:
        return f"farm-{host}"

    @property
    def dir(self) -> Path:
        return farm_dir(self.root)

    def host_dir(self, host: str) -> Path:
        return self.dir / host

    @property
    def tls_dir(self) -> Path:
        return self.dir / "tls"

    @property
    def docker_config(self) -> Path:
        return self.dir / "docker"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "ssh" / "known_hosts"

    @property
    def ssh_identity(self) -> Path:
        return self.dir / "ssh" / "id_ed25519"

    def fleet_address(self, node: str) -> str:
        return f"198.18.{self.slot}.{FLEET_NODES[node]}"

    @property
    def fleet(self) -> Path:
        return self.dir / "fleet.yml"

    @property
    def env_file(self) -> Path:
        return self.dir / "env"

    @property
    def backend_url(self) -> str:
        return (f"s3://{BUCKET}?endpoint=http://{self.endpoint('state')}"
                f"&use_path_style=true&region={REGION}")


def farm_dir(root: Path) -> Path:
    return root / FARM_DIR


def slot_record(root: Path) -> Path:
    """The slot this checkout's farm holds: written first by ``up``, read by ``down``."""
    return farm_dir(root) / "slot"

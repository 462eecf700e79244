"""The farm's fleet: a manifest (``ROCM_BAKE_FLEET``) whose nodes are addresses of the gpu-node host.

The shipped ``manifests/fleet.yml`` names real machines (snoc-navi,
snoc-strix) this machine must never contact. The farm writes its own
manifest instead: ``gpu-node`` (the default ``gpu_node``) and ``gpu-node-2``,
each holding every arch the shipped fleet can test, so the GPU test of a
testable arch resolves to the farm's gpu-node, over SSH with the host key
pinned in the farm's known_hosts, and ``GPU_HOST=gpu-node-2`` moves it, as
``GPU_HOST=snoc-strix`` does on the real fleet.

A farm node has no card, so it cannot pass a GPU test, and it never claims
to: its run template (``run-image``) logs the run, checks that the image is
in the farm registry by the exact digest it was given (with the node's own
copy of the login), and exits ``NO_GPU_STATUS`` saying the test command was
not run.
"""

from __future__ import annotations

import json
import shlex

from rocm_bake.local.farm.layout import FLEET_NODES, REGISTRY_USER, Layout
from rocm_bake.registry.tls import write_private

#: The farm node's exit status: it reached the node and found the image, but has no GPU to run the test on.
NO_GPU_STATUS = 77

RUN_IMAGE = """#!/bin/sh
# A farm GPU node's run template: the image by digest, then the test command (never run: no card here).
set -u
ref=$1; shift
node=$(echo "$SSH_CONNECTION" | cut -d' ' -f3)
echo "$node $ref" >> {runs}
registry=${{ref%%/*}}; rest=${{ref#*/}}; digest=${{rest#*@}}; repo=${{rest%%@*}}; repo=${{repo%:*}}
accept=application/vnd.oci.image.index.v1+json,application/vnd.oci.image.manifest.v1+json
accept=$accept,application/vnd.docker.distribution.manifest.v2+json,application/vnd.docker.distribution.manifest.list.v2+json
if ! curl -sfI --noproxy '*' --cacert {ca} --netrc-file {netrc} -H "Accept: $accept" \\
     "https://$registry/v2/$repo/manifests/$digest" >/dev/null; then
  echo "farm node $node: $repo@$digest is not in the registry $registry" >&2
  exit 1
fi
echo "farm node $node: $repo@$digest is in the registry $registry"
echo "farm node $node: no GPU on a farm node, so the test was not run: $*" >&2
exit {status}
"""


def write_fleet(layout: Layout, password: str) -> None:
    """The fleet manifest, the node-side runner and its registry login (0600), under the farm's files."""
    from rocm_bake.manifests import load_fleet  # pydantic and yaml: only when a farm is made

    testable = sorted({arch for node in load_fleet().nodes for arch in node.gpus})
    node_dir = layout.host_dir("gpu-node")
    netrc = node_dir / "netrc"
    write_private(netrc, f"machine {layout.address('registry')} login {REGISTRY_USER} password {password}\n".encode())
    runner = node_dir / "run-image"
    runner.write_text(RUN_IMAGE.format(runs=shlex.quote(str(node_dir / "runs.log")),
                                       ca=shlex.quote(str(layout.tls_dir / "ca.pem")),
                                       netrc=shlex.quote(str(netrc)), status=NO_GPU_STATUS))
    runner.chmod(0o755)
    nodes = [{"name": name, "host": layout.fleet_address(name), "user": "root", "gpus": testable,
              "lock_path": str(node_dir / f"{name}.lock"), "run_template": f"{runner} {{image}} {{test}}"}
             for name in FLEET_NODES]
    layout.fleet.write_text(json.dumps({"gpu_node": "gpu-node", "nodes": nodes}, indent=2) + "\n")  # JSON is YAML

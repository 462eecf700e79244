"""The GPU test as a resource: re-runs when the tested image's digest changes.

It is a ``local.Command`` calling ``rocm-bake gpu-test``, so the run goes
through the same core as the CLI: node choice from the fleet manifest, the
node lock, host keys verified by the system ssh. Arches with no node declare
nothing and the stack exports ``gpu_tested: false`` — no card means not
covered, never passed.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

import pulumi
from pulumi_command import local

from components.images import TargetImage
from rocm_bake.config import StackConfig
from rocm_bake.gpu import not_covered_message, select_node
from rocm_bake.manifests import load_fleet

#: The target whose image (and gpu_test command) the GPU test runs: torch installed
#: on pytorch-base (the wheel images are FROM scratch and cannot run anything).
TESTED_TARGET = "torch-runtime"


def gpu_test_command(arch: str, image_ref: str, host: str | None) -> str:
    """The CLI through this program's own interpreter: ``rocm-bake`` need not be on the plugin's PATH."""
    argv = [sys.executable, "-m", "rocm_bake", "gpu-test", "--arch", arch, "--image", image_ref,
            "--target", TESTED_TARGET]
    if host:
        argv += ["--host", host]
    return shlex.join(argv)


def declare_gpu_test(config: StackConfig, images: dict[str, TargetImage]) -> dict[str, Any]:
    """One Command per arch of the build that a node can test; exports say what is covered."""
    if not config.gpu_test:
        return {"gpu_tested": False, "gpu_test": "not declared: rocm-bake:gpuTest is false"}
    if TESTED_TARGET not in images:
        return {"gpu_tested": False, "gpu_test": f"not declared: target {TESTED_TARGET} is not built"}
    fleet = load_fleet()
    image = images[TESTED_TARGET]
    commands: dict[str, local.Command] = {}
    uncovered: list[str] = []
    for arch in config.arches:
        node = select_node(fleet, arch, config.gpu_host)  # a gpuHost without the card is an error
        if node is None:
            uncovered.append(arch)
            continue
        commands[arch] = local.Command(
            f"gpu-test-{arch}",
            create=image.ref.apply(lambda ref, a=arch, n=node.name: gpu_test_command(a, ref, n)),
            triggers=[image.digest],
            opts=pulumi.ResourceOptions(depends_on=[image]),
        )
    exports: dict[str, Any] = {}
    if uncovered:
        exports["gpu_tested"] = False
        exports["gpu_test"] = "; ".join(not_covered_message(a) for a in uncovered)
    else:
        # The command's own result: it exits non-zero (failing the update) unless
        # the test passed, so a completed command is a passed test.
        exports["gpu_tested"] = pulumi.Output.all(*[c.stdout for c in commands.values()]).apply(lambda _: True)
    if commands:
        exports["gpu_test_output"] = {a: c.stdout for a, c in commands.items()}
    return exports

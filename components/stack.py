"""The whole per-arch stack: images, then (as they land) wheels, index, publish, GPU test."""

from __future__ import annotations

import os
from typing import Any

import pulumi

from components.gpu_test import declare_gpu_test
from components.images import TargetImage
from components.index_provider import WheelIndex
from components.publish import declare_publish
from components.wheels_provider import FetchedWheels
from rocm_bake.config import KEYS, StackConfig, stack_config_from_mapping
from rocm_bake.image_plan import image_specs
from rocm_bake.manifests import Targets, load_targets


def read_config() -> StackConfig:
    """Read every ``rocm-bake:*`` key once; bad config fails naming the key."""
    stack = pulumi.get_stack()
    raw = pulumi.Config("rocm-bake")
    values = {f"rocm-bake:{key}": raw.get(key) for key in KEYS if raw.get(key) is not None}
    # `rocm-bake arches --target` narrows a pass without rewriting stack files.
    if os.environ.get("ROCM_BAKE_TARGETS"):
        values["rocm-bake:targets"] = os.environ["ROCM_BAKE_TARGETS"]
    return stack_config_from_mapping(stack, values, f"stack {stack} config")


def declare_wheel_pipeline(
    config: StackConfig, targets: Targets, images: dict[str, TargetImage]
) -> dict[str, Any]:
    """Fetch this arch's wheels out of its images (by digest), index them, maybe publish.

    A fat build has no per-arch index of its own (each index declares only
    its own arch's extra; the per-arch stacks serve those), and unpushed
    images cannot be read back from the registry, so neither declares one.
    """
    if config.is_fat:
        return {"wheels": "not declared: fat build (per-arch stacks serve the per-arch indexes)"}
    if not config.push:
        return {"wheels": "not declared: rocm-bake:push is false, images never reach the registry"}
    producers = [images[t.name] for t in targets.targets if t.wheels and t.name in images]
    if not producers:
        return {"wheels": "not declared: no selected target produces wheels"}
    (arch,) = config.arches
    fetched = FetchedWheels(
        f"wheels-{arch}", arch, [image.ref for image in producers], config.dist,
        opts=pulumi.ResourceOptions(depends_on=producers),
    )
    index = WheelIndex(
        f"index-{arch}", arch, fetched.wheels_dir, config.dist, rocm_version=config.rocm_version,
        opts=pulumi.ResourceOptions(depends_on=[fetched]),
    )
    exports: dict[str, Any] = {
        "wheels_dir": fetched.wheels_dir,
        "wheel_count": fetched.wheel_count,
        "index_dir": index.index_dir,
        "index_sha256": index.index_sha256,
    }
    # Publishing is a separate decision (rocm-bake:publish), and it publishes
    # what this index holds rather than fetching again.
    exports.update(declare_publish(config, depends_on_digest=index.index_sha256))
    return exports


def define_stack(config: StackConfig) -> dict[str, Any]:
    """Declare every resource of one stack and export what it produced."""
    targets = load_targets()
    images: dict[str, TargetImage] = {}
    for spec in image_specs(config, targets):
        images[spec.target] = TargetImage(f"{spec.target}-{config.arch_label}", spec, images)

    wheel_exports = declare_wheel_pipeline(config, targets, images)
    wheel_exports.update(declare_gpu_test(config, images))

    exports: dict[str, Any] = {
        "arch": config.pytorch_rocm_arch,
        "arches": config.arches,
        "fat_build": config.is_fat,
        "policy": config.policy().model_dump(),
        "images": {name: image.ref for name, image in images.items()},
        "image_tags": {name: image.tag for name, image in images.items()},
        **wheel_exports,
    }
    for key, value in exports.items():
        pulumi.export(key, value)
    return exports

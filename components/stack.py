"""The whole per-arch stack: images, then (as they land) wheels, index, publish, GPU test."""

from __future__ import annotations

import os
from typing import Any

import pulumi

from components.images import TargetImage
from rocm_bake.config import KEYS, StackConfig, stack_config_from_mapping
from rocm_bake.image_plan import image_specs
from rocm_bake.manifests import load_targets


def read_config() -> StackConfig:
    """Read every ``rocm-bake:*`` key once; bad config fails naming the key."""
    stack = pulumi.get_stack()
    raw = pulumi.Config("rocm-bake")
    values = {f"rocm-bake:{key}": raw.get(key) for key in KEYS if raw.get(key) is not None}
    # `rocm-bake arches --target` narrows a pass without rewriting stack files.
    if os.environ.get("ROCM_BAKE_TARGETS"):
        values["rocm-bake:targets"] = os.environ["ROCM_BAKE_TARGETS"]
    return stack_config_from_mapping(stack, values, f"stack {stack} config")


def define_stack(config: StackConfig) -> dict[str, Any]:
    """Declare every resource of one stack and export what it produced."""
    targets = load_targets()
    images: dict[str, TargetImage] = {}
    for spec in image_specs(config, targets):
        images[spec.target] = TargetImage(f"{spec.target}-{config.arch_label}", spec, images)

    exports: dict[str, Any] = {
        "arch": config.pytorch_rocm_arch,
        "arches": config.arches,
        "fat_build": config.is_fat,
        "policy": config.policy().model_dump(),
        "images": {name: image.ref for name, image in images.items()},
        "image_tags": {name: image.tag for name, image in images.items()},
    }
    for key, value in exports.items():
        pulumi.export(key, value)
    return exports

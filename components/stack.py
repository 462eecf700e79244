"""The whole stack: images, then the arch's index (fetch + index), publish and the GPU test.

Config is read and validated once, here at the edge, into a ``StackConfig``
whose arches are already checked; the components below take it as it is.
Each concern is one ComponentResource with typed args: ``TargetImage`` per
build target, ``ArchIndex``, ``PublishedIndex`` and ``GpuTestRun``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from components.arch_index import ArchIndex, ArchIndexArgs
from components.gpu_test import declare_gpu_test
from components.image_home import HomeInputs, ImageHome
from components.images import TargetImage
from components.publish import declare_publish
from rocm_bake.checkout import defaults_owner, local_defaults
from rocm_bake.errors import RocmBakeError
from rocm_bake.config import NAMESPACE, StackConfig, from_engine_values, near_namespace, stack_config_from_mapping
from rocm_bake.image_plan import image_specs
from rocm_bake.manifests import Targets, load_fleet, load_targets

#: Read with ``get_secret`` (``github_token``): never a plain value in the program.
SECRET_KEYS = frozenset({"githubToken"})


def given_config() -> dict[str, Any]:
    """Every ``rocm-bake:*`` key the engine passed, known or not, and any under a mistyped ``rocm-bake``
    namespace, so a misspelt key is refused, not ignored.

    The engine hands the program its config as ``PULUMI_CONFIG`` (a test's
    mocks set it in the runtime instead); structured values (``buildArgs``)
    arrive as JSON text, which ``read_config`` decodes once.
    """
    from pulumi.runtime.config import CONFIG, get_config_env

    given = {**get_config_env(), **CONFIG.get()}
    return {k: v for k, v in given.items()
            if isinstance(k, str) and (k.startswith(f"{NAMESPACE}:") or near_namespace(k.partition(":")[0]))}


def read_config() -> StackConfig:
    """Read every ``rocm-bake:*`` key once; bad config fails naming the key.

    Narrowing a run to some targets is the engine's job (``pulumi up --target
    URN --target-dependents``), never done by undeclaring resources: an
    undeclared resource is one the engine deletes.

    The registry and builder default to this checkout's own (its record in
    ``.rocm-bake/checkout.json``, or what ``make`` exported for the run), so
    the tracked stack files never name a local port.
    """
    from pulumi.runtime.config import get_config_secret_keys_env, is_config_secret

    stack = pulumi.get_stack()
    given = given_config()
    for key in SECRET_KEYS:
        full = f"{NAMESPACE}:{key}"
        if full in given and not (is_config_secret(full) or full in get_config_secret_keys_env()):
            raise RocmBakeError(f"stack {stack} config: {full}: stored in plain text; set it with "
                                f"`pulumi config set --secret {full} …` (and rotate it: it was readable)")
    values: dict[str, Any] = dict(local_defaults(Path(pulumi.get_root_directory() or "."), stack=stack))
    plain = {k: v for k, v in given.items() if k.partition(":")[2] not in SECRET_KEYS}
    values.update(from_engine_values(plain, f"stack {stack} config"))
    return stack_config_from_mapping(stack, values, "the stack config")


def github_token() -> "pulumi.Output[str] | None":
    """``rocm-bake:githubToken`` as a secret Output (None when unset: GITHUB_TOKEN then)."""
    return pulumi.Config("rocm-bake").get_secret("githubToken")


def declare_wheel_pipeline(
    config: StackConfig, targets: Targets, images: dict[str, TargetImage]
) -> dict[str, Any]:
    """Fetch this stack's wheels out of its images (by digest), index them, maybe publish.

    A fat stack is a full stack: its wheels carry every arch's code objects,
    so it gets its own index (``index/gfx950-gfx1201/``) offering the
    combined extra.
    """
    if not config.push:
        return {"wheels": "not declared: rocm-bake:push is false, images never reach the registry"}
    producers = [images[t.name] for t in targets.targets if t.wheels and t.name in images]
    if not producers:
        return {"wheels": "not declared: no selected target produces wheels"}
    index = ArchIndex(f"arch-index-{config.index_name}", ArchIndexArgs(
        arch=config.pytorch_rocm_arch, images=producers, dist=config.dist, rocm_version=config.rocm_version,
        index_base=published_index_base(config)))
    exports: dict[str, Any] = {
        "wheels_dir": index.wheels_dir,
        "wheel_count": index.wheel_count,
        "index_dir": index.index_dir,
        "index_sha256": index.index_sha256,
    }
    # Publishing is a separate decision (rocm-bake:publish), and it publishes
    # what this index holds rather than fetching again.
    exports.update(declare_publish(config, github_token() if config.publish else None,
                                   index_sha256=index.index_sha256))
    return exports


def published_index_base(config: StackConfig) -> str | None:
    """The Pages base this stack publishes its index under, when it publishes (else None: not known here)."""
    if not config.publish or config.github_repo is None:
        return None
    from rocm_bake.publish.origin import pages_index_base

    return pages_index_base(config.github_repo, config.github_pages_url)


def warn_of_a_dead_builder(config: StackConfig) -> None:
    """On ``up``, name the builder and its socket when it is missing or dead (the build would only say
    "context deadline exceeded"); a preview builds nothing and is not held up."""
    if pulumi.runtime.is_dry_run():
        return
    from rocm_bake.builder_check import builder_problem

    problem = builder_problem(config.builder)
    if problem is not None:
        pulumi.log.warn(f"rocm-bake:builder: {problem}: every image build will fail")


def declare_image_home(config: StackConfig) -> ImageHome:
    """Record the stack's registry and builder, and whose checkout's defaults chose them (None: its file names
    both), so a shared stack is never moved to another checkout's own registry and builder."""
    given = given_config()
    named = all(f"{NAMESPACE}:{key}" in given for key in ("registry", "builder"))
    chosen_by = None if named else defaults_owner(Path(pulumi.get_root_directory() or "."))
    return ImageHome(f"image-home-{config.arch_label}", HomeInputs(
        stack=pulumi.get_stack(), registry=config.registry, builder=config.builder, chosen_by=chosen_by))


def check_run_environment(config: StackConfig) -> None:
    """Before anything is declared: the salt the CLI wrote into the tracked stack file goes back out (the one
    place that strips it), and a run that lacks this checkout's buildx config or registry CA stops with one
    line naming the export that works (rocm_bake/run_env.py)."""
    from rocm_bake.run_env import missing_environment, strip_salt

    root = Path(pulumi.get_root_directory() or ".").resolve()
    strip_salt(root)
    problem = missing_environment(root, config.builder, config.registry)
    if problem is not None:
        raise RocmBakeError(problem)


def define_stack(config: StackConfig) -> dict[str, Any]:
    """Declare every resource of one stack; return what the program exports."""
    warn_of_a_dead_builder(config)
    targets = load_targets()
    images: dict[str, TargetImage] = {}
    home = declare_image_home(config)
    for spec in image_specs(config, targets):
        images[spec.target] = TargetImage(f"{spec.target}-{config.arch_label}", spec, images, after=[home])

    wheel_exports = declare_wheel_pipeline(config, targets, images)
    wheel_exports.update(declare_gpu_test(config, images))

    exports: dict[str, Any] = {
        "arch": config.pytorch_rocm_arch,
        "arches": config.arches,
        "fat_build": config.is_fat,
        "policy": {**config.policy().model_dump(), **load_fleet().coverage(config.pytorch_rocm_arch).model_dump()},
        "images": {name: image.ref for name, image in images.items()},
        "image_tags": {name: image.tag for name, image in images.items()},
        **wheel_exports,
    }
    return exports

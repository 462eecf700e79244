"""What each image build is: tags, build args and cache refs, as plain data.

The Pulumi image component maps an ``ImageSpec`` onto a
``docker_build.Image`` one to one; every decision lives here so it is tested
without Pulumi.
"""

from __future__ import annotations

from pydantic import BaseModel

from rocm_bake.arch import ArchPolicy
from rocm_bake.config import StackConfig
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import Target, Targets


class ImageSpec(BaseModel):
    """One target's image build for one stack."""

    target: str
    dockerfile: str
    #: Holds only what the Dockerfiles copy: a context of the whole repo would
    #: change with every ``dist/`` or ``.git/`` write and rebuild every image.
    context: str
    stage: str
    tag: str
    build_args: dict[str, str]
    cache_ref: str
    depends_on: list[str]
    wheels: list[str]
    builder: str
    push: bool


def image_repo(config: StackConfig, target: str) -> str:
    return f"{config.registry}/{config.repository}/{target}"


def cache_ref(config: StackConfig, target: Target) -> str:
    """Registry cache ref: per CACHE_ARCH, except for targets with no device code.

    CACHE_ARCH keeps each arch's cache separate because alternating arches on
    one ref cost two cold builds every time; triton-wheel compiles no device
    code, so every arch shares (and warms) one ref.
    """
    scope = config.effective_cache_arch if target.device_code else "shared"
    return f"{config.registry}/{config.repository}/cache:{target.name}-{scope}"


def arch_build_args(config: StackConfig, policy: ArchPolicy) -> dict[str, str]:
    """The build args the arch decides: what a device-code target's Dockerfile branches on."""
    return {
        "PYTORCH_ROCM_ARCH": config.pytorch_rocm_arch,
        "CACHE_ARCH": config.effective_cache_arch,
        "ROCM_PRUNE_KEEP": " ".join(policy.rocm_prune_keep),
        "USE_ROCM_CK_SDPA_GFX12": "1" if policy.use_ck_sdpa_gfx12 else "0",
        "AMDGPU_SCHED_STRATEGY": "coexec" if policy.sched_coexec else "",
        "PREBUILD_KERNELS": str(policy.prebuild_kernels),
    }


def build_args(config: StackConfig, policy: ArchPolicy, target: Target) -> dict[str, str]:
    """Build args a target's Dockerfile branches on.

    A target with no device code gets no arch args at all, so its layers are
    byte-identical across arches and the shared cache ref really is shared.
    """
    args = {**config.build_args, "ROCM_VERSION": config.rocm_version}
    if target.device_code:
        args.update(arch_build_args(config, policy))
    return args


def dockerfile_path(config: StackConfig, target: Target) -> str:
    """The target's Dockerfile in the stack's ``dockerfileDir`` (demo stacks use stand-ins)."""
    return f"{config.dockerfile_dir.rstrip('/')}/{target.dockerfile.rsplit('/', 1)[-1]}"


def context_dir(config: StackConfig) -> str:
    """The build context: ``<dockerfileDir>/context``, never the repo root."""
    return f"{config.dockerfile_dir.rstrip('/')}/context"


def selected_targets(config: StackConfig, targets: Targets) -> list[Target]:
    """Targets to build in dependency order: all, or the named ones plus what they need."""
    ordered = targets.build_order()
    if config.targets is None:
        return ordered
    for name in config.targets:
        try:
            targets.target(name)
        except RocmBakeError as exc:
            raise RocmBakeError(f"rocm-bake:targets: {exc}") from None
    needed: set[str] = set()

    def need(name: str) -> None:
        if name not in needed:
            needed.add(name)
            for dep in targets.target(name).depends_on:
                need(dep)

    for name in config.targets:
        need(name)
    return [t for t in ordered if t.name in needed]


def check_push(config: StackConfig, selected: list[Target]) -> None:
    """``push: false`` only where nothing reads an image back from the registry.

    Dependants get their dependencies as named contexts ``docker-image://ref``,
    which BuildKit resolves in the registry: an unpushed tag is not there.
    """
    if config.push:
        return
    needing = [t.name for t in selected if t.depends_on]
    if needing:
        raise RocmBakeError(
            f"rocm-bake:push is false, but {', '.join(needing)} read their dependencies from the registry "
            "(BuildKit named contexts); set rocm-bake:push true or narrow rocm-bake:targets to targets "
            "without dependencies"
        )


def image_specs(config: StackConfig, targets: Targets) -> list[ImageSpec]:
    policy = config.policy()
    selected = selected_targets(config, targets)
    check_push(config, selected)
    return [
        ImageSpec(
            target=t.name,
            dockerfile=dockerfile_path(config, t),
            context=context_dir(config),
            stage=t.stage,
            tag=f"{image_repo(config, t.name)}:{config.image_tag}",
            build_args=build_args(config, policy, t),
            cache_ref=cache_ref(config, t),
            depends_on=list(t.depends_on),
            wheels=list(t.wheels),
            builder=config.builder,
            push=config.push,
        )
        for t in selected
    ]

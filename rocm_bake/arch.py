"""Architecture policy: what a PYTORCH_ROCM_ARCH value implies for a build.

The value itself is an ``ArchSet`` (``rocm_bake.archset``), parsed once at
the edge (stack config, a CLI argument); every function here takes it, or
its ``Arch`` members, as it is.

The policy is a pure function of the arch value, so every branch the build
takes is truth-table tested. Which fleet nodes hold a card is the fleet's
business (``rocm_bake.manifests.Fleet``): this module imports no manifest.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from rocm_bake.archset import Arch, ArchError, ArchSet

#: Upstream LLVM gates ``amdgpu-sched-strategy=coexec`` on these two together.
SCHED_COEXEC_ARCHES: frozenset[str] = frozenset({"gfx950", "gfx1250"})

#: AITER PREBUILD_KERNELS levels this build knows about.
PREBUILD_LEVELS: frozenset[int] = frozenset({0, 1, 2})


def is_rdna4(rocm_arch: ArchSet) -> bool:
    """True when the arch set targets an RDNA4 (gfx12 consumer) part.

    gfx1250 and gfx1251 are gfx12-numbered but MI450-class datacenter parts;
    a bare gfx12 substring test would apply RDNA-only settings to a datacenter
    card, which is why ``gfx125`` is stripped first (as the build does).
    """
    arch_rdna_test = rocm_arch.replace("gfx125", "")
    return arch_rdna_test != arch_rdna_test.replace("gfx12", "")


def is_cdna(arch: Arch) -> bool:
    """True for the gfx9 datacenter family, where AITER's CK/ASM kernels exist."""
    return len(arch) == 6 and arch.startswith("gfx9")


def uses_sched_coexec(arch: Arch) -> bool:
    """True where upstream LLVM enables ``amdgpu-sched-strategy=coexec``."""
    return arch in SCHED_COEXEC_ARCHES


def check_prebuild_kernels(arches: Sequence[Arch], level: int | None) -> int:
    """Return the AITER PREBUILD_KERNELS level for a build, refusing unsafe pins.

    Level 0 is the default everywhere: build time is the binding constraint
    and the prebuild buys first-inference latency, not capability (AITER
    JIT-compiles on first use either way). Level 2 produced no wheel on
    gfx1201 (6 of 68 JIT modules carry CDNA-only code; bdist_wheel exited 1
    after 51 minutes), so a pin of 2 is only accepted when every arch in the
    build is CDNA.
    """
    if level is None:
        return 0
    if level not in PREBUILD_LEVELS:
        raise ArchError(f"PREBUILD_KERNELS={level} is not a level AITER knows: expected one of 0, 1, 2")
    if level == 2:
        non_cdna = [a for a in arches if not is_cdna(a)]
        if non_cdna:
            raise ArchError(
                f"PREBUILD_KERNELS=2 refused for {', '.join(non_cdna)}: level 2 produces no "
                f"wheel on non-CDNA arches (6 of 68 AITER JIT modules carry CDNA-only "
                f"code and setup.py treats the failure as fatal); use 0 (the default)"
            )
    return level


class ArchPolicy(BaseModel):
    """Everything the build branches on for one PYTORCH_ROCM_ARCH value.

    Which fleet nodes can GPU-test it is not here: that is a fleet lookup
    (``Fleet.coverage``), and the fleet changes without the build changing.
    """

    arch: ArchSet
    arches: list[Arch]
    is_rdna4: bool
    use_ck_sdpa_gfx12: bool
    sched_coexec: bool
    prebuild_kernels: int
    rocm_prune_keep: list[str]


def arch_policy(rocm: ArchSet, prebuild_kernels: int | None = None) -> ArchPolicy:
    """Compute the policy for ``rocm`` (one arch or a fat ``;``-list).

    ``sched_coexec`` holds only when every arch in the build has it, since
    the flag is passed once for the whole compile.
    """
    arches = rocm.arches
    rdna4 = is_rdna4(rocm)
    return ArchPolicy(
        arch=rocm,
        arches=list(arches),
        is_rdna4=rdna4,
        use_ck_sdpa_gfx12=rdna4,
        sched_coexec=all(uses_sched_coexec(a) for a in arches),
        prebuild_kernels=check_prebuild_kernels(arches, prebuild_kernels),
        rocm_prune_keep=[f"-{a}" for a in arches],
    )

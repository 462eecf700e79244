"""Architecture policy: what a PYTORCH_ROCM_ARCH value implies for a build.

Parse once, at the edge. ``Arch`` (one processor name) and ``RocmArch`` (a
PYTORCH_ROCM_ARCH value: one arch, or a fat ``;``-list) are ``str`` subtypes
whose constructors validate: holding one is proof it was checked, so the
functions it passes through (the stack program, image plans, the GPU test)
take it as it is, and constructing one from one costs an ``isinstance``.
They stay strings, so f-strings, JSON and Pulumi inputs see plain names.

The policy is a pure function of the arch value, so every branch the build
takes is truth-table tested. Which fleet nodes hold a card is the fleet's
business (``rocm_bake.manifests.Fleet``): this module imports no manifest.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from rocm_bake.archset import (  # noqa: F401 - re-exported until every caller imports rocm_bake.archset
    ARCH_PATTERN,
    ArchSet,
    KNOWN_ARCHES,
    Arch,
    ArchError,
    _ParsedStr,
    _shown,
    sorted_arches,
)

#: Upstream LLVM gates ``amdgpu-sched-strategy=coexec`` on these two together.
SCHED_COEXEC_ARCHES: frozenset[str] = frozenset({"gfx950", "gfx1250"})

#: AITER PREBUILD_KERNELS levels this build knows about.
PREBUILD_LEVELS: frozenset[int] = frozenset({0, 1, 2})


class RocmArch(_ParsedStr):
    """A validated PYTORCH_ROCM_ARCH value: ``gfx950``, or ``gfx950;gfx1201`` for one fat build.

    One value with several arches is one fat build: both code objects in one
    binary and one set of tags. Duplicates are refused rather than collapsed,
    since they usually mean a copy-paste error in stack config.
    """

    __slots__ = ()

    @classmethod
    def _normalised(cls, value: str) -> str:
        if not value or not value.strip():
            raise ArchError("empty PYTORCH_ROCM_ARCH: expected e.g. gfx950 or 'gfx950;gfx1201'")
        arches = [Arch(part) for part in value.split(";")]
        dupes = sorted({a for a in arches if arches.count(a) > 1})
        if dupes:
            raise ArchError(f"PYTORCH_ROCM_ARCH {_shown(value)} lists {', '.join(dupes)} more than once")
        return value

    @property
    def arches(self) -> tuple[Arch, ...]:
        """The arches in declared order (already validated with the whole value)."""
        return tuple(Arch._trusted(part) for part in self.split(";"))

    @property
    def is_fat(self) -> bool:
        """Several arches in one PYTORCH_ROCM_ARCH: one binary, one set of tags."""
        return ";" in self

    @property
    def label(self) -> str:
        """The arch part of image tags and cache refs: ``gfx950`` or ``gfx950_gfx1201``."""
        return self.replace(";", "_")

    @property
    def index_name(self) -> str:
        """The index directory, release and gh-pages folder name: ``gfx950`` or ``gfx950-gfx1201``."""
        return self.replace(";", "-")


def validate_arch(name: str) -> Arch:
    """``name`` as an ``Arch`` if it is a known, well-formed arch; raise otherwise (free for an ``Arch``)."""
    return Arch(name)


def parse_rocm_arch(value: str) -> list[Arch]:
    """Split a PYTORCH_ROCM_ARCH value (``;``-list) into validated arch names (free for a ``RocmArch``)."""
    return list(ArchSet(value).arches)


def is_rdna4(rocm_arch: str) -> bool:
    """True when the arch string targets an RDNA4 (gfx12 consumer) part.

    gfx1250 and gfx1251 are gfx12-numbered but MI450-class datacenter parts;
    a bare gfx12 substring test would apply RDNA-only settings to a datacenter
    card, which is why ``gfx125`` is stripped first (as the build does).
    """
    arch_rdna_test = rocm_arch.replace("gfx125", "")
    return arch_rdna_test != arch_rdna_test.replace("gfx12", "")


def is_cdna(arch: str) -> bool:
    """True for the gfx9 datacenter family, where AITER's CK/ASM kernels exist."""
    return len(arch) == 6 and arch.startswith("gfx9")


def uses_sched_coexec(arch: str) -> bool:
    """True where upstream LLVM enables ``amdgpu-sched-strategy=coexec``."""
    return arch in SCHED_COEXEC_ARCHES


def check_prebuild_kernels(arches: list[str] | tuple[str, ...], level: int | None) -> int:
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


def arch_policy(rocm_arch: ArchSet | str, prebuild_kernels: int | None = None) -> ArchPolicy:
    """Compute the policy for ``rocm_arch`` (one arch or a fat ``;``-list).

    ``sched_coexec`` holds only when every arch in the build has it, since
    the flag is passed once for the whole compile. A ``RocmArch`` is taken as
    it is; a plain string (a CLI argument) is parsed here, once.
    """
    rocm = ArchSet(rocm_arch)
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

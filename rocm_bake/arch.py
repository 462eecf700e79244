"""Architecture policy: what a PYTORCH_ROCM_ARCH value implies for a build.

Pure functions of the arch string (and the fleet manifest for the fleet
fields), so every branch the build takes can be truth-table tested.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel

from rocm_bake.errors import RocmBakeError

if TYPE_CHECKING:
    from rocm_bake.manifests import Fleet

#: Shape of an LLVM AMDGPU processor name: lower-case ``gfx``, a major
#: version, then two more characters (hex digits: gfx90a is a real part).
ARCH_PATTERN = re.compile(r"^gfx(?:9[0-9a-f]{2}|1[0-9]{3})$")

#: The processors this tool knows how to build for. An unknown but
#: well-formed name is refused too: a typo (gfx951) must not start a
#: multi-hour build for a card that does not exist.
KNOWN_ARCHES: frozenset[str] = frozenset(
    {
        "gfx908", "gfx90a", "gfx942", "gfx950",
        "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
        "gfx1200", "gfx1201", "gfx1250", "gfx1251",
    }
)

#: Upstream LLVM gates ``amdgpu-sched-strategy=coexec`` on these two together.
SCHED_COEXEC_ARCHES: frozenset[str] = frozenset({"gfx950", "gfx1250"})

#: AITER PREBUILD_KERNELS levels this build knows about.
PREBUILD_LEVELS: frozenset[int] = frozenset({0, 1, 2})


def validate_arch(name: str) -> str:
    """Return ``name`` if it is a known, well-formed arch; raise otherwise."""
    if not name:
        raise RocmBakeError("empty architecture name: expected e.g. gfx950")
    if not ARCH_PATTERN.match(name):
        hint = f" (did you mean {name.lower()}?)" if ARCH_PATTERN.match(name.lower()) else ""
        raise RocmBakeError(
            f"malformed architecture name {name!r}: expected an AMDGPU processor "
            f"like gfx950 or gfx1201 (lower-case gfx + 3 or 4 digits){hint}"
        )
    if name not in KNOWN_ARCHES:
        raise RocmBakeError(
            f"unknown architecture {name!r}: known are {', '.join(sorted_arches(KNOWN_ARCHES))}"
        )
    return name


def sorted_arches(arches: frozenset[str] | set[str] | list[str]) -> list[str]:
    """Sort arch names numerically (gfx950 before gfx1030)."""
    return sorted(arches, key=lambda a: (len(a), a))


def parse_rocm_arch(value: str) -> list[str]:
    """Split a PYTORCH_ROCM_ARCH value (``;``-list) into validated arch names.

    One value with several arches is one fat build: both code objects in one
    binary and one set of tags. Duplicates are refused rather than collapsed,
    since they usually mean a copy-paste error in stack config.
    """
    if not value or not value.strip():
        raise RocmBakeError("empty PYTORCH_ROCM_ARCH: expected e.g. gfx950 or 'gfx950;gfx1201'")
    parts = value.split(";")
    arches = [validate_arch(part) for part in parts]
    dupes = sorted({a for a in arches if arches.count(a) > 1})
    if dupes:
        raise RocmBakeError(f"PYTORCH_ROCM_ARCH {value!r} lists {', '.join(dupes)} more than once")
    return arches


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


def check_prebuild_kernels(arches: list[str], level: int | None) -> int:
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
        raise RocmBakeError(
            f"PREBUILD_KERNELS={level} is not a level AITER knows: expected one of 0, 1, 2"
        )
    if level == 2:
        non_cdna = [a for a in arches if not is_cdna(a)]
        if non_cdna:
            raise RocmBakeError(
                f"PREBUILD_KERNELS=2 refused for {', '.join(non_cdna)}: level 2 produces no "
                f"wheel on non-CDNA arches (6 of 68 AITER JIT modules carry CDNA-only "
                f"code and setup.py treats the failure as fatal); use 0 (the default)"
            )
    return level


class ArchPolicy(BaseModel):
    """Everything the build branches on for one PYTORCH_ROCM_ARCH value."""

    arch: str
    arches: list[str]
    is_rdna4: bool
    use_ck_sdpa_gfx12: bool
    sched_coexec: bool
    prebuild_kernels: int
    rocm_prune_keep: list[str]
    fleet_nodes: list[str]
    gpu_testable: bool


def arch_policy(
    rocm_arch: str,
    prebuild_kernels: int | None = None,
    fleet: "Fleet | None" = None,
) -> ArchPolicy:
    """Compute the policy for ``rocm_arch`` (one arch or a fat ``;``-list).

    ``sched_coexec`` holds only when every arch in the build has it, since
    the flag is passed once for the whole compile. A fat build is GPU-testable
    only when every arch in it has a node: an untested code object is not
    covered just because its neighbour is.
    """
    from rocm_bake.manifests import load_fleet  # local: manifests imports this module

    arches = parse_rocm_arch(rocm_arch)
    rdna4 = is_rdna4(rocm_arch)
    fleet_model = fleet if fleet is not None else load_fleet()
    nodes = sorted({n for a in arches for n in fleet_model.nodes_for(a)})
    return ArchPolicy(
        arch=rocm_arch,
        arches=arches,
        is_rdna4=rdna4,
        use_ck_sdpa_gfx12=rdna4,
        sched_coexec=all(uses_sched_coexec(a) for a in arches),
        prebuild_kernels=check_prebuild_kernels(arches, prebuild_kernels),
        rocm_prune_keep=[f"-{a}" for a in arches],
        fleet_nodes=nodes,
        gpu_testable=all(fleet_model.nodes_for(a) for a in arches),
    )


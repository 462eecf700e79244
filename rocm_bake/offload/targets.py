"""GPU target names: the offload bundle id grammar, EF_AMDGPU_MACH and generic coverage.

Kept free of pydantic and of the scanner, so ``which-index`` (which needs only
:data:`GENERIC_COVERS`) costs the CLI nothing at start-up.

A bundle id names what an entry is for: ``<kind>-<triple>[-<target id>]``,
e.g. ``hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`` (a 4-part triple
with an empty environment) or the older ``hip-amdgcn-amd-amdhsa-gfx906``
(3-part triple). The id comes from the wheel, so it is untrusted: ``wheel
arches`` once reported the id ``…--../../x`` as target ``../../``. Every id
is therefore checked against the grammar here; a malformed one is an error,
and a well-formed id for something that is not an AMD GPU is reported as an
unknown target, never as a gfx name.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rocm_bake.archset import Arch

#: EF_AMDGPU_MACH values (``e_flags & 0xff``) from LLVM's BinaryFormat/ELF.h.
AMDGPU_MACH: dict[int, str] = {
    0x02C: "gfx900", 0x02D: "gfx902", 0x02E: "gfx904", 0x02F: "gfx906",
    0x030: "gfx908", 0x031: "gfx909", 0x032: "gfx90c", 0x033: "gfx1010",
    0x034: "gfx1011", 0x035: "gfx1012", 0x036: "gfx1030", 0x037: "gfx1031",
    0x038: "gfx1032", 0x039: "gfx1033", 0x03D: "gfx1035", 0x03E: "gfx1034",
    0x03F: "gfx90a", 0x040: "gfx940", 0x041: "gfx1100", 0x042: "gfx1013",
    0x043: "gfx1150", 0x044: "gfx1103", 0x045: "gfx1036", 0x046: "gfx1101",
    0x047: "gfx1102", 0x048: "gfx1200", 0x049: "gfx1250", 0x04A: "gfx1151",
    0x04B: "gfx941", 0x04C: "gfx942", 0x04E: "gfx1201", 0x04F: "gfx950",
    0x051: "gfx9-generic", 0x052: "gfx10-1-generic", 0x053: "gfx10-3-generic",
    0x054: "gfx11-generic", 0x055: "gfx1152", 0x058: "gfx1153",
    0x059: "gfx12-generic", 0x05A: "gfx1251", 0x05F: "gfx9-4-generic",
}

#: Generic processors and the parts their code runs on (LLVM AMDGPUUsage,
#: "Generic processors"). Code for a generic target loads on each member.
GENERIC_COVERS: dict[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset(
        {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}
    ),
    "gfx11-generic": frozenset(
        {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}
    ),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}

#: Offload kinds whose entries hold device code (``host`` holds none).
DEVICE_KINDS = frozenset({"hip", "hipv4", "openmp", "cuda"})

#: An LLVM AMDGPU processor: ``gfx`` + major (1-2 digits) + minor and stepping
#: (hex: gfx90a), or a generic family (gfx9-generic, gfx9-4-generic, gfx11-generic).
PROCESSOR = r"gfx(?:[0-9]{1,2}[0-9a-f]{2}|[0-9]{1,2}(?:-[0-9])?-generic)"

#: A target id: processor then ``:feature+``/``:feature-`` settings (xnack, sramecc).
TARGET_ID = re.compile(rf"(?P<processor>{PROCESSOR})(?P<features>(?::[a-z][a-z0-9_]*[+-])*)")

#: What a bundle id may contain at all: no ``/``, spaces or control characters.
_ID_CHARS = re.compile(r"[A-Za-z0-9_.:+-]+")
_KIND = re.compile(r"[a-z][a-z0-9]*")
_HOST_TRIPLE = re.compile(r"[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]*)*")


class BundleId(NamedTuple):
    """One parsed bundle id.

    ``processor`` is set for AMD GPU entries only. ``foreign`` says, for a
    well-formed id that is not an AMD GPU target (an unknown kind, a CUDA or
    SPIR-V triple), why its target is unknown.
    """

    kind: str
    triple: str
    processor: str | None
    features: tuple[str, ...]
    foreign: str | None = None


def _amdgcn_target(rest: str) -> tuple[str, str] | None:
    """(triple, target id) of ``amdgcn-…`` with a 4-part or an older 3-part triple."""
    for parts in (4, 3):
        pieces = rest.split("-", parts)
        if len(pieces) == parts + 1 and TARGET_ID.fullmatch(pieces[parts]):
            return "-".join(pieces[:parts]), pieces[parts]
    return None


@functools.lru_cache(maxsize=1024)
def parse_bundle_id(bundle_id: str) -> BundleId:
    """Split and validate ``<kind>-<triple>[-<target id>]``; ValueError when malformed.

    Cached: a fat binary repeats the same few ids in every bundle.
    """
    if not _ID_CHARS.fullmatch(bundle_id):
        bad = sorted({c for c in bundle_id if not _ID_CHARS.fullmatch(c)})
        raise ValueError(
            f"malformed offload bundle id {bundle_id!r}: {''.join(bad)!r} may not appear "
            f"(ids are <kind>-<triple>-<target id>, e.g. hipv4-amdgcn-amd-amdhsa--gfx950)"
        )
    kind, _, rest = bundle_id.partition("-")
    if not _KIND.fullmatch(kind) or not rest:
        raise ValueError(f"malformed offload bundle id {bundle_id!r}: no <kind>-<triple> prefix")
    if kind == "host":
        if not _HOST_TRIPLE.fullmatch(rest):
            raise ValueError(f"malformed offload bundle id {bundle_id!r}: host triple {rest!r}")
        return BundleId(kind, rest, None, ())
    arch = rest.split("-", 1)[0]
    if kind not in DEVICE_KINDS:
        return BundleId(kind, rest, None, (), f"offload kind {kind!r} is unknown")
    if arch != "amdgcn":
        pieces = rest.split("-", 4)
        target = pieces[4] if len(pieces) == 5 else ""
        return BundleId(
            kind, "-".join(pieces[:4]), None, (),
            f"triple {'-'.join(pieces[:4])!r}" + (f" target {target!r}" if target else "")
            + " is not an AMDGPU (amdgcn) gfx target",
        )
    found = _amdgcn_target(rest)
    if found is None:
        tail = rest.split("-", 4)[4] if rest.count("-") >= 4 else ""
        what = f"target id {tail!r} is not" if tail else "it names no"
        raise ValueError(
            f"malformed offload bundle id {bundle_id!r}: {what} an AMDGPU processor "
            f"(expected gfx… like gfx950, gfx942:xnack- or gfx11-generic)"
        )
    triple, target_id = found
    processor, *features = target_id.split(":")
    return BundleId(kind, triple, processor, tuple(features))


def processor_of_mach(flags: int) -> str | None:
    """The processor an AMDGPU code object's ``e_flags`` name (None: unknown value)."""
    return AMDGPU_MACH.get(flags & 0xFF)


def covers(target: str, arch: Arch) -> bool:
    """True when code built for ``target`` loads on ``arch`` (same, or a generic covering it)."""
    return target == arch or arch in GENERIC_COVERS.get(target, frozenset())

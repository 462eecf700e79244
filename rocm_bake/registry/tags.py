"""How rocm-bake names its images' tags and reads them back: ``<tag_suffix>-rocm<version>``.

Every wheel has an architecture-independent filename, so the only thing
that says which GPU an image's wheels are for is its tag:
``gfx950-rocm10.1.0``, or ``gfx950_gfx1201-rocm10.1.0`` for a fat build.
Wheels are therefore fetched by that tag and never by ``:latest``, which is
written by whichever architecture was pushed last, with the wheels inside
indistinguishable afterwards. The generic OCI client knows none of this.
"""

from __future__ import annotations

from rocm_bake.archset import ArchError, ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.defaults import DEFAULT_ROCM_VERSION
from rocm_bake.index.versions import check_rocm_version
from rocm_bake.registry.reference import ImageRef, parse_ref

LATEST_REASON = (
    ":latest is written by whichever architecture was pushed last, with the wheels "
    "inside indistinguishable afterwards"
)


def image_tag(arch: ArchSet, rocm_version: str) -> str:
    """The tag an arch set's images carry: ``<tag_suffix>-rocm<rocm_version>``."""
    return f"{arch.tag_suffix}-rocm{check_rocm_version(rocm_version)}"


def tag_arch_set(tag: str) -> ArchSet:
    """The arch set a tag read from a ref or a registry names: its first ``-``-separated part, ``_``-joined.

    The one place such a tag is parsed; an ``ArchError`` names what is wrong with it.
    """
    return ArchSet(tag.split("-", 1)[0].replace("_", ";"))


def check_ref_for_arch(ref: str, arch: ArchSet) -> ImageRef:
    """Parse ``ref`` and refuse it unless it can only mean ``arch``'s image.

    Refused before any download: ``:latest``, no tag and no digest, and a tag
    that names another arch set (or none). A digest-only ref is
    content-addressed, so it is accepted as is.
    """
    expected = image_tag(arch, DEFAULT_ROCM_VERSION)
    parsed = parse_ref(ref)
    if parsed.tag == "latest":
        raise RocmBakeError(f"image ref {ref!r} refused for {arch}: {LATEST_REASON}")
    if parsed.tag is None and parsed.digest is None:
        raise RocmBakeError(
            f"image ref {ref!r} has no tag, which means :latest: {LATEST_REASON}; "
            f"use the arch tag, e.g. :{expected}"
        )
    if parsed.tag is not None:
        try:
            tagged = tag_arch_set(parsed.tag)
        except ArchError:
            raise RocmBakeError(
                f"image ref {ref!r}: tag {parsed.tag!r} names no architecture "
                f"(expected <arch>-rocm<version>, e.g. {expected}); {LATEST_REASON}"
            ) from None
        if tagged != arch:
            raise RocmBakeError(
                f"image ref {ref!r} is tagged for {tagged}, not {arch}: refusing to put "
                f"{tagged} wheels in the {arch} index"
            )
    return parsed

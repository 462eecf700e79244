"""What a published index is called on GitHub: its release tag, its gh-pages folder, its release text.

Wheel filenames do not name an architecture (torch's is the same for gfx950
and gfx1201), and the assets of one release share one namespace, so every
index gets its own release, and the tag carries the arch set:
``wheels-<dir_name>-rocm<version>``. Its pages live under
``data/wheels/<dir_name>/`` on gh-pages, the same name as its
``DIST/index/`` directory. The CLI and the Pulumi resources take these names
from here, so either can adopt what the other created. Light on purpose:
``which-index`` and config reading use the gh-pages layout without pydantic.
"""

from __future__ import annotations

from rocm_bake.archset import ArchSet
from rocm_bake.index.defaults import DEFAULT_ROCM_VERSION

PAGES_BRANCH = "gh-pages"
#: Folder of gh-pages holding every index, and the landing page beside them.
PAGES_ROOT = "data/wheels/"


def release_tag(arch: ArchSet, rocm_version: str = DEFAULT_ROCM_VERSION) -> str:
    """One release per index: the tag names its arches (``gfx950-gfx1201`` for a fat build) and the ROCm version."""
    return f"wheels-{arch.dir_name}-rocm{rocm_version}"


def pages_prefix(arch: ArchSet) -> str:
    """The index's gh-pages folder: the same name as its ``DIST/index/`` directory."""
    return f"{PAGES_ROOT}{arch.dir_name}/"


def release_text(arch: ArchSet, rocm_version: str) -> tuple[str, str]:
    """The release's (name, body): one source for the CLI and the Pulumi Release, so either adopts the other's."""
    return (
        f"Wheels for {arch} (ROCm {rocm_version})",
        f"Wheels for {arch} only. Install through the index, which carries the architecture; "
        f"a downloaded asset does not say which GPU it is for.",
    )

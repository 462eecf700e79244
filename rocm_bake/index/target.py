"""What one index serves: one arch, or one fat build's arches — named once, everywhere.

Pending removal: ``rocm_bake.archset.ArchSet`` replaces this type. Only
modules outside the core's arch, index and CLI code still import it
(``rocm_bake/publish/``, ``rocm_bake/registry/``); once they take an
``ArchSet``, this module goes.

The seed: "PYTORCH_ROCM_ARCH='gfx950;gfx1201' — One fat build, both code
objects in one binary, one set of tags". A fat build is served like a
single-arch one, from its own index, so every name derived from the arch set
comes from this one value, parsed once at the edge (CLI flag, stack config):

=================  ======================  =======================================
spelling           ``gfx950;gfx1201``      PYTORCH_ROCM_ARCH, the CLI's ``--arch``
``dir_name``       ``gfx950-gfx1201``      ``DIST/index/<dir_name>/``, gh-pages folder
``extra``          ``device-gfx950-gfx1201``  the rocm-torch extra (PEP 685 normalised)
``tag_suffix``     ``gfx950_gfx1201``      image tags and cache refs
=================  ======================  =======================================

Arches stay in the order the stack declares them, in every spelling: the
extra a user types must match the directory they point pip at. One arch is
the degenerate case (``gfx950`` in every spelling but the extra,
``device-gfx950``). The extra is spelled ``device-<arches>`` "so that when
variants do land the architecture is already a first-class coordinate".

This module imports nothing heavy at import time (the CLI's warm path uses
it); validation loads ``rocm_bake.arch`` only when a value is parsed.
"""

from __future__ import annotations

import re

#: A directory name an index can have: one arch or several joined by ``-``.
DIR_NAME = re.compile(r"^gfx[0-9a-f]+(?:-gfx[0-9a-f]+)*$")


class IndexTarget:
    """The arches one index serves, in declared order (see the module docstring).

    A plain immutable value rather than a dataclass: ``dataclasses`` imports
    ``inspect`` (8 ms), and the warm ``index build`` path constructs one.
    """

    __slots__ = ("arches",)
    arches: tuple[str, ...]

    def __init__(self, arches: tuple[str, ...]) -> None:
        object.__setattr__(self, "arches", tuple(arches))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"IndexTarget is immutable (tried to set {name})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexTarget) and other.arches == self.arches

    def __hash__(self) -> int:
        return hash(self.arches)

    def __repr__(self) -> str:
        return f"IndexTarget(arches={self.arches!r})"

    @classmethod
    def parse(cls, value: "str | IndexTarget") -> "IndexTarget":
        """``gfx950``, ``gfx950;gfx1201`` (PYTORCH_ROCM_ARCH) or ``gfx950-gfx1201`` (the directory name).

        Every arch is validated (known, well-formed) and a repeat is refused,
        the same rules as a stack's PYTORCH_ROCM_ARCH.
        """
        if isinstance(value, IndexTarget):
            return value
        from rocm_bake.archset import ArchSet

        return cls(tuple(ArchSet(value).arches))

    @classmethod
    def from_dir_name(cls, name: str) -> "IndexTarget | None":
        """The target a ``DIST/index/`` entry names, or None when it is not an index directory."""
        if not DIR_NAME.match(name):
            return None
        try:
            return cls.parse(name)
        except Exception:  # noqa: BLE001 - an unknown arch is just not ours
            return None

    @property
    def spelling(self) -> str:
        """The PYTORCH_ROCM_ARCH spelling: ``gfx950;gfx1201``."""
        return ";".join(self.arches)

    @property
    def dir_name(self) -> str:
        """``DIST/index/<dir_name>/`` and the gh-pages folder: ``gfx950-gfx1201``."""
        return "-".join(self.arches)

    @property
    def extra(self) -> str:
        """The rocm-torch extra: ``device-gfx950-gfx1201`` (already PEP 685 normal: lower case, hyphens)."""
        return "device-" + "-".join(self.arches)

    @property
    def tag_suffix(self) -> str:
        """The arch part of image tags and cache refs: ``gfx950_gfx1201``."""
        return "_".join(self.arches)

    @property
    def is_fat(self) -> bool:
        return len(self.arches) > 1

    def __str__(self) -> str:
        return self.spelling


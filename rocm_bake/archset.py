"""The arches one build targets and one index serves: ``Arch`` and ``ArchSet``, parsed once at the edge.

A stack's PYTORCH_ROCM_ARCH is one arch (``gfx950``) or one fat build
(``gfx950;gfx1201``: both code objects in one binary, one set of tags). A fat
build is served like a single-arch one, from its own index, so every name
derived from the arch set comes from this one value:

=================  ==========================  ======================================
spelling           ``gfx950;gfx1201``          PYTORCH_ROCM_ARCH, the CLI's ``--arch``
``dir_name``       ``gfx950-gfx1201``          ``DIST/index/<dir_name>/``, gh-pages folder, release tag
``extra``          ``device-gfx950-gfx1201``   the rocm-torch extra (PEP 685 normalised)
``tag_suffix``     ``gfx950_gfx1201``          image tags and cache refs
=================  ==========================  ======================================

Arches stay in the order the stack declares them, in every spelling: the
extra a user types must match the directory they point pip at.

Both types are ``str`` subtypes whose constructors validate: holding one is
proof it was checked, so everything past the edge (stack config, a CLI
argument, a directory listing, an image tag) takes it as it is and never
parses it again. They stay strings, so f-strings, JSON and Pulumi inputs see
plain names. Constructing one from one is an ``isinstance``.

This module imports nothing heavy (the CLI's warm paths use it); pydantic
sees the types through ``__get_pydantic_core_schema__``, loaded only then.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rocm_bake.errors import RocmBakeError

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

#: Shape of an LLVM AMDGPU processor name: lower-case ``gfx``, a major
#: version, then two more characters (hex digits: gfx90a is a real part).
ARCH_PATTERN = re.compile(r"^gfx(?:9[0-9a-f]{2}|1[0-9]{3})$")

#: A directory name an index can have: one arch or several joined by ``-``.
DIR_NAME = re.compile(r"^gfx[0-9a-f]+(?:-gfx[0-9a-f]+)*$")

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

#: Longest value shown back in an error: a hostile megabyte of input is not echoed whole.
_SHOWN = 80


class ArchError(RocmBakeError, ValueError):
    """A bad arch value. A ``ValueError`` too, so pydantic reports it under the field (the config key)."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")


def sorted_arches(arches: frozenset[str] | set[str] | list[str] | tuple[str, ...]) -> list[str]:
    """Sort arch names numerically (gfx950 before gfx1030)."""
    return sorted(arches, key=lambda a: (len(a), a))


class _ParsedStr(str):
    """A ``str`` whose constructor validates; pydantic validates a field of this type the same way."""

    __slots__ = ()

    @classmethod
    def _normalised(cls, value: str) -> str:  # pragma: no cover - each subtype defines its rule
        raise NotImplementedError

    def __new__(cls, value: str) -> Any:
        if type(value) is cls:  # already parsed: no second validation
            return value
        if not isinstance(value, str):
            raise ArchError(f"expected an architecture name as a string, got {type(value).__name__}")
        return super().__new__(cls, cls._normalised(value))

    @classmethod
    def _trusted(cls, value: str) -> Any:
        """Wrap a value already validated as part of a larger one (never user input)."""
        return str.__new__(cls, value)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: "GetCoreSchemaHandler") -> "CoreSchema":
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls, serialization=core_schema.plain_serializer_function_ser_schema(str)
        )


class Arch(_ParsedStr):
    """One known, well-formed AMDGPU processor name, e.g. ``gfx950``."""

    __slots__ = ()

    @classmethod
    def _normalised(cls, name: str) -> str:
        if not name:
            raise ArchError("empty architecture name: expected e.g. gfx950")
        if not ARCH_PATTERN.match(name):
            hint = f" (did you mean {name.lower()}?)" if ARCH_PATTERN.match(name.lower()) else ""
            raise ArchError(
                f"malformed architecture name {_shown(name)}: expected an AMDGPU processor "
                f"like gfx950 or gfx1201 (lower-case gfx + 3 or 4 digits){hint}"
            )
        if name not in KNOWN_ARCHES:
            raise ArchError(f"unknown architecture {name!r}: known are {', '.join(sorted_arches(KNOWN_ARCHES))}")
        return name


class ArchSet(_ParsedStr):
    """A validated PYTORCH_ROCM_ARCH value: ``gfx950``, or ``gfx950;gfx1201`` for one fat build.

    Accepts the ``;`` spelling (PYTORCH_ROCM_ARCH) and the ``-`` spelling (a
    directory name), and holds the ``;`` one. Duplicates are refused rather
    than collapsed, since they usually mean a copy-paste error in stack config.
    """

    __slots__ = ()

    @classmethod
    def _normalised(cls, value: str) -> str:
        spelled = value.strip()
        if not spelled:
            raise ArchError("empty PYTORCH_ROCM_ARCH: expected e.g. gfx950 or 'gfx950;gfx1201'")
        if "-" in spelled and ";" not in spelled:  # the directory spelling
            spelled = spelled.replace("-", ";")
        arches = [Arch(part) for part in spelled.split(";")]
        dupes = sorted({a for a in arches if arches.count(a) > 1})
        if dupes:
            raise ArchError(f"PYTORCH_ROCM_ARCH {_shown(value)} lists {', '.join(dupes)} more than once")
        return spelled

    @classmethod
    def from_dir_name(cls, name: str) -> "ArchSet | None":
        """The arch set a ``DIST/index/`` entry names, or None when it is not an index directory of ours."""
        if not DIR_NAME.match(name):
            return None
        try:
            return cls(name)
        except ArchError:  # an unknown arch is just not ours
            return None

    @property
    def arches(self) -> tuple[Arch, ...]:
        """The arches in declared order (already validated with the whole value)."""
        return tuple(Arch._trusted(part) for part in self.split(";"))

    @property
    def spelling(self) -> str:
        """The PYTORCH_ROCM_ARCH spelling as a plain ``str``: ``gfx950;gfx1201``."""
        return str.__str__(self)

    @property
    def dir_name(self) -> str:
        """``DIST/index/<dir_name>/``, the gh-pages folder and the release tag's arch: ``gfx950-gfx1201``."""
        return self.replace(";", "-")

    @property
    def extra(self) -> str:
        """The rocm-torch extra: ``device-gfx950-gfx1201`` (already PEP 685 normal: lower case, hyphens)."""
        return "device-" + self.dir_name

    @property
    def tag_suffix(self) -> str:
        """The arch part of image tags and cache refs: ``gfx950_gfx1201``."""
        return self.replace(";", "_")

    @property
    def is_fat(self) -> bool:
        """Several arches in one PYTORCH_ROCM_ARCH: one binary, one set of tags."""
        return ";" in self

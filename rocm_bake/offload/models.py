"""What a wheel's device code is for: the reports the CLI prints and the index caches.

Plain classes, neither pydantic nor dataclasses: every value here is built by
the scanner from bytes it has already checked, so there is nothing left to
validate, and ``rocm-bake wheel arches`` should not pay for either import at
start-up (pydantic about 100 ms, dataclasses 10: start-up counts against one
inflate pass of the member, see ``bench/scan.py``).
"""

from __future__ import annotations

from typing import Any, Literal

SourceKind = Literal["bundle", "compressed-bundle", "code-object", "unreadable"]


class _Record:
    """Equality and repr over ``__slots__``: what a dataclass would add, nothing else."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # mutable, like the models they replace

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


class BundleEntry(_Record):
    """One entry of an offload bundle's header.

    ``processor`` is None for the host entry and for a target that is not an
    AMD GPU; ``foreign`` then says why its target is unknown.
    """

    __slots__ = ("bundle_id", "kind", "triple", "processor", "features", "size", "foreign")

    def __init__(
        self, bundle_id: str, kind: str, triple: str, processor: str | None, features: list[str], size: int,
        foreign: str | None = None,
    ) -> None:
        self.bundle_id, self.kind, self.triple, self.processor = bundle_id, kind, triple, processor
        self.features, self.size, self.foreign = features, size, foreign


class CodeObjectSource(_Record):
    """Where device code was found in one wheel member (or why it could not be read).

    ``kind`` is ``unreadable`` for a ``.hip_fatbin`` that holds data but no
    bundle, or an ELF whose sections cannot be found: unknown, and never
    called "compressed".
    """

    __slots__ = ("member", "section", "offset", "kind", "targets", "entries", "readable", "note")

    def __init__(
        self, member: str, section: str | None, offset: int, kind: SourceKind, targets: list[str],
        entries: list[BundleEntry] | None = None, readable: bool = True, note: str | None = None,
    ) -> None:
        self.member, self.section, self.offset, self.kind, self.targets = member, section, offset, kind, targets
        self.entries = [] if entries is None else entries
        self.readable, self.note = readable, note

    @classmethod
    def from_scan(cls, found: dict[str, Any]) -> CodeObjectSource:
        """One source from the scanner's plain record (``scan.Source``), its entries included."""
        return cls(**{**found, "entries": [BundleEntry(**e) for e in found.get("entries", ())]})


class WheelTargets(_Record):
    """The gfx targets a wheel's device code carries.

    ``pure`` means the wheel holds no native (ELF) code at all;
    ``device_code`` that at least one bundle or code object was found;
    ``unknown`` that some device code could not be read (a compression method
    or a target rocm-bake does not know, or a section that holds no bundle), so
    ``targets`` may be incomplete; ``unreadable`` says why, one line each.
    """

    __slots__ = ("wheel", "targets", "pure", "device_code", "unknown", "unreadable", "notes", "sources")

    def __init__(
        self, wheel: str, targets: list[str], pure: bool, device_code: bool, unknown: bool, unreadable: list[str],
        notes: list[str], sources: list[CodeObjectSource],
    ) -> None:
        self.wheel, self.targets, self.pure, self.device_code = wheel, targets, pure, device_code
        self.unknown, self.unreadable, self.notes, self.sources = unknown, unreadable, notes, sources

    @property
    def compressed_unknown(self) -> bool:
        """Older name of :attr:`unknown` (the index cache reads it): any unreadable device code."""
        return self.unknown

    def summary(self) -> dict[str, object]:
        """The ``--json`` shape: ``{"wheel", "targets", "pure"}`` plus the caveats."""
        return {
            "wheel": self.wheel,
            "targets": self.targets,
            "pure": self.pure,
            "device_code": self.device_code,
            "unknown": self.unknown,
            "unreadable": self.unreadable,
            "notes": self.notes,
        }

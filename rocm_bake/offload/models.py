"""What a wheel's device code is for: the reports the CLI prints and the index caches.

Plain dataclasses, not pydantic: every value here is built by the scanner
from bytes it has already checked, so there is nothing left to validate, and
``rocm-bake wheel arches`` should not pay pydantic's import at start-up (about
100 ms: a third of one inflate pass of a 290 MB member).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

SourceKind = Literal["bundle", "compressed-bundle", "code-object", "unreadable"]


@dataclass(slots=True)
class BundleEntry:
    """One entry of an offload bundle's header.

    ``processor`` is None for the host entry and for a target that is not an
    AMD GPU; ``foreign`` then says why its target is unknown.
    """

    bundle_id: str
    kind: str
    triple: str
    processor: str | None
    features: list[str]
    size: int
    foreign: str | None = None


@dataclass(slots=True)
class CodeObjectSource:
    """Where device code was found in one wheel member (or why it could not be read).

    ``kind`` is ``unreadable`` for a ``.hip_fatbin`` that holds data but no
    bundle, or an ELF whose sections cannot be found: unknown, and never
    called "compressed".
    """

    member: str
    section: str | None
    offset: int
    kind: SourceKind
    targets: list[str]
    entries: list[BundleEntry] = field(default_factory=list)
    readable: bool = True
    note: str | None = None

    @classmethod
    def from_scan(cls, found: dict[str, Any]) -> CodeObjectSource:
        """One source from the scanner's plain record (``scan.Source``), its entries included."""
        return cls(**{**found, "entries": [BundleEntry(**e) for e in found.get("entries", ())]})


@dataclass(slots=True)
class WheelTargets:
    """The gfx targets a wheel's device code carries.

    ``pure`` means the wheel holds no native (ELF) code at all;
    ``device_code`` that at least one bundle or code object was found;
    ``unknown`` that some device code could not be read (a compression method
    or a target rocm-bake does not know, or a section that holds no bundle), so
    ``targets`` may be incomplete; ``unreadable`` says why, one line each.
    """

    wheel: str
    targets: list[str]
    pure: bool
    device_code: bool
    unknown: bool
    unreadable: list[str]
    notes: list[str]
    sources: list[CodeObjectSource]

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

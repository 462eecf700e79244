"""What a wheel's device code is for: the reports the CLI prints and the index caches."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class BundleEntry(BaseModel):
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


class CodeObjectSource(BaseModel):
    """Where device code was found in one wheel member (or why it could not be read).

    ``kind`` is ``unreadable`` for a ``.hip_fatbin`` that holds data but no
    bundle, or an ELF whose sections cannot be found: unknown, and never
    called "compressed".
    """

    member: str
    section: str | None
    offset: int
    kind: Literal["bundle", "compressed-bundle", "code-object", "unreadable"]
    targets: list[str]
    entries: list[BundleEntry] = []
    readable: bool = True
    note: str | None = None


class WheelTargets(BaseModel):
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

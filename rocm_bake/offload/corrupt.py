"""The one failure of the offload byte parsers, and how they read bytes.

The parsers (``elf``, ``bundle``, ``ccob``, ``inflate``) read through a
*getter* ``get(offset, length) -> bytes`` relative to the structure's start, so
the same code serves a member read once front to back, a stored member read in
place, and the inflated prefix of a CCOB bundle. They raise :class:`Corrupt`;
whether that is an error depends on where the bytes turn out to be (a magic
inside a section's bundles, or one that occurs by chance elsewhere in the
file), which the scanner decides.
"""

from __future__ import annotations

from collections.abc import Callable

Getter = Callable[[int, int], bytes]


class Corrupt(Exception):
    """Bytes that do not parse; ``offset`` is relative to the structure's start.

    ``need`` (when known) is how many bytes from the start the parse looked at
    to decide: past a section's end, the honest report is "truncated".
    """

    def __init__(self, problem: str, offset: int = 0, need: int | None = None) -> None:
        super().__init__(problem)
        self.problem, self.offset, self.need = problem, offset, need

"""``--arch`` as argparse reads it: an ``ArchSet``, parsed once where the command line is read."""

from __future__ import annotations

import argparse

from rocm_bake.archset import ArchError, ArchSet


def arch_set(value: str) -> ArchSet:
    """``gfx950`` or a fat build's ``gfx950;gfx1201``; a bad value is argparse's one-line error (exit 2)."""
    try:
        return ArchSet(value)
    except ArchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

"""The farm's face for ``python -m rocm_bake.local``: ``start farm`` (``make farm``) and its status line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from rocm_bake.errors import RocmBakeError
from rocm_bake.local.farm.farm import Farm, up
from rocm_bake.local.farm.layout import Layout
from rocm_bake.local.farm.slots import recorded_slot


def start_main(argv: list[str], root: Path) -> int:
    """Bring up the farm of checkout ``root`` (or ``--root``); print its hosts and the export lines that use it."""
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.local start farm", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=root, help="the checkout whose farm it is (default: this one)")
    root = parser.parse_args(argv).root.resolve()
    return reported(lambda: show(up(root)))


def show(farm: Farm) -> None:
    print("\nHosts:")
    print("\n".join(f"  {line}" for line in farm.host_lines()))
    print(f"\nPaste these into the shell that uses the farm (also in {farm.layout.env_file}, 0600):\n")
    print("\n".join(farm.export_lines()))


def reported(action: Callable[[], None]) -> int:
    """Run one farm command: its failure is one line and exit 2, Ctrl-C exit 130."""
    try:
        action()
    except RocmBakeError as exc:
        print(f"rocm-bake: error: farm: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rocm-bake: farm: interrupted", file=sys.stderr)
        return 130
    return 0


def status(root: Path) -> str:
    slot = recorded_slot(root)
    if slot is None:
        return "farm: none"
    return f"farm: slot {slot}, its export lines in {Layout(root, slot).env_file}"

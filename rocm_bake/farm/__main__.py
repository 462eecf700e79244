"""``python -m rocm_bake.farm up|down|env|demo [--root DIR]``: what the Makefile's farm targets run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocm_bake.errors import RocmBakeError
from rocm_bake.farm.demo import demo
from rocm_bake.farm.farm import down, up
from rocm_bake.farm.layout import Layout
from rocm_bake.farm.slots import recorded_slot

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.farm", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("up", "down", "env", "demo"))
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose farm it is (default: this one)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.action == "up":
            farm = up(root)
            print("\nHosts:")
            print("\n".join(f"  {line}" for line in farm.host_lines()))
            print(f"\nPaste these into the shell that uses the farm (also in {farm.layout.env_file}, 0600):\n")
            print("\n".join(farm.export_lines()))
        elif args.action == "down":
            down(root)
        elif args.action == "demo":
            demo(root)
        else:
            slot = recorded_slot(root)
            if slot is None:
                raise RocmBakeError(f"no farm in {root}: `make farm` makes one")
            print(Layout(root, slot).env_file.read_text(), end="")
    except RocmBakeError as exc:
        print(f"rocm-bake: error: farm: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rocm-bake: farm: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

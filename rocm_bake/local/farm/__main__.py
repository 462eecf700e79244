"""``python -m rocm_bake.local.farm demo [--root DIR]``: ``make farm-demo``, both demo stacks on the farm.

Starting, stopping and the status of the farm go through ``python -m rocm_bake.local`` as every daemon's do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocm_bake.local.farm.cli import reported
from rocm_bake.local.farm.demo import demo

ROOT = Path(__file__).resolve().parents[3]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.local.farm", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("demo",))
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose farm it is (default: this one)")
    args = parser.parse_args(argv)
    return reported(lambda: demo(args.root.resolve()))


if __name__ == "__main__":
    sys.exit(main())

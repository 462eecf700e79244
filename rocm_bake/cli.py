"""The ``rocm-bake`` command line.

Each subcommand lives in its own module under ``rocm_bake.commands`` and
exposes ``register(subparsers)``; this module discovers them, so adding a
command never means editing a central list. A ``RocmBakeError`` prints as
one line naming what was wrong and exits 2: bad input changes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from rocm_bake import __version__, commands
from rocm_bake.errors import RocmBakeError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rocm-bake", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"rocm-bake {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except RocmBakeError as exc:
        print(f"rocm-bake: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `rocm-bake plan X | head` is not an error
        sys.stderr.close()
        return 0
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())

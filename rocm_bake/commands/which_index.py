"""``rocm-bake which-index``: detect local AMD GPUs and print the right install line.

The logic lives in ``rocm_bake.gpu.which``; this module only registers the
command, so the CLI pays for pydantic only when which-index runs. Names the
tests and callers reach through here are forwarded lazily.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any



def __getattr__(name: str) -> Any:
    from rocm_bake.gpu import which

    try:
        return getattr(which, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("which-index", help="detect local AMD GPUs and print the install line")
    parser.add_argument("--sysfs-root", type=Path, default=Path("/"), help="root holding sys/class/kfd (default /)")
    parser.add_argument("--index-base", default=None,
                        help="index base URL: https, or http to loopback, or file:// (default: the Pages site of "
                             "the stacks' rocm-bake:githubRepo, else of this checkout's origin remote when it is on "
                             "GitHub, .../data/wheels; else the lines show <your index base>)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, rocminfo: Any = None) -> int:
    """Exit 0 when at least one install line was printed (with the placeholder base when none was given),
    1 when none could be."""
    from rocm_bake.gpu.detect import run_rocminfo
    from rocm_bake.gpu.which import render, run_which_index

    result = run_which_index(args.sysfs_root, args.index_base, rocminfo or run_rocminfo)
    if args.json:
        print(json.dumps(result.model_dump(), indent=2))
    else:
        print(render(result))
    return 0 if any(c.install for c in result.choices) or result.install else 1

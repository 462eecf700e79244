"""Print ``publish=true|false`` for a stack, from its ``rocm-bake:publish`` config.

Usage: python .github/scripts/stack_publish.py STACK >> "$GITHUB_OUTPUT"

The deploy workflow hands the GitHub token to ``pulumi up`` only where this
says true: publishing "is a separate decision from building", made in the
stack's config, so a stack that does not opt in cannot publish even by
accident.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rocm_bake.config import load_stack_config  # noqa: E402
from rocm_bake.errors import RocmBakeError  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: stack_publish.py STACK", file=sys.stderr)
        return 2
    try:
        config = load_stack_config(argv[0])
    except RocmBakeError as exc:
        print(f"stack_publish: error: {exc}", file=sys.stderr)
        return 2
    print(f"publish={'true' if config.publish else 'false'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

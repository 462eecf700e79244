"""Is STACK in the team's state? Reads ``pulumi stack ls --json`` on stdin.

Usage: pulumi stack ls --json | python .github/scripts/stack_in_state.py STACK

Writes ``exists=true|false`` to ``$GITHUB_OUTPUT`` (and stdout). The pull
request preview only reads the state: it never creates a stack (that would
be a write, and on a pull request). A stack the deploy has not created yet
has no state to diff against, so its preview is skipped with a notice saying
so, rather than failing with "no stack named ..." or creating it.

``pulumi stack ls`` fails on its own when the backend or its credentials are
wrong, so a failure there is an error, never a skip.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def listed(stacks: list[dict[str, Any]], stack: str) -> bool:
    """A file/bucket backend lists ``gfx950``; Pulumi Cloud may list ``org/project/gfx950``."""
    return any(str(entry.get("name", "")).rsplit("/", 1)[-1] == stack for entry in stacks)


def main(argv: list[str], stdin: str) -> int:
    if len(argv) != 1:
        print("usage: stack_in_state.py STACK < stack-ls.json", file=sys.stderr)
        return 2
    stack = argv[0]
    try:
        stacks = json.loads(stdin or "[]")
    except json.JSONDecodeError as exc:
        print(f"::error::pulumi stack ls --json printed no JSON ({exc}): {stdin[:200]!r}")
        return 2
    if not isinstance(stacks, list):
        print(f"::error::pulumi stack ls --json printed {type(stacks).__name__}, not a list")
        return 2
    exists = listed(stacks, stack)
    if not exists:
        print(f"::notice title=pulumi preview skipped::stack {stack} is not in the team's state yet: the first "
              "deploy from main creates it; there is no state to preview against")
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a") as out:
                out.write(f"**pulumi preview {stack} skipped**: not in the team's state yet (the first deploy "
                          "creates it).\n")
    line = f"exists={'true' if exists else 'false'}\n"
    print(line, end="")
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a") as out:
            out.write(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], sys.stdin.read()))

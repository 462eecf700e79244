"""Is STACK in the team's state? Asks the CLI ``make setup`` built (``pulumi stack ls --json``), read-only.

Usage: python .github/scripts/stack_in_state.py STACK

Writes ``exists=true|false`` to ``$GITHUB_OUTPUT`` (and stdout). The pull
request preview only reads the state: it never creates a stack (that would
be a write, and on a pull request). A stack the deploy has not created yet
has no state to diff against, so its preview is skipped with a notice saying
so, rather than failing with "no stack named ..." or creating it.

``pulumi stack ls`` fails on its own when the backend or its credentials are
wrong, so a failure there is an error, never a skip. An empty
``PULUMI_BACKEND_URL`` is an error too: ``.tools/bin/pulumi`` would list the
checkout's own file backend instead, which on a runner holds nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI = Path(__file__).resolve().parents[2] / ".tools" / "bin" / "pulumi"


def listed(stacks: list[dict[str, Any]], stack: str) -> bool:
    """A file/bucket backend lists ``gfx950``; Pulumi Cloud may list ``org/project/gfx950``."""
    return any(str(entry.get("name", "")).rsplit("/", 1)[-1] == stack for entry in stacks)


def stack_list() -> list[dict[str, Any]]:
    """What ``pulumi stack ls --json`` says the backend in PULUMI_BACKEND_URL holds."""
    if not os.environ.get("PULUMI_BACKEND_URL"):
        raise RuntimeError("PULUMI_BACKEND_URL is empty: there is no team state to look in")
    done = subprocess.run([str(CLI), "stack", "ls", "--json", "--non-interactive"], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"pulumi stack ls failed: {done.stderr.strip()[-800:]}")
    try:
        stacks = json.loads(done.stdout or "[]")
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"pulumi stack ls --json printed no JSON ({exc}): {done.stdout[:200]!r}") from None
    if not isinstance(stacks, list):
        raise RuntimeError(f"pulumi stack ls --json printed {type(stacks).__name__}, not a list")
    return stacks


def append(variable: str, text: str) -> None:
    if os.environ.get(variable):
        with open(os.environ[variable], "a") as out:
            out.write(text)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: stack_in_state.py STACK", file=sys.stderr)
        return 2
    stack = argv[0]
    try:
        exists = listed(stack_list(), stack)
    except RuntimeError as exc:
        print(f"::error title=team state::{exc}")
        return 2
    if not exists:
        print(f"::notice title=pulumi preview skipped::stack {stack} is not in the team's state yet: the first "
              "deploy from main creates it; there is no state to preview against")
        append("GITHUB_STEP_SUMMARY", f"**pulumi preview {stack} skipped**: not in the team's state yet (the first "
               "deploy creates it).\n")
    line = f"exists={'true' if exists else 'false'}\n"
    print(line, end="")
    append("GITHUB_OUTPUT", line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The CLI imports only what the chosen command uses (start-up is part of its performance).

Asserted as import sets, never as times: a child interpreter runs the command
and reports which heavy modules it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pulumi", "httpx", "pydantic", "rich", "yaml", "packaging", "stamina")
PROBE = """
import json, sys
from rocm_bake.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.__stderr__)
"""


def heavy_imports(*argv: str) -> set[str]:
    code = PROBE.format(argv=list(argv), heavy=HEAVY)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return set(json.loads(result.stderr.strip().splitlines()[-1]))


def test_version_and_help_import_nothing_heavy() -> None:
    assert heavy_imports("--version") == set()
    assert heavy_imports("--help") == set()


def test_a_command_imports_only_its_own_needs(tmp_path) -> None:
    # the index build's warm path is all stat calls: no pulumi, no httpx, not even pydantic
    assert {"pulumi", "httpx"}.isdisjoint(heavy_imports("index", "build", "--help"))
    assert {"pulumi", "httpx"}.isdisjoint(heavy_imports("arch", "show", "gfx950"))
    assert "pulumi" not in heavy_imports("wheels", "fetch", "--help")


@pytest.mark.parametrize("command", ["arch", "arches", "gpu-test", "index", "nodes", "plan", "publish", "wheel",
                                     "wheels", "which-index"])
def test_every_command_still_parses_its_own_arguments(command: str) -> None:
    result = subprocess.run([sys.executable, "-m", "rocm_bake", command, "--help"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and "usage: rocm-bake " + command in result.stdout

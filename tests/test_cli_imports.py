"""The CLI imports only what the chosen command uses: start-up is part of its performance.

Asserted as import sets, never as times (times are ``bench/cli.py``'s): a
child interpreter runs the command through ``rocm_bake.cli.main`` and reports
which heavy packages it loaded. Command modules are discovered the way the
CLI discovers them, so a new command is held to the same rule.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.index_fixtures import arch_wheel_set
from rocm_bake.cli import command_modules

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pulumi", "httpx", "pydantic", "rich", "yaml", "packaging", "stamina", "components", "backports", "grpc")
#: What a command's ``register`` may never pull in (its run() imports what it needs).
NONE = frozenset()

RUN_PROBE = """
import json, sys
from rocm_bake.cli import main
try:
    status = main({argv!r})
except SystemExit as exc:
    status = exc.code
print(json.dumps([status, sorted(m for m in {heavy!r} if m in sys.modules)]), file=sys.__stderr__)
"""

REGISTER_PROBE = """
import argparse, importlib, json, sys
module = importlib.import_module("rocm_bake.commands.{module}")
module.register(argparse.ArgumentParser(prog="rocm-bake").add_subparsers())
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.__stderr__)
"""


def child(code: str) -> object:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.stderr.strip(), f"the probe printed nothing (exit {result.returncode})"
    return json.loads(result.stderr.strip().splitlines()[-1])


def run_imports(*argv: str) -> tuple[int, set[str]]:
    status, loaded = child(RUN_PROBE.format(argv=list(argv), heavy=HEAVY))  # type: ignore[misc]
    return status, set(loaded)


def test_version_and_help_import_nothing_heavy() -> None:
    assert run_imports("--version") == (0, set())
    assert run_imports("--help") == (0, set())


#: Commands whose registration is known to import something heavy (none: which-index's models live in
#: rocm_bake.gpu.which, imported when it runs).
XFAIL_REGISTER: dict[str, str] = {}


@pytest.mark.parametrize("module", sorted(command_modules().values()))
def test_registering_a_command_imports_nothing_heavy(module: str, request: pytest.FixtureRequest) -> None:
    """``rocm-bake X --help`` and every argument error cost argparse only: heavy imports live in run()."""
    if module in XFAIL_REGISTER:
        request.applymarker(pytest.mark.xfail(strict=True, reason=XFAIL_REGISTER[module]))
    assert set(child(REGISTER_PROBE.format(module=module, heavy=HEAVY))) == NONE  # type: ignore[arg-type]


def test_index_build_never_imports_pulumi_or_httpx(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    arch_wheel_set(wheels, "gfx950", names=["torch", "triton_kernels"])
    argv = ("index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out", str(tmp_path / "dist"), "--quiet")
    status, cold = run_imports(*argv)
    assert status == 0 and (tmp_path / "dist" / "index" / "gfx950" / "index.html").exists()
    assert {"pulumi", "httpx", "components", "grpc"}.isdisjoint(cold), cold
    status, warm = run_imports(*argv)
    # The warm path is stat calls against the last build's stamp: nothing heavy at all.
    assert status == 0 and warm == set(), warm


def test_arch_show_and_nodes_import_no_pulumi_or_network() -> None:
    for argv in (("arch", "show", "gfx950"), ("nodes",), ("arches", "list")):
        status, loaded = run_imports(*argv)
        assert status == 0 and {"pulumi", "httpx", "components", "rich"}.isdisjoint(loaded), (argv, loaded)


def test_a_refused_argument_imports_nothing_heavy() -> None:
    """Bad input is refused before anything heavy loads (argparse's own checks)."""
    status, loaded = run_imports("gpu-test", "--arch", "gfx950", "--lock-timeout", "nan")
    assert status == 2 and loaded == set()
    status, loaded = run_imports("plan", "gfx950", "--set", "no-equals-sign")
    assert status == 2 and loaded == set()


def test_wheel_arches_imports_no_pydantic_or_dataclasses(tmp_path: Path) -> None:
    """The scan path is plain classes: ``wheel arches`` start-up counts in ``bench/scan.py``'s CLI rows."""
    (torch,) = arch_wheel_set(tmp_path, "gfx950", names=["torch"])
    argv = ["wheel", "arches", "--json", str(torch)]
    status, loaded = child(RUN_PROBE.format(argv=argv, heavy=(*HEAVY, "dataclasses")))  # type: ignore[misc]
    assert status == 0 and {"pydantic", "dataclasses", "pulumi", "httpx", "components", "rich"}.isdisjoint(loaded), loaded

"""One home per concern: the core never imports the program, the program is no installed module, ``tools/``
holds only what builds the engines, and every daemon of a checkout stops through one path."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What builds the engines besides their Go modules: the build script and the shim it installs before plugins.
TOOLS_FILES = {"engines.py", "plugin-watchdog"}
STOP_TARGETS = ("down", "builder-stop", "state-server-stop", "farm-down")


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_no_core_module_imports_the_program() -> None:
    importing = {str(path.relative_to(ROOT)): sorted(m for m in imported_modules(path) if m.split(".")[0] == "components")
                 for path in sorted((ROOT / "rocm_bake").rglob("*.py"))}
    assert {k: v for k, v in importing.items() if v} == {}, "the core imports the program's components"


def test_components_is_no_installed_top_level_module(tmp_path: Path) -> None:
    """From outside the checkout (no project directory on sys.path), the venv finds rocm_bake and no components."""
    probe = "import importlib.util as u; print(u.find_spec('rocm_bake') is not None, u.find_spec('components'))"
    seen = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-I", "-c", probe], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.split() == ["True", "None"], f"the venv's site-packages offers components: {seen.stdout}"


def test_tools_holds_only_what_builds_the_engines() -> None:
    strays = [p.name for p in (ROOT / "tools").iterdir()
              if not (p.is_dir() and (p / "go.mod").is_file()) and p.name not in TOOLS_FILES | {"__pycache__"}]
    assert strays == [], f"tools/ holds what builds no engine: {strays}"


def test_every_stop_target_stops_through_one_path() -> None:
    for target in STOP_TARGETS:
        lines = subprocess.run(["make", "-s", "-n", target, "PYTHON=python3"], cwd=ROOT, capture_output=True,
                               text=True, timeout=60, check=True).stdout.splitlines()
        assert lines and all(line.startswith("python3 -m rocm_bake.local stop") for line in lines), (target, lines)


def definitions(name: str, *bases: str) -> list[str]:
    """Where a function ``name`` is defined (any depth) in the Python files under ``bases``."""
    found = []
    for base in bases:
        for path in sorted((ROOT / base).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.FunctionDef) and node.name == name]
    return found


def test_each_shared_helper_and_fixture_has_one_home() -> None:
    code = ("rocm_bake", "components", "tools", "dockerfiles", "bench", "tests")
    ports = definitions("free_port", *code)
    assert ports == ["rocm_bake/ports.py:8"], f"free_port is defined besides rocm_bake/ports.py: {ports}"
    assert [where.split(":")[0] for where in definitions("registered_endpoint", *code)] == ["rocm_bake/local/builder.py"]
    assert [where.split(":")[0] for where in definitions("registry", "tests")] == ["tests/registry_fixtures.py"]
    farms = [where.split(":")[0] for where in definitions("farm", "tests") if "/test_farm" in where or "farm_" in where]
    assert farms == ["tests/farm_fixtures.py"], farms

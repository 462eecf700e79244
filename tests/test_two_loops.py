"""The two loops: service tests are marked, run after the fast ones, and an unmarked test cannot start a service.

``make test-fast`` runs ``-m "not services"`` with only the venv; this module
is in it, so the guard is checked where it matters: in a test that is not
marked, the real starters refuse before they start anything.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import conftest
from tests import services
from tests.engine_fixtures import engine
from tests.registry_fixtures import running_registry

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def test_an_unmarked_test_that_starts_the_engine_fails_naming_it() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"test_two_loops\.py::.* starts the engine pulumi but is not "
                                                     r"marked 'services': add its module to SERVICE_MODULES"):
        engine("pulumi")


def test_an_unmarked_test_that_starts_a_registry_fails_before_it_starts(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"starts docker-registry but is not marked 'services'"):
        next(running_registry(tmp_path / "registry"))
    assert not (tmp_path / "registry").exists(), "the registry was started before the guard refused it"


def test_the_fast_tests_run_first(request: pytest.FixtureRequest) -> None:
    marked = [item.get_closest_marker(services.MARKER) is not None for item in request.session.items]
    first_marked = marked.index(True) if True in marked else len(marked)
    assert not any(not m for m in marked[first_marked:]), "a fast test runs after a service test"


def test_the_service_modules_and_fixtures_named_exist() -> None:
    modules = {path.stem for path in TESTS.glob("test_*.py")}
    assert conftest.SERVICE_MODULES <= modules, sorted(conftest.SERVICE_MODULES - modules)
    assert set(conftest.SLOWEST_SERVICE_MODULES) <= modules, sorted(set(conftest.SLOWEST_SERVICE_MODULES) - modules)
    shared = set()
    for path in TESTS.glob("*_fixtures.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list):
                shared.add(node.name)
    assert conftest.SERVICE_FIXTURES <= shared, sorted(conftest.SERVICE_FIXTURES - shared)


def test_make_test_fast_selects_the_unmarked_tests_with_the_venv_only() -> None:
    text = (ROOT / "Makefile").read_text()
    fast = re.search(r"^test-fast: (.*?) ##.*\n\t(.*)$", text, re.M)
    assert fast, "the Makefile has no test-fast rule"
    assert fast.group(1).split() == ["venv"] and f'pytest -m "not {services.MARKER}" -n $(TEST_JOBS)' in fast[2], fast[0]
    everything = re.search(r"^test: (.*?) ##.*\n\t(.*)\n\t(.*)\n(?!\t)", text, re.M)
    assert everything, "the Makefile's test rule is not the fast part then the services part"
    assert everything[2] == fast[2] and f"pytest -m {services.MARKER} -n $(SERVICE_JOBS) --dist loadscope" in everything[3], \
        everything[0]
    venv = re.search(r"^venv: (.*?) ##", text, re.M)
    assert venv and "setup" not in venv.group(1) and "engines" not in venv.group(1) and "apt" not in venv.group(1)

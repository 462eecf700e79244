"""Shared pytest setup: the repo root on sys.path so ``components`` imports, and the two loops.

A test that starts the engine, BuildKit, a registry, sshd, versitygw, a
farm or a browser carries the ``services`` marker; ``make test-fast`` runs
every other test (``-m "not services"``) with nothing but the venv, ``make
test`` runs both, the fast ones first. The marker is applied here:

* by module: every test of a module in ``SERVICE_MODULES``;
* by fixture: every test whose fixtures reach one in ``SERVICE_FIXTURES`` (the
  shared ones of ``tests/*_fixtures.py``) or in its module's own
  ``SERVICE_FIXTURES`` set (a module whose other tests are fast);

or, for a lone test in a fast module that starts one itself, by its own
``@pytest.mark.services``. The guard: whatever starts a service in a test
(``engine_fixtures.engine``, ``registry_fixtures.running_registry``,
``ssh_fixtures.ssh_node``, the browser test) asks ``tests.services.require``
first, which fails a test not so marked, naming what it started: a fast run
never starts a service unseen.
"""

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import services  # noqa: E402  (after the path line: tests/ imports as a package from the root)

#: Modules each of whose tests starts a service (the engine, BuildKit, a registry, sshd, versitygw, a farm).
SERVICE_MODULES = {
    "test_arches_engine", "test_check_dockerfiles", "test_checkouts", "test_config_engine", "test_engine_run",
    "test_engines", "test_extract", "test_farm", "test_farm_faults", "test_gpu_test", "test_gpu_test_engine",
    "test_language_host", "test_lifecycle",
    "test_publish_rotation", "test_registry", "test_resume", "test_state_server", "test_team_state",
}
#: Shared fixtures (tests/*_fixtures.py) that start a service: a test using one is a service test wherever it is.
SERVICE_FIXTURES = {"registry", "buildkit", "base_ref", "engines_built", "proxy", "ssh_node"}


def starts_a_service(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    if module is None:
        return False
    if module.__name__.rpartition(".")[2] in SERVICE_MODULES:
        return True
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(fixtures & (SERVICE_FIXTURES | set(getattr(module, "SERVICE_FIXTURES", ()))))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{services.MARKER}: {services.MEANING}")


#: The service modules that take longest, longest first: each runs on one worker (``--dist loadscope``), so they are
#: handed out first, and the short ones fill the other workers around them.
SLOWEST_SERVICE_MODULES = ("test_farm_faults", "test_checkouts", "test_lifecycle", "test_farm", "test_installed_engines",
                           "test_language_host", "test_workflows")


def run_order(item: pytest.Item) -> tuple[bool, int]:
    """Fast tests first; among the service tests, the slowest modules first."""
    if item.get_closest_marker(services.MARKER) is None:
        return (False, 0)
    module = getattr(item, "module", None)
    name = module.__name__.rpartition(".")[2] if module is not None else ""
    return (True, SLOWEST_SERVICE_MODULES.index(name) if name in SLOWEST_SERVICE_MODULES
            else len(SLOWEST_SERVICE_MODULES))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the service tests, then order them (a stable sort: each module keeps its own order)."""
    for item in items:
        if starts_a_service(item):
            item.add_marker(services.MARKER)
    items.sort(key=run_order)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    services.running(item)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    services.running(None)


@pytest.fixture(scope="session", autouse=True)
def public_index_stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The public index every index build's lock resolves against: an empty simple index on loopback, never PyPI.

    The test wheels need nothing from a public index, so an empty one resolves
    their locks; the squatter tests serve their own stand-in with content.
    """
    from rocm_bake.index.check import serve
    from rocm_bake.index.defaults import PUBLIC_INDEX_ENV

    root = tmp_path_factory.mktemp("public-index")
    (root / "simple").mkdir()
    (root / "simple" / "index.html").write_text("<!DOCTYPE html><html><body></body></html>\n")
    before = os.environ.get(PUBLIC_INDEX_ENV)
    with serve(root) as served:
        os.environ[PUBLIC_INDEX_ENV] = f"{served.url}/simple/"
        yield os.environ[PUBLIC_INDEX_ENV]
    if before is None:
        os.environ.pop(PUBLIC_INDEX_ENV, None)
    else:
        os.environ[PUBLIC_INDEX_ENV] = before

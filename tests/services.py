"""The guard behind the ``services`` marker: a test that starts a service must carry it.

``make test-fast`` runs the tests without the marker with only the venv; a
test there that started the engine or a daemon would need what the fast loop
promises not to (engines, Debian packages) and would be slow. So every place
the tests start one calls ``require`` first, and an unmarked test fails at
once, naming the service and where the marker comes from (tests/conftest.py).
"""

from __future__ import annotations

import pytest

MARKER = "services"
MEANING = ("starts the engine, BuildKit, a registry, sshd, versitygw or a farm "
           "(make test runs these after the fast part; make test-fast does not)")

#: The test being set up, run or torn down; None between tests and outside pytest (bench/ imports fixtures).
_current: list[pytest.Item | None] = [None]


def running(item: pytest.Item | None) -> None:
    _current[0] = item


def require(what: str) -> None:
    """Fail the running test unless it is marked ``services``: it is about to start ``what``."""
    item = _current[0]
    if item is not None and item.get_closest_marker(MARKER) is None:
        pytest.fail(f"{item.nodeid} starts {what} but is not marked '{MARKER}': add its module to SERVICE_MODULES "
                    "in tests/conftest.py, or the fixture that starts it to SERVICE_FIXTURES (the shared set there, "
                    "or the module's own)", pytrace=False)

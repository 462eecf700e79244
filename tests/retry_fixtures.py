"""Retries without waiting: stamina's testing mode, and the lines a user would have seen."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
import stamina

from rocm_bake import progress


@pytest.fixture
def no_waits() -> Iterator[io.StringIO]:
    """stamina's testing mode (every retry runs, no wait is slept, attempts stay the client's own)
    and the lines the user would see (``progress.note``), captured."""
    captured = io.StringIO()
    quiet = progress.is_quiet()
    progress.set_stream(captured)
    progress.set_quiet(False)
    with stamina.set_testing(True, attempts=1000, cap=True):
        yield captured
    progress.set_stream(None)
    progress.set_quiet(quiet)

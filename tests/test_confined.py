"""#21 item 8, "Confined and consistent": each rule with the specific thing it guards."""

from __future__ import annotations

import shutil
from pathlib import Path

from components.index_provider import WheelIndexProvider
from tests.index_fixtures import arch_wheel_set


def index_props(dist: Path, arch: str = "gfx950") -> dict:
    return {"arch": arch, "wheels_dir": str(dist / "wheels" / arch), "dist": str(dist), "wheel_url": None,
            "rocm_version": "10.1.0"}


def test_deleted_wheels_are_drift_not_a_crash(tmp_path: Path) -> None:
    """A5a: with DIST/wheels/<arch> deleted, refresh and the next preview report drift (no traceback)."""
    dist = tmp_path / "dist"
    arch_wheel_set(dist / "wheels" / "gfx950", "gfx950", ["torch", "nixl"])
    provider = WheelIndexProvider()
    news = index_props(dist)
    created = provider.create(news)
    shutil.rmtree(dist / "wheels" / "gfx950")
    refreshed = provider.read(created.id, created.outs).outs
    assert refreshed["index_sha256"] is None  # refresh: the index no longer matches its inputs
    diff = provider.diff(created.id, refreshed, news)
    assert diff.changes is True and not diff.replaces

"""Fixtures for publish tests: a started FakeGitHub, built per-arch indexes, clients, retries that never sleep."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.publish.github import GitHubClient
from rocm_bake.index.build import build_index
from rocm_bake.index.models import IndexResult
from tests.fake_github import FakeGitHub
from tests.index_fixtures import arch_wheel_set
from tests.retry_fixtures import no_waits  # noqa: F401 - re-exported fixture


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        yield fake


def make_client(gh: FakeGitHub, token: str | None = "default", **kw) -> GitHubClient:
    """A client of the fake; tests that meet faults use ``no_waits`` (stamina's testing mode), never a sleep."""
    return GitHubClient(gh.full_name, gh.state.token if token == "default" else token, gh.endpoints(), **kw)


def build_arch_index(tmp: Path, arch: str, names: list[str] | None = None) -> IndexResult:
    """Real wheels for ``arch`` under ``tmp/wheels/<arch>``, indexed into ``tmp/dist``."""
    wheels = tmp / "wheels" / arch
    arch_wheel_set(wheels, arch, names)
    return build_index(ArchSet(arch), wheels, tmp / "dist")


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    build_arch_index(tmp_path, "gfx950", ["torch", "triton", "nixl"])
    return tmp_path / "dist"

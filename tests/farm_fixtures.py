"""A farm on this machine for the farm tests (rocm_bake/local/farm): one per module, and what checks that taking
it down leaves nothing. Root only, as CI runs them: a farm needs ``ip netns``."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake.local.farm import farm as farm_mod
from rocm_bake.local.farm import slots
from rocm_bake.local.farm.layout import HOSTS, Layout
from tests.engine_fixtures import engine


def need_root_and_engines() -> None:
    if os.geteuid() != 0:
        pytest.fail("the farm tests need root (ip netns, veths), as CI runs them")
    for name in ("buildkitd", "buildx", "versitygw"):
        engine(name)


@contextlib.contextmanager
def checkouts(*names: str) -> Iterator[list[Path]]:
    """Temp checkout roots outside pytest's basetemp (which a concurrent pytest of this user may prune)."""
    top = Path(tempfile.mkdtemp(prefix="rocm-bake-farm-test-"))
    try:
        roots = [top / name for name in names]
        for root in roots:
            root.mkdir()
        yield roots
    finally:
        shutil.rmtree(top, ignore_errors=True)


def quiet(_: str) -> None:
    pass


def cmdlines() -> dict[str, bytes]:
    """Every process's command line (pid: NUL-joined args); processes that end meanwhile are skipped."""
    found = {}
    for pid in Path("/proc").iterdir():
        if pid.name.isdigit():
            try:
                found[pid.name] = (pid / "cmdline").read_bytes()
            except OSError:
                pass
    return found


def buildx_names(root: Path) -> str:
    return farm_mod.buildx(root, "ls").stdout


def leftovers(layout: Layout) -> list[str]:
    """Anything of ``layout``'s farm still on this machine: namespaces, links, processes, files, claim, builders."""
    found = [line for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
             .splitlines() if line.split()[0].startswith(f"{layout.prefix}-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()
    found += [line.split(":")[1].strip() for line in links
              if line.split(":")[1].strip().split("@")[0] in {layout.bridge, *(layout.veth(h) for h in HOSTS)}]
    found += [f"pid {pid}" for pid, args in cmdlines().items() if str(layout.dir).encode() in args]
    found += [str(path) for path in (layout.dir, slots.claims_dir() / str(layout.slot)) if path.exists()]
    found += [f"buildx {name}" for name in ("farm-builder-1", "farm-builder-2") if name in buildx_names(layout.root)]
    return found


@pytest.fixture(scope="module")
def farm() -> Iterator[farm_mod.Farm]:
    """One farm per module (a checkout of its own); taking it down must leave nothing (checked at teardown)."""
    need_root_and_engines()
    with pytest.MonkeyPatch.context() as patch, checkouts("checkout") as (root,):
        patch.delenv("BUILDX_CONFIG", raising=False)
        made = farm_mod.up(root, quiet)
        try:
            yield made
        finally:
            farm_mod.down(root, quiet)
        assert leftovers(made.layout) == []

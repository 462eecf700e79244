"""``rocm-bake arches up`` on the real engine: both demo stacks at once, each on a buildkitd of its own.

Two real buildkitds are registered as buildx ``remote`` builders in one
private BUILDX_CONFIG; $ROCM_BAKE_STACK_BUILDERS puts demo-gfx950 on the
first and demo-gfx1201 on the second (no stack file names a builder), and
$ROCM_BAKE_REGISTRY the module's registry. Each stack is narrowed to
triton-wheel with ``rocm-bake:targets`` in the test's copy of its stack file,
so the run stays small.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine_fixtures import ROOT, BuildKit, builder_tool, copy_project, engine, project_env
from tests.engine_fixtures import Registry, base_ref, buildkit, registry  # noqa: F401  (module fixtures)

STACKS = ("demo-gfx950", "demo-gfx1201")


@pytest.fixture(scope="module")
def second_builder(tmp_path_factory: pytest.TempPathFactory, registry: Registry, buildkit: BuildKit) -> Iterator[str]:
    """Another buildkitd beside the module's, registered in the same BUILDX_CONFIG."""
    name, state = f"{buildkit.builder}-2", tmp_path_factory.mktemp("buildkit-2") / "buildkit"
    builder_tool.start(name, state, [registry.address], env=buildkit.env())
    try:
        yield name
    finally:
        builder_tool.stop(name, state, env=buildkit.env())


def arches(action: str, project: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "rocm_bake", "arches", action, "--stacks", ",".join(STACKS), *flags]
    return subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=1500)


def rows(stdout: str) -> dict[str, list[str]]:
    """The closing table's rows by stack: builder, result, duration, changed, first error."""
    lines = stdout.splitlines()
    head = max(i for i, line in enumerate(lines) if line.startswith("STACK "))
    return {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line) for line in lines[head + 1:])}


def built_something(builder: str, env: dict[str, str]) -> bool:
    """buildx's disk usage of ``builder`` names build records (a fresh buildkitd lists none)."""
    du = subprocess.run([str(engine("buildx")), "du", "--builder", builder], env=env, capture_output=True,
                        text=True, timeout=60, check=True)
    return bool(re.search(r"^Total:\s+[1-9]", du.stdout, re.MULTILINE))


def test_two_demo_stacks_up_at_once_each_on_its_own_builder(tmp_path: Path, registry: Registry, buildkit: BuildKit,
                                                             base_ref: str, second_builder: str) -> None:
    project = copy_project(tmp_path / "project")
    (tmp_path / "state").mkdir()
    env = project_env(tmp_path / "state", buildkit, tmp_path)
    env.update(ROCM_BAKE_REGISTRY=registry.address, ROCM_BAKE_PULUMI=str(engine("pulumi")),
               ROCM_BAKE_STACK_BUILDERS=f"demo-gfx950={buildkit.builder},demo-gfx1201={second_builder}")
    for stack in STACKS:
        with (project / "stacks" / f"Pulumi.{stack}.yaml").open("a") as stack_file:
            stack_file.write('  rocm-bake:targets: "triton-wheel"\n')
        subprocess.run([str(engine("pulumi")), "stack", "init", stack, "--secrets-provider", "passphrase",
                        "--non-interactive"], cwd=project, env=env, check=True, capture_output=True, timeout=120)
    assert not built_something(second_builder, env)

    began = time.monotonic()
    up = arches("up", project, env)
    wall = time.monotonic() - began
    (tmp_path / "arches-up.log").write_text(up.stdout + up.stderr)
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr
    table = rows(up.stdout)
    assert {stack: row[:2] for stack, row in table.items()} == {
        "demo-gfx950": [buildkit.builder, "ok"], "demo-gfx1201": [second_builder, "ok"]}
    assert all(int(row[3]) > 0 for row in table.values()) and all(row[4] == "-" for row in table.values())
    streamed = up.stdout.splitlines()[:-3]
    assert all(line.startswith(("demo-gfx950  | ", "demo-gfx1201 | ")) for line in streamed)
    assert f"demo-gfx1201 | pulumi up --stack demo-gfx1201 on builder {second_builder}" in streamed
    assert built_something(second_builder, env)
    # at the same time: the run took less than its two passes end to end
    durations = [float(row[2].removesuffix(" s")) for row in table.values()]
    assert wall < sum(durations), (wall, durations)

    again = arches("preview", project, env, "--expect-no-changes")
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr
    assert {stack: (row[1], row[3]) for stack, row in rows(again.stdout).items()} == {
        "demo-gfx950": ("ok", "0"), "demo-gfx1201": ("ok", "0")}

    # drift in one stack: a build arg its image does not have yet
    stack_file = project / "stacks" / "Pulumi.demo-gfx1201.yaml"
    config = stack_file.read_text()
    key = "\n  rocm-bake:buildArgs:\n"
    assert key in config
    stack_file.write_text(config.replace(key, f'{key}    DRIFT_PROBE: "1"\n'))
    drift = arches("preview", project, env, "--expect-no-changes")
    assert drift.returncode == 7, drift.stdout[-4000:] + drift.stderr
    assert drift.stderr.splitlines()[-1] == "rocm-bake: error: changes proposed for demo-gfx1201 (expected none)"
    table = rows(drift.stdout)
    assert table["demo-gfx950"][1] == "ok" and table["demo-gfx1201"][1] == "changes", table
    assert re.fullmatch(r"\d+ to (update|replace)(, \d+ to (update|replace))*", table["demo-gfx1201"][4]), table

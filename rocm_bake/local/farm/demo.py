"""``make farm-demo``: both demo stacks ``up`` at once on the farm, each on a builder of its own.

On this checkout's farm (brought up first when it has none): the demo base
pushed to the farm registry with the farm login, both demo stacks created in
the farm bucket, then ``rocm-bake arches up --stacks demo-gfx950,demo-gfx1201``
(the exports' ``ROCM_BAKE_STACK_BUILDERS`` put demo-gfx950 on builder-1 and
demo-gfx1201 on builder-2), ``pulumi preview --expect-no-changes`` of each,
``rocm-bake index check`` of both indexes and the install lines of
``rocm-bake index lines``. It ends with each stack's wall time and the total.
Every step is a command a user could type with the farm's exports pasted in;
this module only runs them in order and stops at the first that fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rocm_bake.errors import RocmBakeError
from rocm_bake.local.farm import farm as farm_mod
from rocm_bake.local.farm import slots
from rocm_bake.local.farm.layout import BUILDERS, DEMO_STACKS, Layout

Say = Callable[[str], None]


def demo_arch(stack: str) -> str:
    """``demo-gfx950`` -> ``gfx950``: the arch of a demo stack, the name of its index in dist/index/."""
    return stack.removeprefix("demo-")


#: A row of the ``rocm-bake arches`` closing table: stack, builder, result, duration ("12.3 s"), changed, error.
ROW = re.compile(r"^(?P<stack>\S+)\s{2,}(?P<builder>\S+)\s{2,}(?P<result>.+?)\s{2,}(?P<seconds>[\d.]+) s\s{2,}"
                 r"(?P<changed>\d+|-)\s")


@dataclass(frozen=True)
class Row:
    """One stack's row of that table, for the stacks that ran."""

    builder: str
    result: str
    seconds: float
    changed: int | None


def table_rows(output: str) -> dict[str, Row]:
    """The rows of the last closing table of ``rocm-bake arches`` in ``output``, by stack."""
    lines = output.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("STACK ")]
    rows = {}
    for match in map(ROW.match, lines[heads[-1] + 1:] if heads else []):
        if match:
            changed = None if match["changed"] == "-" else int(match["changed"])
            rows[match["stack"]] = Row(match["builder"], match["result"], float(match["seconds"]), changed)
    return rows


def stack_seconds(output: str) -> dict[str, float]:
    """Each stack's duration from the closing table of ``rocm-bake arches``."""
    return {stack: row.seconds for stack, row in table_rows(output).items()}


@dataclass(frozen=True)
class Runner:
    """Runs the demo's commands in ``project`` with ``env``, each line streamed to ``say``."""

    project: Path
    env: Mapping[str, str]
    say: Say = print

    def run(self, argv: list[str], what: str, extra_env: Mapping[str, str] | None = None) -> str:
        """Run ``argv``; its output streamed and returned. A failure is one line naming ``what``."""
        proc = subprocess.Popen(argv, cwd=self.project, env={**self.env, **(extra_env or {})},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", bufsize=1)
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            self.say(line.rstrip("\n"))
        if proc.wait() != 0:
            last = next((line.strip() for line in reversed(lines) if line.strip()), "no output")
            raise RocmBakeError(f"{what} failed (exit {proc.returncode}): {last}")
        return "".join(lines)


def tools(root: Path) -> tuple[str, str, str]:
    """This checkout's pulumi wrapper, buildx and rocm-bake CLI (``make setup`` links them in .tools/bin)."""
    bin_dir = root / ".tools" / "bin"
    found = tuple(str(bin_dir / name) for name in ("pulumi", "buildx", "rocm-bake"))
    missing = [path for path in found if not Path(path).exists()]
    if missing:
        raise RocmBakeError(f"{missing[0]} is missing: run `make setup`")
    return found  # type: ignore[return-value]


def ensure_stacks(runner: Runner, pulumi: str, stacks: tuple[str, ...]) -> None:
    """Each stack in the backend of ``runner.env`` (the farm bucket), made with the passphrase provider once."""
    for stack in stacks:
        selected = subprocess.run([pulumi, "stack", "select", stack, "--non-interactive"], cwd=runner.project,
                                  env=dict(runner.env), capture_output=True, text=True, timeout=300)
        if selected.returncode != 0:
            runner.run([pulumi, "stack", "init", stack, "--secrets-provider", "passphrase", "--non-interactive"],
                       f"pulumi stack init {stack}")


def arches_up(runner: Runner, rocm_bake: str, stacks: tuple[str, ...]) -> tuple[dict[str, float], float]:
    """``rocm-bake arches up --stacks ...``: each stack's duration from its table, and the run's wall time."""
    began = time.monotonic()
    output = runner.run([rocm_bake, "arches", "up", "--stacks", ",".join(stacks)], "rocm-bake arches up")
    return stack_seconds(output), time.monotonic() - began


def farm_layout(root: Path, say: Say) -> Layout:
    """This checkout's farm, brought up first when it has none."""
    slot = slots.recorded_slot(root)
    if slot is None or not Layout(root, slot).env_file.exists():
        say("farm-demo: this checkout has no farm: bringing one up (make farm)")
        return farm_mod.up(root, say).layout
    return Layout(root, slot)


def demo(root: Path, say: Say = print) -> None:
    pulumi, buildx, rocm_bake = tools(root)
    layout = farm_layout(root, say)
    exports = farm_mod.read_exports(layout.env_file)
    runner = Runner(root, {**os.environ, **exports}, say)
    registry = layout.endpoint("registry")
    say(f"farm-demo: registry {registry}, state {exports['PULUMI_BACKEND_URL'].split('?')[0]} "
        f"(farm slot {layout.slot}), builders " + ", ".join(
            f"{stack} on {layout.buildx_name(host)}" for stack, host in zip(DEMO_STACKS, BUILDERS)))
    runner.run([sys.executable, str(root / "dockerfiles" / "demo" / "base.py"), "--registry", registry,
                "--builder", layout.buildx_name(BUILDERS[0]), "--buildx", buildx], "the demo base push")
    ensure_stacks(runner, pulumi, DEMO_STACKS)
    seconds, total = arches_up(runner, rocm_bake, DEMO_STACKS)
    for stack in DEMO_STACKS:
        runner.run([pulumi, "preview", "--stack", stack, "--expect-no-changes", "--non-interactive",
                    "--policy-pack", str(root / "policy")], f"pulumi preview --expect-no-changes --stack {stack}")
    dist = root / "dist"
    arches = [demo_arch(stack) for stack in DEMO_STACKS]
    runner.run([rocm_bake, "index", "check", str(dist), *(f"--arch={arch}" for arch in arches)],
               "rocm-bake index check", {"PIP_CONFIG_FILE": "/dev/null"})
    for arch in arches:
        say(f"\nThe {arch} index is in {dist / 'index' / arch}/. Install from it:\n")
        runner.run([rocm_bake, "index", "lines", str(dist), "--arch", arch], f"rocm-bake index lines --arch {arch}")
    say("\nWall time of `rocm-bake arches up`, both stacks at once:")
    for stack, host in zip(DEMO_STACKS, BUILDERS):
        took = seconds.get(stack)
        say(f"  {stack:<13} on {layout.buildx_name(host):<14} {'-' if took is None else f'{took:.1f} s'}")
    say(f"  {'total':<13}    {'':<14} {total:.1f} s")
    say("\nThe farm keeps running: `make farm-down` removes it (its state and images go with it).")

#!/usr/bin/env python3
"""Bench: both demo stacks on two farm builders at once, against the same two stacks on one builder.

A farm of its own (rocm_bake/local/farm, in a temp checkout: root, namespaces) and a
copy of the program whose demo torch stage (built by both arches, once per
arch) gains ``RUN ... && sleep S``: it stands for remote compile time, and
sleeping costs this machine's two cores nothing, which the builder hosts share,
so only waiting can show what a second builder buys. The normal demo is
untouched (only the copy's Dockerfile changes). State in the farm bucket, images
in its authenticated registry.

Rows (subject and baseline alternate in this run, A B A B, and each run gets a
new line in that stage, so every run rebuilds torch and what depends on it for
both arches, from the same cache state: both builders warmed first with every
stage up to it, for both arches):

* ``two builders vs one``: wall of ``rocm-bake arches up --stacks
  demo-gfx950,demo-gfx1201`` with demo-gfx950 on builder-1 and demo-gfx1201 on
  builder-2 (``ROCM_BAKE_STACK_BUILDERS``) against the same command with both on
  builder-1 (``arches up`` then runs them one after another: they share it).
  Goal: <= 0.6.
* ``no-change up, both stacks vs one``: a no-change ``arches up`` of both
  stacks (two builders) against that of demo-gfx950 alone. Goal: <= 1.5 (one
  after another would be about 2).

Run: ``python bench/farm.py [--sleep S] [--pairs N] [--no-change-pairs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results import record, reset  # noqa: E402

from rocm_bake.errors import RocmBakeError  # noqa: E402
from rocm_bake.local.farm import farm as farm_mod  # noqa: E402
from rocm_bake.local.farm.demo import Runner, ensure_stacks, table_rows, tools  # noqa: E402
from rocm_bake.local.farm.layout import BUILDERS, DEMO_STACKS  # noqa: E402
from tests.engine_fixtures import copy_project  # noqa: E402

BENCH = "farm"
ROOT = Path(__file__).resolve().parent.parent
#: The demo torch stage's line the sleep goes after: its triton install, before the torch wheel is built.
ANCHOR = "RUN python3 /usr/local/bin/demo_build.py install /deps/triton-*.whl\n"


class Bench:
    """The farm, the program's copy with its sleeping stage, and the runs' log."""

    def __init__(self, farm: farm_mod.Farm, work: Path) -> None:
        self.farm = farm
        self.project = copy_project(work / "project")
        self.torch = self.project / "dockerfiles" / "demo" / "torch.Dockerfile"
        self.original = self.torch.read_text()
        if ANCHOR not in self.original:
            raise SystemExit(f"bench/farm.py: {self.torch.relative_to(self.project)} has no line {ANCHOR.strip()!r} "
                             f"to put the sleep after")
        self.log = (work / "bench.log").open("w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
        env.update(farm.exports, PULUMI_CONFIG_PASSPHRASE="farm-bench")
        self.runner = Runner(self.project, env, lambda line: print(line, file=self.log, flush=True))
        self.pulumi, self.buildx, self.rocm_bake = tools(ROOT)
        self.runs = 0

    def builders(self, stacks: tuple[str, ...], hosts: tuple[str, ...]) -> str:
        return ",".join(f"{stack}={self.farm.layout.buildx_name(host)}" for stack, host in zip(stacks, hosts))

    def compile_for(self, seconds: float) -> None:
        """A stage line of this run's own (so both arches rebuild torch) that waits ``seconds``."""
        self.runs += 1
        step = f'RUN echo "bench run {self.runs}: {seconds:g} s of remote compile" && sleep {seconds:g}\n'
        self.torch.write_text(self.original.replace(ANCHOR, ANCHOR + step))

    def up(self, stacks: tuple[str, ...], hosts: tuple[str, ...], changes: bool | None) -> float:
        """Wall seconds of one ``rocm-bake arches up``; each stack must end ok, on its builder, having changed
        something (``changes``), nothing, or either (None)."""
        placed = self.builders(stacks, hosts)
        began = time.monotonic()
        output = self.runner.run([self.rocm_bake, "arches", "up", "--stacks", ",".join(stacks)],
                                 f"rocm-bake arches up ({placed})", {"ROCM_BAKE_STACK_BUILDERS": placed})
        took = time.monotonic() - began
        rows = table_rows(output)
        for stack, host in zip(stacks, hosts):
            row = rows.get(stack)
            want = self.farm.layout.buildx_name(host)
            if row is None or row.builder != want or row.result != "ok" or (
                    changes is not None and ((row.changed or 0) > 0) != changes):
                raise SystemExit(f"bench/farm.py: {stack} should have run ok on {want} with "
                                 f"{ {True: 'changes', False: 'no change', None: 'or without changes'}[changes]}: {row}")
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sleep", type=float, default=30, help="seconds of stand-in remote compile per arch")
    parser.add_argument("--pairs", type=int, default=3, help="measured pairs, two builders / one builder")
    parser.add_argument("--no-change-pairs", type=int, default=3, help="measured pairs of the no-change ups")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/farm.py: a farm needs root (ip netns, veths, a bridge)")
    reset(BENCH)
    os.environ.pop("BUILDX_CONFIG", None)  # the temp checkout's own buildx config, never this checkout's
    work = Path(tempfile.mkdtemp(prefix="rocm-bake-farm-bench-"))
    try:
        checkout = work / "checkout"
        checkout.mkdir()
        farm = farm_mod.up(checkout, lambda _: None)
        try:
            run(Bench(farm, work), args)
        finally:
            farm_mod.down(checkout, lambda _: None)
    except RocmBakeError as exc:
        raise SystemExit(f"bench/farm.py: {exc} (the runs' output: {work / 'bench.log'})") from None
    shutil.rmtree(work)


def run(bench: Bench, args: argparse.Namespace) -> None:
    two, one = BUILDERS, (BUILDERS[0], BUILDERS[0])
    layout = bench.farm.layout
    bench.runner.run([sys.executable, str(ROOT / "dockerfiles" / "demo" / "base.py"), "--registry",
                      layout.endpoint("registry"), "--builder", layout.buildx_name(BUILDERS[0]), "--buildx",
                      bench.buildx], "the demo base push")
    ensure_stacks(bench.runner, bench.pulumi, DEMO_STACKS)
    for hosts in (two, one):  # warm: each builder holds every stage below the sleeping one, for both arches
        bench.compile_for(0)
        bench.up(DEMO_STACKS, hosts, changes=True)
    spread, shared = [], []
    for _ in range(args.pairs):
        bench.compile_for(args.sleep)
        spread.append(bench.up(DEMO_STACKS, two, changes=True))
        bench.compile_for(args.sleep)
        shared.append(bench.up(DEMO_STACKS, one, changes=True))
        print(f"arches up, rebuild with {args.sleep:g} s of compile per arch: two builders {spread[-1]:.1f} s, "
              f"one builder {shared[-1]:.1f} s", flush=True)
    a, b = statistics.median(spread), statistics.median(shared)
    ratio = a / b
    record(BENCH, "two builders vs one", ratio=ratio, goal="<= 0.6", met=ratio <= 0.6,
           subject=f"`rocm-bake arches up --stacks demo-gfx950,demo-gfx1201`, each on a farm builder of its own "
                   f"({a:.1f} s, median of {args.pairs})",
           baseline=f"the same command with both stacks on builder-1, one after another ({b:.1f} s)",
           note=f"both rebuild torch and its dependents; that stage waits {args.sleep:g} s per arch for remote "
                f"compile; every run from the same cache state; runs {', '.join(f'{x:.0f}' for x in spread)} s vs "
                f"{', '.join(f'{x:.0f}' for x in shared)} s; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    bench.up(DEMO_STACKS, two, changes=None)  # back on two builders (the last run moved demo-gfx1201)
    both, alone = [], []
    for _ in range(args.no_change_pairs):
        both.append(bench.up(DEMO_STACKS, two, changes=False))
        alone.append(bench.up(DEMO_STACKS[:1], two, changes=False))
    a, b = statistics.median(both), statistics.median(alone)
    ratio = a / b
    print(f"no-change arches up: both stacks {a:.1f} s, demo-gfx950 alone {b:.1f} s", flush=True)
    record(BENCH, "no-change up, both stacks vs one", ratio=ratio, goal="<= 1.5 (one after another: ~2)",
           met=ratio <= 1.5,
           subject=f"no-change `rocm-bake arches up` of both demo stacks on two builders ({a:.1f} s, median of "
                   f"{args.no_change_pairs})",
           baseline=f"no-change `rocm-bake arches up --stacks demo-gfx950` ({b:.1f} s)",
           note=f"runs {', '.join(f'{x:.1f}' for x in both)} s vs {', '.join(f'{x:.1f}' for x in alone)} s")


if __name__ == "__main__":
    main()

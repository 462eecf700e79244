#!/usr/bin/env python3
"""Bench: CLI start-up, against the interpreter's own start-up and against the old way of planning.

Rows (each subject and baseline run as subprocesses, interleaved, in this run):

* ``--version``: ``rocm-bake --version`` (the installed console script) against
  ``python -c pass`` with the same interpreter: what the CLI adds to start-up
  at all. Goal: <= 3x. Medians of many runs, so a busy machine's outliers
  do not decide it.
* ``arch show``: ``rocm-bake arch show gfx950`` against the same baseline,
  a command that really works (pydantic, the fleet manifest). Reported, no goal.
* ``plan x4``: ``rocm-bake plan gfx950 gfx1201 gfx1151 gfx1250`` (one process,
  Pulumi's SDK imported once) against four separate ``rocm-bake plan STACK``
  calls, the only way before. Goal: the four stacks in < 2 s total (the
  ratio is reported beside it).

Run: ``python bench/cli.py [RUNS]``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results import record, reset  # noqa: E402

BENCH = "cli"
ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
#: The console script pip installed next to this interpreter: what a user runs.
ROCM_BAKE = str(Path(PYTHON).with_name("rocm-bake"))
STACKS = ["gfx950", "gfx1201", "gfx1151", "gfx1250"]


def wall(argv: list[str]) -> float:
    """Seconds for one run of ``argv``, which must succeed (a failing subject measures nothing)."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench/cli.py: {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return elapsed


def interleaved(subject: list[list[str]], baseline: list[list[str]], runs: int) -> tuple[float, float]:
    """Median seconds of subject and baseline, run alternately so both see the same machine load.

    Each side is a list of commands whose times add up to one sample (four
    ``plan`` calls are one baseline sample).
    """
    for argv in subject + baseline:  # warm the page cache and .pyc files; not timed
        wall(argv)
    subject_times, baseline_times = [], []
    for _ in range(runs):
        subject_times.append(sum(wall(argv) for argv in subject))
        baseline_times.append(sum(wall(argv) for argv in baseline))
    return statistics.median(subject_times), statistics.median(baseline_times)


def main(runs: int) -> None:
    if not Path(ROCM_BAKE).exists():
        raise SystemExit(f"bench/cli.py: {ROCM_BAKE} not found: install the project (make setup)")
    reset(BENCH)
    python_pass = [[PYTHON, "-c", "pass"]]

    version, base = interleaved([[ROCM_BAKE, "--version"]], python_pass, runs)
    ratio = version / base
    print(f"rocm-bake --version {version * 1000:.1f} ms, python -c pass {base * 1000:.1f} ms: {ratio:.2f}x")
    record(BENCH, "--version", subject=f"`rocm-bake --version` ({version * 1000:.0f} ms, median of {runs})",
           baseline=f"`python -c pass`, same interpreter ({base * 1000:.0f} ms)", ratio=ratio,
           goal="<= 3x", met=ratio <= 3.0)

    show, base = interleaved([[ROCM_BAKE, "arch", "show", "gfx950"]], python_pass, runs)
    ratio = show / base
    print(f"rocm-bake arch show gfx950 {show * 1000:.1f} ms, python -c pass {base * 1000:.1f} ms: {ratio:.2f}x")
    record(BENCH, "arch show", subject=f"`rocm-bake arch show gfx950` ({show * 1000:.0f} ms, median of {runs})",
           baseline=f"`python -c pass` ({base * 1000:.0f} ms)", ratio=ratio, goal="(reported)", met=None,
           note="imports pydantic and reads the fleet manifest: the cost of a command that works")

    plan_runs = max(3, runs // 5)
    together, separate = interleaved([[ROCM_BAKE, "plan", *STACKS]],
                                      [[ROCM_BAKE, "plan", stack] for stack in STACKS], plan_runs)
    ratio = together / separate
    print(f"rocm-bake plan x4 in one process {together:.2f} s, four separate plans {separate:.2f} s: {ratio:.2f}x")
    record(BENCH, "plan x4", subject=f"`rocm-bake plan {' '.join(STACKS)}` ({together:.2f} s, median of {plan_runs})",
           baseline=f"four separate `rocm-bake plan STACK` ({separate:.2f} s)", ratio=ratio,
           goal="< 2 s total", met=together < 2.0,
           note="Pulumi's SDK is imported once; each further stack costs its declaration only")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)

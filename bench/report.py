#!/usr/bin/env python3
"""Write ``bench/RESULTS.md`` from the rows the benchmarks recorded in this run."""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path

from results import RESULTS_DIR

#: Where the table goes; the bench smoke test writes a throwaway one instead.
OUT = Path(os.environ.get("ROCM_BAKE_BENCH_REPORT", Path(__file__).resolve().parent / "RESULTS.md"))


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def main() -> None:
    lines = [
        "# Benchmark results",
        "",
        f"Written by `make bench` on {datetime.date.today().isoformat()} ({machine()}).",
        "Each ratio is subject ÷ baseline, both run side by side in the same run.",
        "",
        "| benchmark | row | subject | baseline | ratio | goal | met | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(RESULTS_DIR.glob("*.json")):
        for r in json.loads(path.read_text()):
            met = {True: "yes", False: "**no**", None: "—"}[r["met"]]
            lines.append(
                f"| {path.stem} | {r['row']} | {r['subject']} | {r['baseline']} | {r['ratio']:.4g} | {r['goal']} | {met} | {r['note']} |"
            )
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""Shared result rows for ``make bench``: each benchmark records its ratios here.

Every row states what it compares, so no ratio flatters us by picking a slow
baseline: the subject, the baseline (run side by side in the same run), the
measured ratio, the goal, and whether it was met or why not.
``bench/report.py`` turns the rows of one ``make bench`` into ``bench/RESULTS.md``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RESULTS_DIR = Path(os.environ.get("ROCM_BAKE_BENCH_RESULTS", Path(__file__).resolve().parent / ".results"))


def record(
    bench: str,
    row: str,
    *,
    subject: str,
    baseline: str,
    ratio: float,
    goal: str,
    met: bool | None,
    note: str = "",
) -> None:
    """Append one row for ``bench`` (one JSON file per benchmark script, rewritten per run)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{bench}.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    rows = [r for r in rows if r["row"] != row]
    rows.append(
        {"row": row, "subject": subject, "baseline": baseline, "ratio": ratio, "goal": goal, "met": met, "note": note}
    )
    path.write_text(json.dumps(rows, indent=1))


def reset(bench: str) -> None:
    """Drop ``bench``'s rows from an earlier run, so the table never mixes runs."""
    (RESULTS_DIR / f"{bench}.json").unlink(missing_ok=True)

"""Every benchmark still runs, at a tiny size, the way ``make bench`` runs it.

``make bench`` is run by hand, so a bench that calls the core with stale
arguments (a bare ``str`` where the core takes an ``ArchSet``) would go
unnoticed until the next measurement. Here each script runs as a subprocess with sizes small
enough for ``make test``, its rows go to a temp results dir, and the rows it
must record are named: a bench that stops recording one fails, by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import services

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
#: Not benchmarks: the shared row writer and the table writer (the Makefile's BENCHES filter-out).
HELPERS = {"results.py", "report.py"}
#: Per bench: the tiny arguments, and rows it must record (each bench checks its own answers and exits non-zero).
QUICK: dict[str, tuple[list[str], set[str]]] = {
    "cli.py": (["2"], {"--version", "arch show", "plan x4"}),
    "extract.py": (["--wheel-mb", "2", "--other-mb", "2", "--runs", "1"],
                   {"bytes fetched / wheel bytes", "re-fetch of the same digest", "selective fetch vs skopeo copy"}),
    "index_build.py": (["--count", "2", "--size-mb", "1", "--small-count", "5", "--runs", "1"],
                       {"cold build vs the same work, direct", "cold build vs openssl dgst -sha256", "cold build vs simple503", "warm rebuild through the CLI",
                        "resolve-only bytes, pip --dry-run", "files written, one changed wheel among"}),
    "publish_noop.py": (["1"], {"no-op republish"}),
    "scan.py": (["--size-mb", "8", "--bundles", "10", "--repeat", "1", "--cli-runs", "1"],
                {"deflated member", "stored member", "CLI, deflated member, wall"}),
}


#: Benches too long for ``make test`` even at their smallest, each with why; ``make bench`` runs them.
#: bench/farm.py brings up a farm and runs at least seven ``arches up`` of the demo stacks: about 5 min at
#: ``--sleep 5 --pairs 1 --no-change-pairs 1``.
NOT_IN_MAKE_TEST = {"farm.py": "a farm and seven or more demo-stack ups: minutes"}


def test_every_bench_has_quick_arguments() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - HELPERS - set(NOT_IN_MAKE_TEST)
    assert scripts == set(QUICK), f"give each bench quick arguments here: {sorted(scripts ^ set(QUICK))}"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-results")


def run(script: str, args: list[str], results: Path, report: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROCM_BAKE_BENCH_RESULTS": str(results), "PIP_CONFIG_FILE": "/dev/null"}
    if report is not None:
        env["ROCM_BAKE_BENCH_REPORT"] = str(report)
    return subprocess.run([sys.executable, str(BENCH / script), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


#: Benches that start a service in their own process: extract.py runs a docker-registry and skopeo.
STARTS_SERVICES = {"extract.py": "docker-registry (bench/extract.py)"}


@pytest.mark.parametrize("script", [pytest.param(s, marks=pytest.mark.services) if s in STARTS_SERVICES else s
                                    for s in sorted(QUICK)])
def test_bench_runs_and_records_its_rows(script: str, results: Path) -> None:
    if script in STARTS_SERVICES:
        services.require(STARTS_SERVICES[script])
    args, rows = QUICK[script]
    done = run(script, args, results)
    assert done.returncode == 0, f"bench/{script} {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    recorded = {r["row"]: r for path in results.glob("*.json") for r in json.loads(path.read_text())}
    missing = {row for row in rows if not any(name.startswith(row) for name in recorded)}
    assert not missing, f"bench/{script} did not record {sorted(missing)}; it recorded {sorted(recorded)}"
    for name in rows:
        row = next(r for n, r in recorded.items() if n.startswith(name))
        assert isinstance(row["ratio"], (int, float)) and row["ratio"] >= 0, f"bench/{script}: {name}: {row}"


def test_report_writes_every_recorded_row(results: Path, tmp_path: Path) -> None:
    rows = [r["row"] for path in sorted(results.glob("*.json")) for r in json.loads(path.read_text())]
    assert rows, "the bench tests above recorded nothing"
    out = tmp_path / "RESULTS.md"
    done = run("report.py", [], results, report=out)
    assert done.returncode == 0, done.stderr
    table = [line for line in out.read_text().splitlines() if line.startswith("| ") and not line.startswith("| benchmark")]
    assert [line.split(" | ")[1] for line in table] == rows

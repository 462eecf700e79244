"""``rocm-bake arches preview|up``: stacks on different builders at once, a shared builder's in turn.

A stand-in ``pulumi`` (a script, through $ROCM_BAKE_PULUMI) records when each
stack's pass starts and ends, prints what the engine prints (lines, a
``Resources:`` summary, an ``error:`` line), and on SIGINT removes the lock
file it took, as the engine cancels an update and releases the stack's lock. With
``--expect-no-changes`` the $DRIFT_STACK ends as the engine does when a preview proposes changes.
Builders come from $ROCM_BAKE_STACK_BUILDERS, so no stack file is touched.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocm_bake.checkout import local_defaults, stack_builders
from rocm_bake.commands.arches import Outcome, Pass, by_builder, proposed_changes, resources_changed, table
from rocm_bake.errors import RocmBakeError

ROOT = Path(__file__).resolve().parent.parent

STAND_IN = '''#!{python}
import os, signal, sys, time
from pathlib import Path
stack = sys.argv[sys.argv.index("--stack") + 1]
work = Path(os.environ["WORK"])
def record(what):
    with open(work / "events.log", "a") as log:
        log.write(f"{{what}} {{stack}} {{time.monotonic():.3f}}\\n")
lock = work / f"{{stack}}.lock"
def cancel(signum, frame):
    record("sigint")
    lock.unlink()
    print("error: update canceled", flush=True)
    sys.exit(255)
signal.signal(signal.SIGINT, cancel)
lock.write_text(str(os.getpid()))
(work / f"{{stack}}.argv").write_text("\\n".join(sys.argv[1:]))
record("start")
print(f"Updating ({{stack}})", flush=True)
time.sleep(float(os.environ.get("SLEEP", "0.6")))
lock.unlink()
record("end")
if stack == os.environ.get("FAIL_STACK"):
    print(f"  rocm-bake:images:TargetImage torch-x **failed** error: boom on {{stack}}")
    sys.exit(7)
if stack == os.environ.get("DRIFT_STACK") and "--expect-no-changes" in sys.argv:
    print("Resources:\\n    ~ 1 to update\\n    +-2 to replace\\n    4 unchanged\\n")
    print("error: no changes were expected for preview but changes were proposed")
    sys.exit(7)
print("Resources:\\n    + 2 created\\n    ~ 1 updated\\n    3 unchanged\\n\\nDuration: 1s")
'''


@pytest.fixture
def stand_in(tmp_path: Path) -> tuple[dict[str, str], Path]:
    script = tmp_path / "pulumi"
    script.write_text(STAND_IN.format(python=sys.executable))
    script.chmod(0o755)
    env = dict(os.environ, ROCM_BAKE_PULUMI=str(script), WORK=str(tmp_path), ROCM_BAKE_BUILDER="shared",
               ROCM_BAKE_STACK_BUILDERS="gfx950=builder-1,gfx1151=builder-1 gfx1201=builder-2")
    env.pop("ARCHES", None)
    return env, tmp_path


def arches(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocm_bake", "arches", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def intervals(work: Path) -> dict[str, tuple[float, float]]:
    events: dict[str, dict[str, float]] = {}
    for line in (work / "events.log").read_text().splitlines():
        what, stack, at = line.split()
        events.setdefault(stack, {})[what] = float(at)
    return {stack: (e["start"], e.get("end", e.get("sigint", 0.0))) for stack, e in events.items()}


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_stacks_on_different_builders_run_at_once_and_a_shared_builder_in_turn(stand_in):
    env, work = stand_in
    result = arches("up", "--arches", "gfx950 gfx1201 gfx1151 gfx1250", env=env)
    assert result.returncode == 0, result.stderr
    spans = intervals(work)
    assert set(spans) == {"gfx950", "gfx1201", "gfx1151", "gfx1250"}
    # builder-1 holds gfx950 then gfx1151, in that order, never both at once
    assert spans["gfx950"][1] <= spans["gfx1151"][0]
    # the three builders' first passes overlap: one job per distinct builder by default
    assert overlap(spans["gfx950"], spans["gfx1201"]) and overlap(spans["gfx950"], spans["gfx1250"])
    assert overlap(spans["gfx1201"], spans["gfx1250"])


def test_up_refreshes_as_make_up_does_and_preview_changes_nothing(stand_in):
    """A wiped registry or a deleted image is rebuilt only if the up reads them first: ``--refresh``."""
    env, work = stand_in
    assert arches("up", "--stacks", "gfx950", env=env).returncode == 0
    policy = str(ROOT / "policy")
    assert (work / "gfx950.argv").read_text().splitlines() == [
        "up", "--stack", "gfx950", "--non-interactive", "--policy-pack", policy, "--yes", "--refresh"]
    assert arches("preview", "--stacks", "gfx950", env=env).returncode == 0
    assert (work / "gfx950.argv").read_text().splitlines() == [
        "preview", "--stack", "gfx950", "--non-interactive", "--policy-pack", policy]


def test_jobs_caps_how_many_run_at_once(stand_in):
    env, work = stand_in
    result = arches("up", "--arches", "gfx950 gfx1201 gfx1250", "--jobs", "1", env=env)
    assert result.returncode == 0, result.stderr
    spans = sorted(intervals(work).items(), key=lambda item: item[1][0])
    assert [stack for stack, _ in spans] == ["gfx950", "gfx1201", "gfx1250"]
    assert all(a[1] <= b[0] for (_, a), (_, b) in zip(spans, spans[1:]))


def test_every_line_is_prefixed_by_its_stack_and_the_run_ends_with_one_table(stand_in):
    env, _ = stand_in
    env["FAIL_STACK"] = "gfx1201"
    result = arches("preview", "--stacks", "demo-gfx950,gfx1201", "--keep-going", env=env)
    assert result.returncode == 2
    assert result.stderr == "rocm-bake: error: pulumi preview failed for gfx1201\n"
    lines = result.stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("STACK ")))
    streamed, rows = lines[:head], lines[head:]
    assert streamed and all(line.startswith(("demo-gfx950 | ", "gfx1201     | ")) for line in streamed), streamed
    assert "demo-gfx950 | Updating (demo-gfx950)" in streamed and "gfx1201     | Updating (gfx1201)" in streamed
    assert "demo-gfx950 | pulumi preview --stack demo-gfx950 on builder shared" in streamed
    # the table: one header and one row per stack, nothing after it
    assert len(rows) == 3
    cells = [row.split() for row in rows]
    assert cells[0] == ["STACK", "BUILDER", "RESULT", "DURATION", "CHANGED", "DETAIL"]
    assert cells[1][:3] == ["demo-gfx950", "shared", "ok"] and cells[1][4:] == ["s", "3", "-"]
    assert cells[2][:4] == ["gfx1201", "builder-2", "failed", "(exit"]
    assert rows[2].endswith("  torch-x: boom on gfx1201"), rows[2]


def test_without_keep_going_a_failure_starts_nothing_more(stand_in):
    env, work = stand_in
    env["FAIL_STACK"] = "gfx950"
    result = arches("up", "--arches", "gfx950 gfx1151 gfx1201", env=env)
    assert result.returncode == 2
    assert result.stderr == "rocm-bake: error: pulumi up failed for gfx950; not run: gfx1151\n"
    # gfx1201 (builder-2) was already running beside gfx950 and finished; gfx1151 (builder-1, next) never began
    assert set(intervals(work)) == {"gfx950", "gfx1201"}
    assert [row.split()[2] for row in result.stdout.splitlines()[-3:]] == ["failed", "not", "ok"]
    kept = arches("up", "--arches", "gfx950 gfx1151 gfx1201", "--keep-going", env=dict(env, WORK=str(work)))
    assert "failed for gfx950\n" in kept.stderr and set(intervals(work)) == {"gfx950", "gfx1151", "gfx1201"}


def test_ctrl_c_gives_each_running_up_one_sigint_and_leaves_no_lock(stand_in):
    env, work = stand_in
    env["SLEEP"] = "30"
    proc = subprocess.Popen([sys.executable, "-m", "rocm_bake", "arches", "up", "--arches",
                             "gfx950 gfx1201 gfx1151"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not ((work / "gfx950.lock").exists() and (work / "gfx1201.lock").exists()):
        assert time.monotonic() < deadline and proc.poll() is None, "both passes should have started"
        time.sleep(0.05)
    time.sleep(0.3)  # the stand-ins have their handlers in place
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    events = [line.split()[:2] for line in (work / "events.log").read_text().splitlines()]
    assert sorted(stack for what, stack in events if what == "sigint") == ["gfx1201", "gfx950"]  # one each
    assert not any(what == "end" for what, _ in events)
    assert list(work.glob("*.lock")) == []
    assert "rocm-bake: interrupted: SIGINT sent to gfx1201, gfx950; waiting for them to stop" in err
    rows = {row.split()[0]: row.split()[2] for row in out.splitlines()[-3:]}
    assert rows == {"gfx950": "interrupted", "gfx1201": "interrupted", "gfx1151": "not"}
    assert "not run" in out.splitlines()[-1]


def closing_rows(stdout: str) -> dict[str, list[str]]:
    """The closing table's rows by stack: builder, result, duration, changed, detail."""
    lines = stdout.splitlines()
    head = max(i for i, line in enumerate(lines) if line.startswith("STACK "))
    return {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line) for line in lines[head + 1:])}


@pytest.mark.parametrize("action", ["up", "list"])
def test_expect_no_changes_is_for_preview_alone(stand_in, action):
    """``pulumi up --expect-no-changes`` makes the changes before it fails on them: no drift check."""
    env, work = stand_in
    result = arches(action, "--stacks", "gfx950", "--expect-no-changes", env=env)
    assert result.returncode == 2
    assert result.stderr == (f"rocm-bake: error: --expect-no-changes goes with `arches preview` only (`arches "
                             f"{action}` was given): `pulumi up --expect-no-changes` makes the changes before it "
                             f"fails on them\n")
    assert result.stdout == "" and not (work / "events.log").exists()


def test_a_drift_check_previews_every_stack_and_names_those_that_would_change(stand_in):
    env, work = stand_in
    env["DRIFT_STACK"] = "gfx950"
    # gfx1151 shares gfx950's builder and runs after it: a drift stops nothing, even without --keep-going
    result = arches("preview", "--stacks", "gfx950,gfx1151,gfx1201", "--expect-no-changes", env=env)
    assert result.returncode == 7, result.stderr
    assert result.stderr.splitlines()[-1] == "rocm-bake: error: changes proposed for gfx950 (expected none)"
    assert set(intervals(work)) == {"gfx950", "gfx1151", "gfx1201"}
    assert (work / "gfx1151.argv").read_text().splitlines()[-1] == "--expect-no-changes"
    table = closing_rows(result.stdout)
    assert {stack: (row[1], row[3], row[4]) for stack, row in table.items()} == {
        "gfx950": ("changes", "3", "1 to update, 2 to replace"), "gfx1151": ("ok", "3", "-"),
        "gfx1201": ("ok", "3", "-")}
    assert "gfx950  | pulumi preview proposes changes (expected none): 1 to update, 2 to replace" in result.stdout


def test_a_drift_check_keeps_a_failure_apart_from_a_drift(stand_in):
    """The stand-in's failure exits 7 too, as the engine does on drift: the engine's own line tells them apart."""
    env, _ = stand_in
    env.update(DRIFT_STACK="gfx950", FAIL_STACK="gfx1201")
    result = arches("preview", "--stacks", "gfx950,gfx1201", "--expect-no-changes", "--keep-going", env=env)
    assert result.returncode == 2
    assert result.stderr == ("rocm-bake: error: pulumi preview failed for gfx1201; "
                             "changes proposed for gfx950 (expected none)\n")
    table = closing_rows(result.stdout)
    assert [table["gfx950"][1], table["gfx950"][4]] == ["changes", "1 to update, 2 to replace"]
    assert [table["gfx1201"][1], table["gfx1201"][4]] == ["failed (exit 7)", "torch-x: boom on gfx1201"]


def test_proposed_changes_reads_the_engine_s_own_line_and_summary():
    drift = ("Resources:\n    + 1 to create\n    ~ 2 to update\n    3 unchanged\n\n"
             "error: no changes were expected for preview but changes were proposed\n")
    assert proposed_changes(drift) == "1 to create, 2 to update"
    assert proposed_changes("error: no changes were expected but changes were proposed\n") == (
        "changes (no summary printed)")
    policy = "Policies:\n    - [mandatory]  own-arches-only  (x: y)\nResources:\n    ~ 1 to update\n"
    assert proposed_changes(policy) is None and proposed_changes("error: preview failed\n") is None


def test_grouping_keeps_order_within_and_across_builders():
    passes = [Pass("a", "a", "x"), Pass("b", "b", "y"), Pass("c", "c", "x"), Pass("d", "d", "z")]
    assert by_builder(passes) == [[passes[0], passes[2]], [passes[1]], [passes[3]]]


def test_resources_changed_reads_the_last_summary():
    up = "Resources:\n    + 1 created\n    +-2 replaced\n    - 1 deleted\n    7 unchanged\n\nDuration: 3s\n"
    preview = "Resources:\n    ~ 4 to update\n    2 unchanged\n"
    assert resources_changed(up) == 4 and resources_changed(preview) == 4
    assert resources_changed("Resources:\n    + 4 to create\n    8 unchanged\n    2 errored\n") == 4
    assert resources_changed("Resources:\n    9 unchanged\n") == 0 and resources_changed("error: x\n") is None


def test_table_columns():
    rows = table([Outcome(Pass("demo-gfx950", "gfx950", "b1"), "ok", 12.34, 5),
                  Outcome(Pass("gfx1201", "gfx1201", "b2"))]).splitlines()
    assert rows == ["STACK        BUILDER  RESULT   DURATION  CHANGED  DETAIL",
                    "demo-gfx950  b1       ok       12.3 s    5        -",
                    "gfx1201      b2       not run  -         -        -"]


def test_stack_builders_from_the_environment_win_over_the_one_builder_and_lose_to_the_stack_file(tmp_path):
    env = {"ROCM_BAKE_BUILDER": "shared", "ROCM_BAKE_STACK_BUILDERS": "demo-gfx950=builder-1, demo-gfx1201=builder-2"}
    assert stack_builders(env) == {"demo-gfx950": "builder-1", "demo-gfx1201": "builder-2"}
    assert local_defaults(tmp_path, env, "demo-gfx1201")["rocm-bake:builder"] == "builder-2"
    assert local_defaults(tmp_path, env, "gfx950")["rocm-bake:builder"] == "shared"
    from rocm_bake.checkout import stack_builder
    assert stack_builder("demo-gfx950", {"rocm-bake:builder": "named"}, tmp_path, env) == "named"
    assert stack_builder("demo-gfx950", {}, tmp_path, env) == "builder-1"
    with pytest.raises(RocmBakeError, match=r"^\$ROCM_BAKE_STACK_BUILDERS: 'demo-gfx950' is not STACK=BUILDER"):
        stack_builders({"ROCM_BAKE_STACK_BUILDERS": "demo-gfx950"})

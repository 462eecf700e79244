"""``rocm-bake arches list|preview|up``: fan one operation out over ARCHES (or named stacks).

Each arch is a full pass over every target, so the list multiplies build
time. Passes that name the same buildx builder contend for it, so they run
one after another; passes on different builders share nothing but the
backend, so they run at the same time (``--jobs`` caps how many). That
grouping is all: BuildKit schedules within a builder, the backend locks each
stack, and we never queue beyond it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from rocm_bake.archset import Arch, ArchError
from rocm_bake.cli import arch_argument
from rocm_bake.errors import RocmBakeError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "arches", help="run list/preview/up over every arch stack: different builders at once, a shared one in turn")
    parser.add_argument("action", choices=["list", "preview", "up"])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--arches", default=None, type=arch_argument(parse_arches),
                       help="space-separated arch list (default: $ARCHES or the manifest)")
    which.add_argument("--stacks", default=None, type=parse_stacks,
                       help="comma-separated stack names instead, e.g. demo-gfx950,demo-gfx1201")
    parser.add_argument("--target", action="append", default=[], help="narrow to these build targets")
    parser.add_argument("--jobs", type=positive, default=None,
                        help="at most N stacks at once (default: one per distinct builder)")
    parser.add_argument("--keep-going", action="store_true", help="go on to the next stacks after a failure")
    parser.add_argument("--expect-no-changes", action="store_true",
                        help=f"preview only: a drift check; every stack is previewed, and the run exits "
                             f"{CHANGES_EXIT} naming each stack whose preview proposes changes")
    parser.set_defaults(func=run)


def refuse_expect_no_changes(action: str, expect_no_changes: bool) -> None:
    """``--expect-no-changes`` is a drift check, so ``preview`` alone takes it: ``pulumi up`` with it applies
    the changes before it fails on them, and ``list`` runs nothing."""
    if expect_no_changes and action != "preview":
        raise RocmBakeError(f"--expect-no-changes goes with `arches preview` only (`arches {action}` was given): "
                            f"`pulumi up --expect-no-changes` makes the changes before it fails on them")


def parse_arches(value: str) -> list[Arch]:
    """An ARCHES value (``--arches`` or ``$ARCHES``): space-separated arch names, each parsed here, once."""
    return [Arch(arch) for arch in value.split()]


def parse_stacks(value: str) -> list[str]:
    """``--stacks``: comma-separated Pulumi stack names (each a name ``pulumi stack init`` accepts)."""
    from rocm_bake.config import STACK_NAME

    names = [name for name in value.replace(",", " ").split() if name]
    bad = [name for name in names if not STACK_NAME.match(name)]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"not a stack name: {bad[0]!r}" if bad else "no stack named")
    return list(dict.fromkeys(names))


def positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}")
    return int(value)


def resolve_arches(arches: list[Arch] | None) -> list[Arch]:
    """ARCHES: the flag, else $ARCHES, else manifests' default_arches; each must have a stack."""
    from rocm_bake.config import stack_file
    from rocm_bake.manifests import load_targets

    if arches is None:
        env = os.environ.get("ARCHES")
        try:
            arches = parse_arches(env) if env is not None else list(load_targets().default_arches)
        except ArchError as exc:
            raise RocmBakeError(f"$ARCHES: {exc}") from None
    if not arches:
        raise RocmBakeError("ARCHES is empty: give at least one arch, e.g. --arches gfx950")
    for arch in arches:
        if not stack_file(arch).exists():
            raise RocmBakeError(f"arch {arch}: no stack file {stack_file(arch)}")
    return arches


PROJECT = "rocm-bake"
#: The arch rules (a pulumi-policy pack): every preview and up is judged by them, as `make up` does.
POLICY_PACK = Path(__file__).resolve().parents[2] / "policy"
#: What every up adds, as `make up` does: ``--refresh`` reads the registry and the release first, so a wiped
#: registry or a deleted image or release is rebuilt rather than trusted from the state.
UP_FLAGS = ("--yes", "--refresh")
#: The type chain of a target's image: the TargetImage component and the docker-build Image inside it.
IMAGE_TYPES = ("rocm-bake:images:TargetImage", "rocm-bake:images:TargetImage$docker-build:index:Image")


@dataclass(frozen=True)
class Pass:
    """One stack's pass: the stack, the arch part of its images' names, and the builder it builds on."""

    stack: str
    label: str
    builder: str


def stack_passes(stacks: list[str]) -> list[Pass]:
    """Each stack's arch label and builder, read from its stack file as the program reads them."""
    from rocm_bake.archset import ArchSet
    from rocm_bake.checkout import stack_builder
    from rocm_bake.config import STACKS_DIR, read_stack_file

    passes = []
    for stack in stacks:
        config = read_stack_file(stack)
        arch = config.get("rocm-bake:pytorchRocmArch") or stack
        try:
            label = ArchSet(str(arch)).tag_suffix
        except ArchError as exc:
            raise RocmBakeError(f"stack {stack}: rocm-bake:pytorchRocmArch: {exc}") from None
        passes.append(Pass(stack, label, stack_builder(stack, config, STACKS_DIR.parent)))
    return passes


def by_builder(passes: list[Pass]) -> list[list[Pass]]:
    """Passes grouped by builder, each group in the given order, groups in order of first appearance."""
    groups: dict[str, list[Pass]] = {}
    for one in passes:
        groups.setdefault(one.builder, []).append(one)
    return list(groups.values())


def target_urns(stack: str, label: str, targets: list[str]) -> list[str]:
    """The URNs of ``targets``' images in ``stack``, for the engine's own ``--target``."""
    return [f"urn:pulumi:{stack}::{PROJECT}::{kind}::{target}-{label}" for target in targets for kind in IMAGE_TYPES]


def pulumi_cli() -> str:
    """$ROCM_BAKE_PULUMI, else the project's CLI (.tools/bin/pulumi, from `make setup`), else pulumi on PATH."""
    chosen = os.environ.get("ROCM_BAKE_PULUMI")
    ours = Path(__file__).resolve().parents[2] / ".tools" / "bin" / "pulumi"
    found = (chosen if chosen and Path(chosen).is_file() else None) if chosen is not None else (
        str(ours) if ours.exists() else shutil.which("pulumi"))
    if found is None:
        raise RocmBakeError(
            "pulumi CLI not found: run `make setup` (it builds .tools/bin/pulumi from pinned Go modules); "
            "`rocm-bake plan STACK` shows a stack's graph without it"
        )
    return found


def pulumi_command(action: str, one: Pass, targets: list[str] | None = None, cli: str = "pulumi",
                   expect_no_changes: bool = False) -> list[str]:
    """One pass. Narrowing uses the engine's ``--target URN --target-dependents``, never undeclaring
    resources: an undeclared resource is one the engine deletes (and the index would shrink)."""
    cmd = [cli, action, "--stack", one.stack, "--non-interactive", "--policy-pack", str(POLICY_PACK)]
    if action == "up":
        cmd += UP_FLAGS
    if expect_no_changes:
        cmd.append("--expect-no-changes")
    for urn in target_urns(one.stack, one.label, targets or []):
        cmd += ["--target", urn]
    if targets:
        cmd.append("--target-dependents")
    return cmd


#: A line of the engine's ``Resources:`` summary: ``+ 2 created``, ``~ 1 to update``, ``5 unchanged``.
SUMMARY_LINE = re.compile(r"^\s*[-+~<>]*\s*(?P<count>\d+) (?P<what>[a-z -]+?)\s*$")
#: The summary words that are changes (``unchanged`` and ``errored`` are not).
CHANGE_WORDS = re.compile(r"create|update|replace|delete|import")


def summary_changes(output: str) -> list[tuple[int, str]] | None:
    """The change lines of the engine's last ``Resources:`` summary as (count, words), e.g. (1, "to update");
    None when it printed no summary."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "Resources:"]
    if not starts:
        return None
    changes = []
    for line in lines[starts[-1] + 1:]:
        match = SUMMARY_LINE.match(line)
        if match is None:
            break
        if CHANGE_WORDS.search(match["what"]):
            changes.append((int(match["count"]), match["what"]))
    return changes


def resources_changed(output: str) -> int | None:
    """How many resources the engine's last ``Resources:`` summary created, updated, replaced or deleted
    (or would, in a preview); None when it printed no summary."""
    changes = summary_changes(output)
    return None if changes is None else sum(count for count, _ in changes)


#: The engine's own error when ``--expect-no-changes`` found changes, and nothing else went wrong
#: (a failed preview or a policy violation ends the run with its own error first).
NO_CHANGES_EXPECTED = re.compile(r"\berror: no changes were expected(?: for \w+)? but changes were proposed")
#: The exit status of ``arches preview --expect-no-changes`` when some stack would change and none failed: the
#: engine's own for the same finding (2 stays a failure, 1 an uncaught bug, 130 an interrupt).
CHANGES_EXIT = 7


def proposed_changes(output: str) -> str | None:
    """When a ``--expect-no-changes`` run failed on its changes alone, what they are from the engine's summary
    (``1 to update, 2 to replace``); None when it failed for another reason."""
    if NO_CHANGES_EXPECTED.search(output) is None:
        return None
    changes = summary_changes(output)
    return ", ".join(f"{count} {what}" for count, what in changes) if changes else "changes (no summary printed)"


@dataclass
class Outcome:
    """What became of one pass."""

    one: Pass
    result: str = "not run"
    seconds: float | None = None
    changed: int | None = None
    detail: str = ""


@dataclass
class Fanout:
    """The passes running now, and whether to start more: shared by the group threads and the main thread."""

    action: str
    targets: list[str]
    cli: str
    keep_going: bool
    width: int
    expect_no_changes: bool = False
    out: TextIO = field(default_factory=lambda: sys.stdout)
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: dict[str, subprocess.Popen] = field(default_factory=dict)
    stopped: bool = False
    interrupted: bool = False

    def say(self, stack: str, line: str) -> None:
        with self.lock:
            self.out.write(f"{stack:<{self.width}} | {line.rstrip(chr(10))}\n")
            self.out.flush()

    def start(self, one: Pass) -> subprocess.Popen | None:
        """Start ``one``'s engine in a process group of its own (so a terminal's Ctrl-C reaches us alone and we
        hand each engine one SIGINT); None once nothing more may start."""
        with self.lock:
            if self.stopped:
                return None
            argv = pulumi_command(self.action, one, self.targets, self.cli, self.expect_no_changes)
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                    bufsize=1, start_new_session=True)
            self.running[one.stack] = proc
            return proc

    def run_group(self, group: list[Pass]) -> list[Outcome]:
        """A builder's passes, one after another."""
        from rocm_bake.engine_run import failure_cause

        outcomes = [Outcome(one) for one in group]
        for outcome in outcomes:
            one = outcome.one
            began = time.monotonic()
            proc = self.start(one)
            if proc is None:
                continue
            self.say(one.stack, f"pulumi {self.action} --stack {one.stack} on builder {one.builder}")
            assert proc.stdout is not None
            chunks = []
            for line in proc.stdout:
                chunks.append(line)
                self.say(one.stack, line)
            rc = proc.wait()
            output = "".join(chunks)
            drift = proposed_changes(output) if rc != 0 and self.expect_no_changes else None
            with self.lock:
                del self.running[one.stack]
                if rc != 0 and drift is None and not self.keep_going:
                    self.stopped = True
            outcome.seconds = time.monotonic() - began
            outcome.changed = resources_changed(output)
            if rc == 0:
                outcome.result = "ok"
            elif self.interrupted:
                outcome.result = "interrupted"
            elif drift is not None:
                outcome.result, outcome.detail = "changes", drift
                self.say(one.stack, f"pulumi {self.action} proposes changes (expected none): {drift}")
            else:
                outcome.result = f"failed (exit {rc})"
                outcome.detail = failure_cause(rc, output, one.builder)
                self.say(one.stack, f"pulumi {self.action} exited {rc}: {outcome.detail}")
        return outcomes

    def interrupt(self) -> list[str]:
        """Ctrl-C: start nothing more, and give every running engine's process group one SIGINT (as a terminal
        would), so each cancels its update and releases its stack's lock."""
        with self.lock:
            self.stopped = self.interrupted = True
            for proc in self.running.values():
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
            return sorted(self.running)


def fan_out(fanout: Fanout, groups: list[list[Pass]], jobs: int) -> list[Outcome]:
    """Run each group in a thread of its own, at most ``jobs`` at once; the main thread waits, taking Ctrl-C.

    Ctrl-C only sets a flag that the waiting loop reads: a KeyboardInterrupt raised inside
    ``concurrent.futures.wait`` can leave a future's lock held, and the workers would then hang on it.
    """
    asked_to_stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: asked_to_stop.set())
    try:
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="arches")
        futures: list[Future[list[Outcome]]] = [pool.submit(fanout.run_group, group) for group in groups]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            if asked_to_stop.is_set() and not fanout.interrupted:
                signalled = fanout.interrupt()
                print(f"rocm-bake: interrupted: SIGINT sent to {', '.join(signalled) or 'no running stack'}; "
                      f"waiting for them to stop", file=sys.stderr, flush=True)
        pool.shutdown()
    finally:
        signal.signal(signal.SIGINT, previous)
    return [outcome for future in futures for outcome in future.result()]


def table(outcomes: list[Outcome]) -> str:
    """One row per stack: stack, builder, result, duration, resources changed, and the detail: a failure's
    first error line, or the changes a ``--expect-no-changes`` preview proposes."""
    rows = [("STACK", "BUILDER", "RESULT", "DURATION", "CHANGED", "DETAIL")]
    for o in outcomes:
        rows.append((o.one.stack, o.one.builder, o.result, "-" if o.seconds is None else f"{o.seconds:.1f} s",
                     "-" if o.changed is None else str(o.changed), o.detail or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[5] for row in rows)


def run(args: argparse.Namespace) -> int:
    from rocm_bake.manifests import load_targets

    refuse_expect_no_changes(args.action, args.expect_no_changes)
    if args.stacks is not None:
        from rocm_bake.config import stack_file

        for stack in args.stacks:
            if not stack_file(stack).exists():
                raise RocmBakeError(f"stack {stack}: no stack file {stack_file(stack)}")
        stacks = args.stacks
    else:
        stacks = [str(arch) for arch in resolve_arches(args.arches)]
    for name in args.target:
        load_targets().target(name)
    if args.action == "list":
        for stack in stacks:
            print(stack)
        return 0
    cli = pulumi_cli()
    passes = stack_passes(stacks)
    groups = by_builder(passes)
    jobs = min(args.jobs or len(groups), len(groups))
    fanout = Fanout(args.action, args.target, cli, args.keep_going, max(len(s) for s in stacks),
                    args.expect_no_changes)
    outcomes = fan_out(fanout, groups, jobs)
    order = {one.stack: i for i, one in enumerate(passes)}
    outcomes.sort(key=lambda o: order[o.one.stack])
    print(table(outcomes), flush=True)
    if fanout.interrupted:
        print(f"rocm-bake: arches {args.action} interrupted", file=sys.stderr)
        return 130
    failed = [o.one.stack for o in outcomes if o.result.startswith("failed")]
    changed = [o.one.stack for o in outcomes if o.result == "changes"]
    drift = f"changes proposed for {', '.join(changed)} (expected none)" if changed else ""
    if failed:
        skipped = [o.one.stack for o in outcomes if o.result == "not run"]
        note = (f"; {drift}" if drift else "") + (f"; not run: {', '.join(skipped)}" if skipped else "")
        raise RocmBakeError(f"pulumi {args.action} failed for {', '.join(failed)}{note}")
    if changed:
        print(f"rocm-bake: error: {drift}", file=sys.stderr)
        return CHANGES_EXIT
    return 0

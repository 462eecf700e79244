"""Run an engine command (``pulumi up``), keep its whole output in a log, and end a failure with ONE line.

A failed ``up`` can print over a hundred diagnostic lines, the real cause
("failed to push … connection refused") deep among Python tracebacks of grpc
shutting down. ``make up`` and ``make demo`` run the engine
through this: the output still streams as it comes, all of it goes to the
log, and a failure ends with ``rocm-bake: <command> failed: <first real
cause> (full engine log: <path>)`` — naming the builder and its socket or
endpoint when it is the builder that is missing or dead.

    python -m rocm_bake.engine_run --log .rocm-bake/logs/up-gfx950.log --stack gfx950 -- .tools/bin/pulumi up ...
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: Error text that is a consequence, never the cause: the engine's own wrap-up, grpc shutting down, Ctrl-C.
NOISE = re.compile(
    r"an unhandled error occurred|Program exited with non-zero exit code|^(update|preview|refresh|destroy) failed"
    r"|resource monitor shut down|StatusCode\.(UNAVAILABLE|CANCELLED)|Traceback|KeyboardInterrupt"
    r"|^context canceled$|^\d+ errors?$|Exception calling application:?\s*$|^$",
    re.IGNORECASE,
)
#: What a missing or dead BuildKit looks like from the docker-build provider.
BUILDER_SYMPTOM = re.compile(
    r"context deadline exceeded|failed to dial|buildkitd|no builder|listing workers|connection refused|"
    r"error reading from server: EOF|failed to get status|builder .* not found",
    re.IGNORECASE,
)
#: A URL's query: a registry's upload URLs carry a long ``_state`` blob that says nothing to a reader.
URL_QUERY = re.compile(r"(?P<url>https?://[^\s\"'?]+)\?[^\s\"']*")
#: A progress line: ``<op> <type> <name> <status…> error: <message>``.
PROGRESS = re.compile(r"^\s*[-+~<>=*]*\s*(?P<type>[\w.-]+:[\w.-]*:[\w.-]+)\s+(?P<name>\S+)\s.*?\berror: (?P<msg>.+)$")
#: A Diagnostics header: ``<type> (<name>):``.
HEADER = re.compile(r"^\s*(?P<type>[\w.-]+:[\w.-]*:[\w.-]+)\s+\((?P<name>[^)]+)\):\s*$")


def first_cause(output: str) -> str | None:
    """The first error that is a cause, as ``<resource>: <message>`` when a resource is named; else the
    engine's own first error line (when every error is its wrap-up); None when it printed none."""
    return _first_error(output, skip_noise=True) or policy_violation(output) or _first_error(output, skip_noise=False)


#: A mandatory policy's line under ``Policies:``: ``- [mandatory]  NAME  (TYPE: RESOURCE)``; the line after its
#: description says what broke it.
VIOLATION = re.compile(r"^\s*- \[mandatory\]\s+(?P<policy>\S+)\s+\((?P<type>\S+): (?P<name>[^)]+)\)\s*$")


def policy_violation(output: str) -> str | None:
    """The first mandatory policy violation (the engine prints no ``error:`` line for one)."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        match = VIOLATION.match(line)
        if match:
            detail = lines[i + 2].strip() if i + 2 < len(lines) else ""
            return f"{match['name']}: policy {match['policy']}: {detail or 'violated'}"
    return None


def _first_error(output: str, skip_noise: bool) -> str | None:
    resource = None
    for line in output.splitlines():
        header = HEADER.match(line)
        if header:
            resource = header["name"]
            continue
        progress = PROGRESS.match(line)
        if progress:
            name, msg = progress["name"], progress["msg"].strip()
        elif "error: " in line:
            name, msg = resource, line.split("error: ", 1)[1].strip()
        else:
            continue
        if not msg or (skip_noise and NOISE.search(msg)):
            continue
        stack_resource = name is None or name.startswith("rocm-bake-")  # the stack itself names no resource
        return msg if stack_resource else f"{name}: {msg}"
    return None


def configured_builder(stack: str | None) -> str | None:
    """The builder ``stack`` runs on: its stack file's ``rocm-bake:builder``, else this checkout's (what make
    exported), else the built-in default, as the program resolves it (None when the stack file cannot be read)."""
    if not stack:
        return None
    try:
        from rocm_bake.checkout import stack_builder
        from rocm_bake.config import STACKS_DIR, read_stack_file

        return stack_builder(stack, read_stack_file(stack), STACKS_DIR.parent)
    except Exception:  # noqa: BLE001 - a summary must never fail on the stack file: the engine said what it said
        return None


def failure_cause(rc: int, output: str, builder: str | None) -> str:
    """Why a run failed, on one line: its first real cause, naming the builder and its endpoint when it is
    the builder that is missing or dead."""
    from rocm_bake.builder_check import builder_problem

    cause = first_cause(output) or f"exit status {rc}, and the engine printed no error line"
    if builder and BUILDER_SYMPTOM.search(output):
        problem = builder_problem(builder)
        if problem is not None:
            cause = f"{problem} (the engine said: {cause})"
    return " ".join(URL_QUERY.sub(r"\g<url>", cause).split())


def summary(command: list[str], rc: int, output: str, log: Path, builder: str | None) -> str:
    """The one last line of a failed run."""
    cause = failure_cause(rc, output, builder)
    shown = " ".join(Path(command[0]).name if i == 0 else a for i, a in enumerate(command[:4]))
    return f"rocm-bake: `{shown}` failed: {cause} (full engine log: {log})"


def run(command: list[str], log: Path, builder: str | None) -> int:
    """Stream ``command``'s output to stdout and ``log``; on failure print the summary line last."""
    log.parent.mkdir(parents=True, exist_ok=True)
    chunks: list[str] = []
    with open(log, "w", encoding="utf-8", errors="replace") as sink:
        sink.write(f"$ {' '.join(command)}\n")
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                sink.write(line)
                chunks.append(line)
            rc = proc.wait()
        except KeyboardInterrupt:  # the engine got the same Ctrl-C: let it wind down, then say what happened
            rc = proc.wait()
            chunks.append("error: interrupted (Ctrl-C)\n")
    if rc != 0:
        print(summary(command, rc, "".join(chunks), log, builder), file=sys.stderr)
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocm_bake.engine_run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True, type=Path, help="file the whole output is written to")
    parser.add_argument("--builder", default=None, help="buildx builder to name when the failure looks like it")
    parser.add_argument("--stack", default=None, help="read the builder from this stack's rocm-bake:builder")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS…")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    return run(command, args.log, args.builder or configured_builder(args.stack))


if __name__ == "__main__":
    sys.exit(main())

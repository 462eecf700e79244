"""Progress on long work, on stderr: layer downloads, hashing, scans, uploads, installs.

rocm-bake moves multi-GB layers and uploads GB-sized assets; a person watching
must see bytes, rate and ETA. On a terminal that is a live rich display; when
stderr is not a terminal (CI logs), one line per item when it finishes, so the
log stays readable. ``--json`` and ``--quiet`` turn all of it off, so stdout
stays machine-readable and stderr carries only errors.

rich is imported only when a live display is needed: the CLI's start-up is part
of its performance.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

Advance = Callable[[int], None]

_lock = threading.Lock()
_state: dict[str, Any] = {"quiet": False, "live": None, "users": 0, "stream": None}


def set_quiet(quiet: bool) -> None:
    """Silence progress and notes (``--quiet``, ``--json``)."""
    _state["quiet"] = quiet


def is_quiet() -> bool:
    return bool(_state["quiet"])


def _stream() -> TextIO:
    return _state["stream"] or sys.stderr


def set_stream(stream: TextIO | None) -> None:
    """Write to ``stream`` instead of stderr (tests capture it this way)."""
    _state["stream"] = stream


def _is_terminal() -> bool:
    isatty = getattr(_stream(), "isatty", None)
    return bool(isatty and isatty())


def human_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(count) < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"  # pragma: no cover - loop always returns


def note(message: str) -> None:
    """One visible line on stderr: a wait, a retry, a step that may take a while."""
    if is_quiet():
        return
    live = _state["live"]
    if live is not None:
        live.console.print(message, markup=False, highlight=False)
    else:
        print(message, file=_stream(), flush=True)


def _acquire_live() -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    with _lock:
        if _state["live"] is None:
            progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(file=_stream()),
                transient=False,
            )
            progress.start()
            _state["live"] = progress
        _state["users"] += 1
        return _state["live"]


def _release_live() -> None:
    with _lock:
        _state["users"] -= 1
        if _state["users"] == 0 and _state["live"] is not None:
            _state["live"].stop()
            _state["live"] = None


@contextmanager
def track(label: str, total: int | None = None) -> Iterator[Advance]:
    """Report progress on one item; yields ``advance(nbytes)``.

    Safe from several threads at once (the index hashes wheels in parallel):
    on a terminal each item is a row of one shared display.
    """
    if is_quiet():
        yield lambda _n: None
        return
    started = time.monotonic()
    done = [0]
    if not _is_terminal():

        def advance_plain(count: int) -> None:
            done[0] += count

        yield advance_plain
        elapsed = max(time.monotonic() - started, 1e-9)
        print(
            f"{label}: {human_bytes(done[0])} in {elapsed:.1f} s ({human_bytes(done[0] / elapsed)}/s)",
            file=_stream(),
            flush=True,
        )
        return
    live = _acquire_live()
    task = live.add_task(label, total=total)
    try:

        def advance_live(count: int) -> None:
            live.update(task, advance=count)

        yield advance_live
    finally:
        live.update(task, completed=live.tasks[task].completed if total is None else total)
        _release_live()

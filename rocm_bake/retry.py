"""One retry policy for every network client (the OCI registry and GitHub), on ``stamina``.

Four hand-written loops (registry token, registry request, GitHub request,
asset upload) each had their own backoff, none with jitter. Here there is one
policy on a maintained library: ``stamina`` gives jittered exponential
backoff, a bound on attempts and on total time, a hook that may return the
server's own wait (``Retry-After``, GitHub's ``x-ratelimit-reset``), and a
testing mode (``stamina.set_testing``) so tests exercise every retry without
sleeping through it.

The caller decides *what* is worth another try where it reads the answer, by
raising :class:`Retryable` (a 5xx, a 429 or rate limit, a reset or timed-out
connection); anything else passes through untouched. Every wait is a visible
line (``progress.note``), e.g. ``GitHub GET /repos/o/r/git/blobs: rate limit
(primary, resets in 12 s): waiting 12 s (attempt 2 of 5)``: minutes of silence
look like a hang. Giving up is one clear ``RocmBakeError`` naming what failed,
how often, for how long, and the last reason.

Bounds: ``attempts`` in all, ``budget_s`` of total time (a server asking for a
longer wait than what is left is refused at once, not slept on), and a request
that times out (a server that accepted and said nothing for ``--timeout``) is
tried at most ``timeout_attempts`` times, so a hung server fails the command
within about ``timeout_attempts x --timeout``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from rocm_bake import progress
from rocm_bake.errors import RocmBakeError

T = TypeVar("T")


class Retryable(Exception):
    """A failure worth another try; raised by a client's single attempt, consumed by :class:`RetryPolicy`.

    ``wait_s`` is the server's own wait (``Retry-After``, a rate-limit reset),
    honoured instead of the backoff. ``timed_out`` marks silence past the read
    timeout (counted against ``timeout_attempts``). ``progressed`` marks a
    stream that delivered new bytes before it dropped: it resumes at once with a
    fresh count, so a long layer is not failed by a handful of drops spread
    over an hour.
    """

    def __init__(self, reason: str, *, wait_s: float | None = None, timed_out: bool = False,
                 progressed: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait_s = wait_s
        self.timed_out = timed_out
        self.progressed = progressed
        #: Set by the policy: the run this failure belongs to, and the wait it chose.
        self.run: _Run | None = None
        self.chosen_wait: float | None = None
        self.too_long: tuple[float, float] | None = None


def seconds(value: float) -> str:
    """``12 s`` or ``0.6 s``: whole seconds once they are many."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry; one instance per client, shared by all its calls."""

    #: Attempts in all (the first one included).
    attempts: int = 5
    #: Total time for one call and its retries, waits included.
    budget_s: float = 600.0
    #: Backoff: ``min(wait_max_s, wait_initial_s * 2**(n-1) + uniform(0, wait_jitter_s))``.
    wait_initial_s: float = 0.5
    wait_max_s: float = 30.0
    wait_jitter_s: float = 1.0
    #: A request that timed out is tried this many times at most.
    timeout_attempts: int = 2
    #: Called with each chosen wait (the clients count them for their reports).
    on_wait: Callable[[float], None] | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.timeout_attempts < 1 or self.budget_s <= 0:
            raise ValueError(f"retry policy {self!r}: attempts and budget must be positive")

    def call(self, what: str, once: Callable[[], T], *, hint: str = "") -> T:
        """``once()`` until it returns; a :class:`Retryable` from it is retried, anything else propagates."""
        run = _Run(self, what)
        try:
            for attempt in run.context():
                with attempt:
                    return once()
        except Retryable as exc:
            raise run.gave_up(exc, hint) from None
        raise AssertionError("unreachable")  # pragma: no cover - stamina either returns or raises

    def stream(self, what: str, once: Callable[[], Iterator[T]], *, hint: str = "") -> Iterator[T]:
        """Items of ``once()``; when it fails with a :class:`Retryable`, of the next ``once()``.

        ``once`` must carry on where the failed one stopped (an HTTP ``Range``
        from the byte reached), and every attempt says so: a failure's line
        reads "…: waiting 0.7 s (attempt 2 of 6)" before the resume. A failure
        marked ``progressed`` resumes at once with a fresh count; others back
        off like :meth:`call`.
        """
        while True:
            run = _Run(self, what)
            try:
                for attempt in run.context():
                    with attempt:
                        yield from once()
                        return
            except Retryable as exc:
                if exc.progressed and exc.too_long is None:
                    progress.note(f"{what}: {exc.reason}: resuming from there at once (bytes were arriving, "
                                  f"so the count of {self.attempts} attempts starts again)")
                    continue
                raise run.gave_up(exc, hint) from None


class _Run:
    """One call under the policy: counts, the clock, and stamina's ``on`` hook."""

    def __init__(self, policy: RetryPolicy, what: str) -> None:
        self.policy = policy
        self.what = what
        self.started = time.monotonic()
        self.failures = 0
        self.timeouts = 0

    def context(self) -> Any:
        stamina = _stamina()
        p = self.policy
        return stamina.retry_context(
            on=self.decide, attempts=p.attempts, timeout=p.budget_s, wait_initial=p.wait_initial_s,
            wait_max=p.wait_max_s, wait_jitter=p.wait_jitter_s,
        )

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def decide(self, exc: BaseException) -> bool | float:
        """stamina's backoff hook: False to stop, True for the jittered backoff, a float for the server's wait."""
        if not isinstance(exc, Retryable):
            return False
        self.failures += 1
        exc.run = self
        if exc.progressed:
            return False  # RetryPolicy.stream resumes it at once, with a fresh count
        if exc.timed_out:
            self.timeouts += 1
            if self.timeouts >= self.policy.timeout_attempts:
                return False
        if exc.wait_s is None:
            return True
        wait = exc.wait_s + random.uniform(0, self.policy.wait_jitter_s)  # noqa: S311 - spreading, not secrecy
        left = self.policy.budget_s - self.elapsed()
        if wait > left:
            exc.too_long = (wait, max(left, 0.0))
            return False
        exc.chosen_wait = wait
        return wait

    def waiting(self, exc: Retryable, wait_for: float, retry_num: int) -> None:
        """The visible line for one wait (stamina's on-retry hook calls this before sleeping).

        The wait shown is the one chosen: a server's wait as asked (jittered),
        else stamina's backoff; under ``stamina.set_testing`` nothing is slept.
        """
        wait = exc.chosen_wait if exc.chosen_wait is not None else wait_for
        progress.note(f"{self.what}: {exc.reason}: waiting {seconds(wait)} "
                      f"(attempt {retry_num + 1} of {self.policy.attempts})")
        if self.policy.on_wait is not None:
            self.policy.on_wait(wait)

    def gave_up(self, exc: Retryable, hint: str) -> RocmBakeError:
        tail = f"; {hint}" if hint else ""
        if exc.too_long is not None:
            wait, left = exc.too_long
            return RocmBakeError(
                f"{self.what}: {exc.reason}: the server asks for a {seconds(wait)} wait, more than the "
                f"{seconds(left)} left of the {seconds(self.policy.budget_s)} this run waits; try again later{tail}"
            )
        tries = "attempt" if self.failures == 1 else "attempts"
        return RocmBakeError(
            f"{self.what}: gave up after {self.failures} {tries} in {seconds(self.elapsed())}: {exc.reason}{tail}"
        )


_hook_lock = threading.Lock()
_hook_installed = False


def _stamina() -> Any:
    """stamina, with our one on-retry hook installed (imported on first use: most commands never retry).

    The hook replaces stamina's default, which logs ``stamina.retry_scheduled``
    through the standard library: with no logging configured that lands on
    stderr past ``--quiet`` and ``--json``. Waits of other stamina users (none
    in rocm-bake) are left unreported.
    """
    global _hook_installed
    import stamina

    if not _hook_installed:
        with _hook_lock:
            if not _hook_installed:
                stamina.instrumentation.set_on_retry_hooks([_on_retry])
                _hook_installed = True
    return stamina


def _on_retry(details: Any) -> None:
    exc = details.caused_by
    if isinstance(exc, Retryable) and exc.run is not None:
        exc.run.waiting(exc, details.wait_for, details.retry_num)

"""Validation errors rendered as one line that never echoes what was given.

pydantic's own ``str(ValidationError)`` prints ``input_value=…`` (a token
planted in a URL comes back in the message), and a validator's message may
quote its input. Every config and endpoint error goes through here instead:
the location becomes the key, the message is the rule, and any run of
``MIN_RUN`` or more characters of the input that a message still holds is
cut out, so no part of a secret reaches a message or a log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

#: The shortest run of input characters cut out of a message (shorter runs are ordinary words).
MIN_RUN = 6
CUT = "…"


def strings_in(value: Any) -> Iterator[str]:
    """Every string inside ``value`` (a mapping's keys and values, a list's items)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from strings_in(item)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every run of at least ``MIN_RUN`` characters found in any of ``secrets`` cut out."""
    pieces = [s for s in secrets if len(s) >= MIN_RUN]
    if not pieces:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        end = i + MIN_RUN
        if any(text[i:end] in piece for piece in pieces) and end <= len(text):
            while end < len(text) and any(text[i:end + 1] in piece for piece in pieces):
                end += 1
            if not out or out[-1] != CUT:
                out.append(CUT)
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def one_line(text: str) -> str:
    return " ".join(text.split())


def problem_lines(errors: Sequence[dict[str, Any]], name_of: Callable[[tuple[Any, ...]], str],
                  secrets: Iterable[str] = ()) -> list[str]:
    """``name: rule`` for each pydantic error (``exc.errors()``), deduplicated, inputs never shown.

    ``name_of`` turns an error's location into what the user wrote (a config
    key). The error's own input (for a model-level error: every value of the
    mapping) and any further ``secrets`` are cut out of the rule.
    """
    extra = list(secrets)
    lines: list[str] = []
    for err in errors:
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if err.get("type") == "json_invalid":
            msg = f"not a JSON object: {msg}"
        given = err.get("input")
        given = list(given.values()) if isinstance(given, dict) and not err.get("loc") else given
        line = f"{name_of(tuple(err.get('loc') or ()))}: {scrub(one_line(msg), [*strings_in(given), *extra])}"
        if line not in lines:
            lines.append(line)
    return lines

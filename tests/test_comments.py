"""Comments and docstrings name no tracker code or issue number: a stranger cannot look them up.

Comments give the reason in words. A reference to another project's issue (``owner/name`` and a number)
can be looked up and is allowed; our own tracker's codes and numbers cannot.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Where the project's own code lives (engines' Go module caches are not in the tree).
SCANNED = ("rocm_bake", "components", "tools", "tests", "bench", "policy", "stacks", "dockerfiles", ".github", "mk")
TOP_LEVEL = ("__main__.py", "Makefile")

#: A tracker code: a capital, one or two digits and a small letter, or a capital and digits as a label.
CODE = re.compile(r"\b[A-Z]\d{1,2}[a-z]\b|^\W*[A-Z]\d{1,2}:\s")
#: An issue number of ours (a hash and digits, or "issue" and digits), not another repository's.
ISSUE = re.compile(r"(?<![\w/.-])#\d+\b|\bissues? #?\d+\b", re.IGNORECASE)


def python_texts(source: str) -> Iterator[tuple[int, str]]:
    """Every comment and every bare string statement (docstrings, attribute docstrings) with its line."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for offset, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + offset, line


def line_comments(source: str, marker: str) -> Iterator[tuple[int, str]]:
    """The text after ``marker`` on lines of a Go, shell, make or YAML file that carry a comment."""
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith(marker):
            yield number, stripped
        elif f" {marker} " in line:
            yield number, line.split(f" {marker} ", 1)[1]


def texts(path: Path) -> Iterator[tuple[int, str]]:
    source = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        yield from python_texts(source)
    elif path.suffix == ".go":
        yield from line_comments(source, "//")
    elif path.suffix in (".sh", ".mk", ".yml", ".yaml", ".toml") or path.name in ("Makefile", "Dockerfile"):
        yield from line_comments(source, "#")


def scanned_files() -> Iterator[Path]:
    for name in TOP_LEVEL:
        yield ROOT / name
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "node_modules" not in path.parts:
                yield path


def offenders(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in scanned_files():
        for number, text in texts(path):
            if match := pattern.search(text):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match[0]!r} in {text.strip()[:100]!r}")
    return found


def test_no_tracker_codes_in_comments_or_docstrings() -> None:
    found = offenders(CODE)
    assert not found, "tracker codes nobody can look up; say the reason instead:\n" + "\n".join(found)


def test_no_issue_numbers_of_ours_in_comments_or_docstrings() -> None:
    found = offenders(ISSUE)
    assert not found, "issue numbers in comments; say the reason instead:\n" + "\n".join(found)


def test_the_patterns_catch_what_they_are_for() -> None:
    caught = ["# copied, never linked (B12c)", "# A3c, A6a", "C10: two lines", "# see #40", "# from issue 39"]
    allowed = ["# pulumi/pulumi-docker-build#324", "# sha256 of the wheel", "# gfx950 and gfx90a", "# PEP 503"]
    assert [bool(CODE.search(t) or ISSUE.search(t)) for t in caught] == [True] * len(caught)
    assert [bool(CODE.search(t) or ISSUE.search(t)) for t in allowed] == [False] * len(allowed)

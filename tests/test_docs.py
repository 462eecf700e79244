"""The README and docs/ say only what exists.

Every relative link (and its ``#anchor``) resolves to a file and a heading;
every ``make TARGET`` named in a code span or block is a target of the
Makefile or ``mk/*.mk``; every ``rocm-bake COMMAND [SUBCOMMAND]`` is one the
CLI's parsers accept. The README stays short and lists every docs page.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from rocm_bake.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAKEFILES = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]
#: How long the README may grow before its text belongs in a docs page.
README_MAX_LINES = 200

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
INDENTED_BLOCK = re.compile(r"(?:^(?: {4}|\t).*\n?)+", re.M)
DOUBLE_SPAN = re.compile(r"``(.+?)``", re.S)
SINGLE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
#: ``make`` then its VAR=value and -option words, then the target.
MAKE_CALL = re.compile(r"(?<![\w./-])make((?:\s+(?:[A-Za-z_][A-Za-z0-9_]*=\S*|-\S+))*)\s+([a-z][\w.%-]*)")
#: ``rocm-bake`` (or ``.tools/bin/rocm-bake``, ``.venv/bin/rocm-bake``) then up to two words.
CLI_CALL = re.compile(r"(?<![\w./-])(?:\S*bin/)?rocm-bake[ \t\n]+([^\s`]+)(?:[ \t\n]+([^\s`]+))?")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a page, outside code blocks; repeats get -1, -2 as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    for match in HEADING.finditer(FENCE.sub("", page.read_text())):
        base = slug(match.group(2))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def code_texts(page: Path) -> list[str]:
    """The page's code: fenced and indented blocks, then inline spans (a span may wrap a line)."""
    text = page.read_text()
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    prose = FENCE.sub("", text)
    blocks += [m.group(0) for m in INDENTED_BLOCK.finditer(prose)]
    prose = INDENTED_BLOCK.sub("", prose)
    spans = [m.group(1) for m in DOUBLE_SPAN.finditer(prose)]
    spans += [m.group(1) for m in SINGLE_SPAN.finditer(DOUBLE_SPAN.sub("", prose))]
    return blocks + [" ".join(span.split()) for span in spans]


def at_command_position(text: str, start: int) -> bool:
    """Whether a word at ``start`` is the command of its line (after a prompt, ``&&``, ``;`` or VAR=value words).

    ``apt-get install make git`` names the package, not a target.
    """
    before = re.split(r"&&|\|\||[;|(]", text[text.rfind("\n", 0, start) + 1:start])[-1]
    return all(re.fullmatch(r"\$|[A-Za-z_][A-Za-z0-9_]*=\S*", word) for word in before.split())


def named_make_targets(page: Path) -> set[str]:
    return {m.group(2) for text in code_texts(page) for m in MAKE_CALL.finditer(text)
            if at_command_position(text, m.start())}


def named_cli_calls(page: Path) -> set[tuple[str, str | None]]:
    calls = set()
    for text in code_texts(page):
        for m in CLI_CALL.finditer(text):
            if not at_command_position(text, m.start()):
                continue
            command, second = m.group(1), m.group(2)
            if command.startswith("-") or command.isupper():  # --help, COMMAND: no command named
                continue
            calls.add((command, second))
    return calls


#: Words that open a make directive line, never a rule.
DIRECTIVES = {"ifeq", "ifneq", "ifdef", "ifndef", "else", "endif", "include", "-include", "define", "endef",
              "export", "override", "unexport", "vpath"}


@cache
def make_targets() -> tuple[set[str], list[re.Pattern[str]]]:
    """Explicit targets and pattern rules (``stack-%``) of the Makefile and mk/*.mk."""
    names: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for makefile in MAKEFILES:
        text = makefile.read_text().replace("\\\n", " ")
        for m in re.finditer(r"^([^\s#:=][^:=\n]*?)\s*::?(?!=)", text, re.M):
            words = m.group(1).split()
            if words[0] in DIRECTIVES:
                continue
            for target in words:
                if "$" in target:
                    continue
                if "%" in target:
                    patterns.append(re.compile(re.escape(target).replace("%", ".+") + r"\Z"))
                else:
                    names.add(target)
    return names, patterns


def is_make_target(name: str) -> bool:
    names, patterns = make_targets()
    return name in names or any(p.match(name) for p in patterns)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def second_word_choices(parser: argparse.ArgumentParser) -> set[str] | None:
    """What the word after a command must be: a subcommand, or a positional with choices; None when free."""
    nested = subcommands(parser)
    if nested:
        return set(nested)
    positionals = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
    if positionals and positionals[0].choices:
        return {str(c) for c in positionals[0].choices}
    return None


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked}")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no heading '#{anchor}' in {linked.relative_to(ROOT)}")
    assert not broken, f"{page_id(page)}: broken links: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_make_target_named_exists(page: Path) -> None:
    missing = sorted(t for t in named_make_targets(page) if not is_make_target(t))
    assert not missing, f"{page_id(page)} names make targets that the Makefile and mk/*.mk lack: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_rocm_bake_command_named_exists(page: Path) -> None:
    top = subcommands(build_parser())
    wrong = []
    for command, second in sorted(named_cli_calls(page), key=str):
        if command not in top:
            wrong.append(f"rocm-bake {command}: no such command (the CLI has {sorted(top)})")
            continue
        choices = second_word_choices(top[command])
        if choices is not None and second is not None and not second.startswith("-") and second not in choices:
            wrong.append(f"rocm-bake {command} {second}: no such subcommand (it has {sorted(choices)})")
    assert not wrong, f"{page_id(page)}: {wrong}"


def test_the_checks_see_what_the_pages_name() -> None:
    """The scanners find the commands every newcomer reads, so the checks above cannot pass on nothing."""
    targets = set().union(*(named_make_targets(p) for p in PAGES))
    commands = set().union(*(named_cli_calls(p) for p in PAGES))
    assert {"demo", "test", "setup", "down", "up", "state-server", "wheel-index", "bench"} <= targets, targets
    assert {"which-index", "wheel", "index", "arches", "publish", "plan"} <= {c for c, _ in commands}, commands
    assert {("wheel", "arches"), ("index", "check"), ("arches", "up")} <= commands, commands
    assert is_make_target("stack-gfx950") and not is_make_target("no-such-target")


def test_readme_is_short_and_lists_every_docs_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, \
        f"README.md has {len(text.splitlines())} lines (at most {README_MAX_LINES}): move a topic into docs/"
    assert text.startswith("# rocm-bake\n\n```sh\nmake demo "), "README.md: the first commands must be make demo"
    top = text.split("```", 2)[1]
    assert "make test" in top, "README.md: make test must be in the first command block"
    linked = {(README.parent / target).resolve() for target in LINK.findall(text)}
    unlisted = [page_id(p) for p in DOCS if p.resolve() not in linked]
    assert DOCS and not unlisted, f"README.md does not link these docs pages: {unlisted}"

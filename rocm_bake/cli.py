"""The ``rocm-bake`` command line.

Each subcommand lives in its own module under ``rocm_bake.commands`` and
exposes ``register(subparsers)``; this module discovers them, so adding a
command never means editing a central list. A ``RocmBakeError`` (bad input,
a refused operation, or a remote service given up on) prints as one line
naming what was wrong and exits 2; bad input changes nothing.

An arch on the command line is an edge: its argument's ``type=`` is
``arch_argument(ArchSet)`` (or ``Arch``), so the command receives the typed
value and a bad one is that same one ``rocm-bake: error:`` line, naming the
argument, before the command runs.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

from rocm_bake import __version__, commands
from rocm_bake.archset import ArchError
from rocm_bake.errors import RocmBakeError

Parsed = TypeVar("Parsed")


def command_modules() -> dict[str, str]:
    """Command name (``which-index``) -> module name (``which_index``), found without importing any."""
    # a directory listing, not pkgutil.iter_modules: that imports inspect (8 ms) on every call
    folder = Path(commands.__path__[0])
    return {path.stem.replace("_", "-"): path.stem for path in folder.glob("*.py") if not path.stem.startswith("_")}


#: reST inline markup a docstring may hold: ``literal``, :role:`text`, `interpreted`.
REST_INLINE = re.compile(r"(?::[\w-]+:)?``?([^`]+?)``?")


def plain(text: str) -> str:
    """Docstring text as a terminal shows it: reST markup dropped, the words kept."""
    return REST_INLINE.sub(r"\1", text)


def summary(module: str) -> str:
    """The first line of a command module's docstring, read from its source, not imported."""
    source = (Path(commands.__path__[0]) / f"{module}.py").read_text(encoding="utf-8")
    match = re.search(r'"""(.*?)(?:"""|$)', source, re.MULTILINE)
    line = match.group(1).strip() if match else ""
    # "``rocm-bake arch show ARCH``: the build policy ..." -> "the build policy ..."
    return plain(re.sub(r"^``[^`]*``:\s*", "", line)).rstrip(".")


def chosen_command(argv: Sequence[str], names: set[str]) -> str | None:
    """The subcommand ``argv`` asks for (its first non-option word), if it names one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in names else None


class ArchArgumentError(argparse.ArgumentTypeError):
    """A bad arch argument: the ``ArchError`` message, reported as every bad input is (see ``Parser.error``)."""


def arch_argument(parse: Callable[[str], Parsed]) -> Callable[[str], Parsed]:
    """An argparse ``type=`` parsing an arch argument once, with ``parse`` (``ArchSet``, ``Arch``, a list).

    argparse reports an ``ArgumentTypeError`` under the argument's name; the
    ``ArchError`` it wraps already says which value and which rule.
    """

    def convert(value: str) -> Parsed:
        try:
            return parse(value)
        except ArchError as exc:
            raise ArchArgumentError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "arch")  # argparse names the type in some messages
    return convert


class Parser(argparse.ArgumentParser):
    """argparse, except that a bad arch argument is the CLI's one error line (exit 2), not usage plus error."""

    def error(self, message: str) -> NoReturn:
        # argparse calls this while handling the ArgumentError it raised from our ArchArgumentError
        handled = sys.exception()
        if isinstance(handled, argparse.ArgumentError) and isinstance(handled.__context__, ArchArgumentError):
            self.exit(2, f"rocm-bake: error: {elide(message)}\n")
        super().error(message)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. Given ``argv``, only the chosen command's module is imported.

    Start-up is part of the CLI's performance: ``rocm-bake --version`` and
    ``rocm-bake index build`` must not pay for pydantic, httpx or pulumi that
    other commands use, so every other command is listed by name and summary
    only, and not at all once a command is chosen (argparse dispatches on that
    one name; a dozen unused subparsers would cost 5 ms of every call).
    """
    parser = Parser(prog="rocm-bake", description=plain(__doc__.splitlines()[0]),
                    epilog="Run rocm-bake COMMAND --help for a command's options.")
    parser.add_argument("--version", action="version", version=f"rocm-bake {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = command_modules()
    chosen = chosen_command(argv, set(modules)) if argv is not None else None
    for name, module in sorted(modules.items()):
        if argv is None or name == chosen:
            importlib.import_module(f"{commands.__name__}.{module}").register(subparsers)
        elif chosen is None:
            subparsers.add_parser(name, help=summary(module), add_help=False)
    return parser


#: A run of this many non-blank characters in an error is someone's input echoed back, not words.
LONG_WORD = re.compile(r"\S{400,}")


def elide(message: str) -> str:
    """Shorten every very long word of an error to its ends: a 100 KB argument echoed whole would bury the line."""
    return LONG_WORD.sub(lambda m: f"{m[0][:120]}…[{len(m[0]) - 240} characters]…{m[0][-120:]}", message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Bad input is a ``RocmBakeError`` raised where the input is read, naming it.

    Only that type is caught (plus the two ways a user stops us): an
    ``OSError`` or ``ValueError`` from reading a user's file is turned into a
    ``RocmBakeError`` at its source, where the file and the rule are known, so
    anything else escaping here is a bug and keeps its traceback.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except RocmBakeError as exc:
        print(f"rocm-bake: error: {elide(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `rocm-bake plan X | head` is not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("rocm-bake: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())

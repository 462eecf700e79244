"""The one writer of install lines: pip, uv and the hash-locked form, for one per-arch index.

pip merges the candidates of ``--index-url`` and ``--extra-index-url`` and
takes the highest version, so an unpinned ``rocm-torch`` can be taken over by
anyone who uploads a higher one to PyPI. The metapackage's version ends in a
local segment (``+h<digest>``), which PyPI refuses to host, so an exact pin on
it cannot come from there; the hash lock beside the index (``requirements.txt``)
covers the distributions whose versions PyPI could host too.

Every place that prints or renders an install line (the CLI, the landing page,
the Makefile's demo ending, the README) calls this module. It imports nothing
but the standard library: the ``rocm_torch`` checker that ships inside the
metapackage carries a copy of it, made at build time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: The public index the PyPI dependencies (numpy and friends) come from.
PYPI = "https://pypi.org/simple"
#: The metapackage every index serves; its ``device-<arch>`` extra pins the index's wheels.
METAPACKAGE = "rocm-torch"
#: The hashed requirements file written beside each index (``pip install --require-hashes -r``).
LOCK_FILE = "requirements.txt"
#: The PEP 751 lock written beside it when the pinned uv can install it.
PYLOCK_FILE = "pylock.toml"
#: What follows every install line: the installed wheels can say whether they fit this machine.
CHECK_HINT = "then run `python -m rocm_torch` to check it fits this machine"
#: Stands for an index base nobody has given yet (``which-index`` with no publish target).
BASE_PLACEHOLDER = "<your index base>"


@dataclass(frozen=True)
class InstallLines:
    """One index's install commands, the hash-locked one first (it is the one to prefer)."""

    locked: str
    pip: str
    uv: str

    def all(self) -> tuple[str, str, str]:
        return self.locked, self.pip, self.uv


def index_url(base: str, dir_name: str) -> str:
    """The index directory's URL: ``<base>/<dir_name>/`` (one slash between, one at the end)."""
    return f"{base.rstrip('/')}/{dir_name}/"


def requirement(dir_name: str, version: str) -> str:
    """``rocm-torch[device-<dir_name>]==<version>``: the extra and the exact, unspoofable pin."""
    if not version:
        raise ValueError("an install line pins the metapackage: its version is required")
    return f"{METAPACKAGE}[device-{dir_name}]=={version}"


def locked_line(base: str, dir_name: str) -> str:
    """The hash-locked line alone: it needs no version (the lock names every one, with its hash).

    The lock holds no index URL (the same file serves a local, a served and a
    published index), so the line names both indexes; a candidate whose hash
    is not the lock's is refused whichever index offers it.
    """
    url = index_url(base, dir_name)
    return f"pip install --require-hashes --index-url {url} --extra-index-url {PYPI} -r {url}{LOCK_FILE}"


def install_lines(base: str, dir_name: str, version: str) -> InstallLines:
    """The three lines for the index ``<base>/<dir_name>/`` whose metapackage is ``version``.

    uv ranks ``--extra-index-url`` above ``--index-url``, so its line names
    which index is which (``--index`` first, ``--default-index`` PyPI).
    """
    url = index_url(base, dir_name)
    pinned = f"'{requirement(dir_name, version)}'"
    return InstallLines(
        locked=locked_line(base, dir_name),
        pip=f"pip install --index-url {url} --extra-index-url {PYPI} {pinned}",
        uv=f"uv pip install --index {url} --default-index {PYPI} {pinned}",
    )


def lines_for(base: str, dir_name: str, version: str | None, locked: bool = True) -> list[str]:
    """What to print for one index: the hash-locked line first when the index has a lock (``locked``),
    then the pinned pip and uv lines when the metapackage's ``version`` is known (never an unpinned one)."""
    lines = [locked_line(base, dir_name)] if locked else []
    if version:
        pinned = install_lines(base, dir_name, version)
        lines += [pinned.pip, pinned.uv]
    return lines


def with_hint(lines: list[str]) -> list[str]:
    """``lines`` followed by the check hint (nothing when there is no line)."""
    return [*lines, CHECK_HINT] if lines else []


_METAPACKAGE_WHEEL = re.compile(rf"^{METAPACKAGE.replace('-', '_')}-(?P<version>[^-]+)-py3-none-any\.whl$")


def metapackage_version_of(filenames: list[str]) -> str | None:
    """The version of the one ``rocm_torch`` wheel among an index's files; None when there is none, or more
    than one (then no single version can be pinned)."""
    versions = {m["version"] for n in filenames if (m := _METAPACKAGE_WHEEL.match(n))}
    return versions.pop() if len(versions) == 1 else None


def local_index_facts(index_dir: Path) -> tuple[str | None, bool]:
    """(the metapackage's version, whether the lock is there) of an index directory on this host."""
    try:
        names = [p.name for p in (Path(index_dir) / "files").iterdir()]
    except OSError:
        names = []
    return metapackage_version_of(names), (Path(index_dir) / LOCK_FILE).is_file()


def file_index_dir(base: str, dir_name: str) -> Path | None:
    """The directory a ``file://`` base's index is in; None for any other base (its facts are not here)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(base)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return Path(unquote(parts.path)) / dir_name

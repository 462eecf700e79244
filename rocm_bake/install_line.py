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

from dataclasses import dataclass

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
    """The hash-locked line alone: it needs no version (the lock names every one, with its hash)."""
    return f"pip install --require-hashes -r {index_url(base, dir_name)}{LOCK_FILE}"


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

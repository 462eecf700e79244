"""The hash lock beside each index: ``requirements.txt``, every distribution the extra installs, with its sha256.

The pinned line keeps a higher ``rocm-torch`` on PyPI out, but a pinned wheel
whose version has no local segment (``triton_kernels==1.0.0``) can be
uploaded to PyPI by anyone at that same version, and pip would take either.
The lock names every distribution of ``rocm-torch[device-<arch>]``, this
index's and the PyPI dependencies they need, each with its hash:
``pip install --require-hashes`` refuses any other file whichever index
offers it.

The lock is resolved by the pinned uv (``uv pip compile --generate-hashes``)
against this index first and the public index after it (uv's first-index
strategy: a name this index has is never looked up on PyPI), for the
index's Python and platform, read from its wheels' tags. It holds no index
URL, so the same file serves a local, a served and a published index (the
install line names the indexes). Resolution runs against a staging copy of
the tree being built (pages with relative links, wheels hard-linked), so the
lock is part of the tree, swapped in with it in one rename.

When the public part cannot be resolved (no network), there is no lock: a
partial one would still install unchecked files.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from pydantic import BaseModel

from rocm_bake import progress
from rocm_bake.archset import ArchSet
from rocm_bake.index.defaults import FILES_DIR, PUBLIC_INDEX_ENV
from rocm_bake.index.tree import link_or_copy
from rocm_bake.install_line import LOCK_FILE, PYLOCK_FILE, PYPI, requirement

if TYPE_CHECKING:  # pragma: no cover
    from rocm_bake.index.models import IndexPlan

#: How long the resolution may take (seconds); the public index's metadata is small.
LOCK_TIMEOUT = 180
#: What a wheel's platform tag says, as uv's ``--python-platform`` names it.
_PLATFORMS = {"x86_64": "x86_64-unknown-linux-gnu", "aarch64": "aarch64-unknown-linux-gnu"}
_CP_TAG = re.compile(r"-cp(\d)(\d+)-[^-]+-(?:many)?linux[_0-9]*_(x86_64|aarch64)\.whl$")


class LockOutcome(BaseModel):
    """The lock's bytes, or why there is none (one line)."""

    data: bytes | None = None
    pylock: bytes | None = None
    missing: str | None = None


def python_target(filenames: list[str]) -> tuple[str, str]:
    """(``X.Y``, uv platform) of the index's wheels: their ``cpXY`` tag and Linux arch; this interpreter's and
    x86_64 Linux when every wheel is pure Python."""
    for name in sorted(filenames):
        match = _CP_TAG.search(name)
        if match:
            return f"{match[1]}.{match[2]}", _PLATFORMS[match[3]]
    return f"{sys.version_info[0]}.{sys.version_info[1]}", _PLATFORMS["x86_64"]


def stage(plan: IndexPlan, root: Path) -> None:
    """The tree ``plan`` would write, under ``root``, with relative links (offsite hrefs are not uploaded yet)."""
    from rocm_bake.index.build import tree_files
    from rocm_bake.index.pages import render_pages

    for rel, data in render_pages(plan.arch, plan.wheels, None).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    for item in tree_files(plan):
        if not item.rel.startswith(f"{FILES_DIR}/"):
            continue  # a page: written above, with relative links
        target = root / item.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.source is not None:
            link_or_copy(item.source, target)
        else:
            target.write_bytes(item.data or b"")


def public_index() -> str:
    """The public index the lock resolves against: ``$ROCM_BAKE_PUBLIC_INDEX`` (a mirror, a test's stand-in), else PyPI."""
    return os.environ.get(PUBLIC_INDEX_ENV) or PYPI


def _header_first_line(arch: ArchSet, version: str) -> str:
    return f"# {requirement(arch.dir_name, version)}: every distribution with its sha256"


def kept(index_root: Path, arch: ArchSet, version: str) -> dict[str, bytes]:
    """The locks of the index on disk when they are for this very metapackage (same version: the same pins),
    else nothing. A lock is kept, not re-resolved: rebuilding an unchanged index stays offline and
    byte-identical, and a newer upload to the public index does not change what a lock installs."""
    found = {}
    for name in (LOCK_FILE, PYLOCK_FILE):
        try:
            data = (index_root / name).read_bytes()
        except OSError:
            continue
        if data.startswith(_header_first_line(arch, version).encode()):
            found[name] = data
    return found if LOCK_FILE in found else {}


def with_lock(plan: IndexPlan) -> IndexPlan:
    """``plan`` with its locks among the pages (resolved now unless kept), or with ``lock_missing`` saying why."""
    from rocm_bake.index.pages import tree_digest

    if LOCK_FILE in plan.pages:
        return plan
    outcome = compile_lock(plan, public_index())
    if outcome.data is None:
        progress.note(f"index {plan.arch}: lock missing: {outcome.missing}")
        return plan.model_copy(update={"lock_missing": outcome.missing})
    pages = {**plan.pages, LOCK_FILE: outcome.data, **({PYLOCK_FILE: outcome.pylock} if outcome.pylock else {})}
    return plan.model_copy(update={"pages": pages, "index_sha256": tree_digest(pages, plan.wheels)})


def _uv_compile(stage_dir: Path, wanted: str, public_index: str, target: tuple[str, str], timeout: float,
                out: list[str]) -> subprocess.CompletedProcess[str]:
    from rocm_bake.index.check import clean_env, uv_binary

    cmd = [uv_binary(), "pip", "compile", "-", "--generate-hashes", "--no-header", "--no-config",
           "--index", stage_dir.resolve().as_uri() + "/", "--default-index", public_index,
           "--python-version", target[0], "--python-platform", target[1], "--quiet", *out]
    return subprocess.run(cmd, input=wanted + "\n", capture_output=True, text=True, env=clean_env(),
                          timeout=timeout, cwd=stage_dir)


def local_paths(pylock: str, stage_dir: Path) -> str:
    """The staged wheels' ``url = "file://…/files/X"`` as ``path = "files/X"``: relative to the lock's directory
    (PEP 751), so the lock beside the index installs its wheels wherever the index is; publishing points
    them at the release (``published_pylock``)."""
    prefix = re.escape(stage_dir.resolve().as_uri() + f"/{FILES_DIR}/")
    return re.sub(rf'url = "{prefix}([^"/]+)"', lambda m: f'path = "{FILES_DIR}/{unquote(m[1])}"', pylock)


def published_pylock(data: bytes, wheel_url: str) -> bytes:
    """The index's ``pylock.toml`` with its own wheels at their release download URL (``wheel_url/X``)."""
    base = wheel_url.rstrip("/")
    text = re.sub(rf'path = "{FILES_DIR}/([^"/]+)"', lambda m: f'url = "{base}/{quote(m[1])}"', data.decode())
    return text.encode()


def compile_lock(plan: IndexPlan, public_index: str = PYPI, timeout: float = LOCK_TIMEOUT) -> LockOutcome:
    """Resolve ``plan``'s extra into a hashed requirements file (and ``pylock.toml``); ``missing`` says why
    there is none."""
    from rocm_bake.errors import RocmBakeError
    from rocm_bake.index.check import uv_binary

    try:
        uv_binary()
    except RocmBakeError:
        return LockOutcome(missing="uv is not installed (pip install uv): it resolves the lock")
    wanted = requirement(plan.arch.dir_name, plan.metapackage.version)
    target = python_target([w.filename for w in plan.wheels])
    scratch = Path(plan.dist) / ".cache" / "rocm-bake"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"lock-{plan.arch.dir_name}-", dir=scratch) as tmp:
        stage_dir = Path(tmp).resolve()  # uv runs in it: every path it is given is absolute
        stage(plan, stage_dir)
        try:
            proc = _uv_compile(stage_dir, wanted, public_index, target, timeout, [])
            if proc.returncode != 0:
                reason = next((ln.strip() for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "uv failed")
                return LockOutcome(missing=f"cannot resolve against {public_index}: {reason[:300]}")
            pylock_path = stage_dir / PYLOCK_FILE
            made = _uv_compile(stage_dir, wanted, public_index, target, timeout, ["-o", str(pylock_path)])
            made_ok = made.returncode == 0 and pylock_path.is_file()
            pylock = local_paths(pylock_path.read_text(), stage_dir) if made_ok else None
        except subprocess.TimeoutExpired:
            return LockOutcome(missing=f"resolving against {public_index} took over {timeout:.0f} s")
    first = f"{_header_first_line(plan.arch, plan.metapackage.version)} (Python {target[0]}, {target[1]}).\n"
    header = first + f"# pip install --require-hashes --index-url <this index> --extra-index-url {PYPI} -r {LOCK_FILE}\n"
    return LockOutcome(data=(header + proc.stdout).encode(),
                       pylock=(first + f"# uv pip install -r {PYLOCK_FILE}\n" + pylock).encode() if pylock else None)

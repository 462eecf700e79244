"""``index check``: install each arch's index for real, with pip and with uv.

CI builds two architectures' indexes on every pull request and asserts that
each installs its own and only its own: this is that check. For every arch it
serves DIST on 127.0.0.1, installs ``rocm-torch[device-<arch>]`` into a
throwaway venv with ``--index-url …/index/<arch>/`` and asserts the installed
distributions are exactly that index's wheels at those versions; then it asks
the same index for every other arch's extra in a fresh venv.

A fat index (``gfx950;gfx1201``, served from ``index/gfx950-gfx1201/``)
installs its combined extra, ``rocm-torch[device-gfx950-gfx1201]``, and is
asked for every single-arch extra, its own arches' included: the fat
index offers only the combined one.

After each install, the metapackage's own checker (``python -m rocm_torch``)
must say "ok" on a fake host of the index's arches and "does not fit" on a
host of another arch (``rocm_bake.index.fit_probe``).

On refusal: pip and uv only *warn* on an undeclared extra and install the
bare metapackage. That is the refusal the index design gives ("each index
declares only its own architecture's extra"), so it is verified rather than
faked: the install must succeed with exactly ``rocm-torch`` at the index's
version and nothing else — no arch wheel got in. The installers' warnings are
kept in the report.

Installers run with the user's pip/uv configuration stripped (PIP_*/UV_*
environment, pip config files, uv.toml): a site constraint or an extra
``--find-links`` would otherwise decide the result instead of the index.
"""

from __future__ import annotations

import contextlib
import functools
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version
from pydantic import BaseModel

from rocm_bake import progress
from rocm_bake.archset import KNOWN_ARCHES, ArchSet, sorted_arches
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.models import index_dir
from rocm_bake.index.tree import is_rocm_bake_index
from rocm_bake.index.defaults import INSTALLERS as INSTALLERS, PYPI as PYPI  # re-exported
from rocm_bake.index.fit_probe import fit_problems
from rocm_bake.index.versions import METAPACKAGE
from rocm_bake.install_line import LOCK_FILE, PYLOCK_FILE

#: What one install checks: the extra, the hash lock, the PEP 751 lock (uv), the refusal of other extras.
Kind = Literal["install", "lock", "pylock", "refusal"]
#: Network timeout for an installer (seconds): an unreachable extra index must not hang.
NET_TIMEOUT = 15
LIST_SCRIPT = (
    "import importlib.metadata as m, json; "
    "print(json.dumps(sorted([d.metadata['Name'], d.version] for d in m.distributions())))"
)


# ------------------------------------------------------------------ server


class ServedRequest(BaseModel):
    path: str
    bytes: int


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        sent = 0
        while chunk := source.read(1 << 20):
            outputfile.write(chunk)
            sent += len(chunk)
        server: _Server = self.server  # type: ignore[assignment]
        with server.lock:
            server.requests.append(ServedRequest(path=unquote(urlsplit(self.path).path), bytes=sent))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, directory: Path) -> None:
        super().__init__(("127.0.0.1", 0), functools.partial(_Handler, directory=str(directory)))
        self.lock = threading.Lock()
        self.requests: list[ServedRequest] = []


class Served(BaseModel):
    """A running server: its base URL and, live, every file body it sent."""

    model_config = {"arbitrary_types_allowed": True}
    url: str
    server: _Server

    def requests(self) -> list[ServedRequest]:
        with self.server.lock:
            return list(self.server.requests)

    def reset(self) -> None:
        with self.server.lock:
            self.server.requests.clear()


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[Served]:
    """Serve ``directory`` on 127.0.0.1 at a free port (``python -m http.server`` semantics)."""
    server = _Server(Path(directory))
    thread = threading.Thread(target=server.serve_forever, name="rocm-bake-index", daemon=True)
    thread.start()
    try:
        yield Served(url=f"http://127.0.0.1:{server.server_address[1]}", server=server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ----------------------------------------------------------- index reading


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def _hrefs(page: Path) -> list[str]:
    parser = _Links()
    parser.feed(page.read_text())
    return parser.hrefs


def index_wheels(dist: Path, arch: ArchSet) -> dict[str, Version]:
    """Project → version as the index's own HTML lists them (what an installer sees)."""
    root = index_dir(dist, arch)
    if not is_rocm_bake_index(root):
        raise RocmBakeError(f"{root}: no rocm-bake index for {arch} (run `rocm-bake index build` first)")
    found: dict[str, Version] = {}
    for project_href in _hrefs(root / "index.html"):
        page = root / project_href.strip("/") / "index.html"
        if not page.is_file():
            raise RocmBakeError(f"{root}/index.html links {project_href!r}, which has no page")
        for href in _hrefs(page):
            filename = unquote(urlsplit(href).path.rsplit("/", 1)[-1])
            name, version, _, _ = parse_wheel_filename(filename)
            project = canonicalize_name(name)
            if found.get(project, version) != version:
                raise RocmBakeError(f"{arch} index lists {project} at two versions")
            found[project] = version
    if METAPACKAGE not in found:
        raise RocmBakeError(f"{arch} index has no rocm-torch metapackage")
    return found


def discover_arches(dist: Path) -> list[ArchSet]:
    """Every index under ``DIST/index/`` (a directory listing, parsed here): single arches, then fat builds."""
    base = Path(dist) / "index"
    found: list[ArchSet] = []
    if base.is_dir():
        for p in base.iterdir():
            arch = ArchSet.from_dir_name(p.name)
            if arch is not None and is_rocm_bake_index(p):
                found.append(arch)
    if not found:
        raise RocmBakeError(f"{base}: no per-arch indexes found (run `rocm-bake index build` first)")
    singles = sorted((a for a in found if not a.is_fat), key=lambda a: (len(a), a))
    fats = sorted((a for a in found if a.is_fat), key=lambda a: [(len(x), x) for x in a.arches])
    return singles + fats


def refused_extras(target: ArchSet) -> list[str]:
    """The extras this index must not offer: every known arch's own, except its own extra."""
    # the known arches are this module's constants, not input: wrapped as one-arch sets, not re-validated
    singles = (ArchSet._trusted(a).extra for a in sorted_arches(KNOWN_ARCHES))
    return [e for e in singles if e != target.extra]


# -------------------------------------------------------------- installers


class InstallResult(BaseModel):
    arch: str
    installer: Literal["pip", "uv"]
    kind: Kind
    requirement: str
    ok: bool
    expected: dict[str, str]
    installed: dict[str, str]
    problems: list[str]
    warnings: list[str]
    returncode: int
    seconds: float
    output_tail: str = ""


class CheckReport(BaseModel):
    ok: bool
    dist: str
    arches: list[str]
    extra_index_url: str | None
    results: list[InstallResult]
    #: Exposed pins (no local version segment) the extra index also offers at that version: a squat to act on.
    exposed: list[str] = []

    def text(self) -> str:
        lines = []
        for r in self.results:
            what = WHAT[r.kind]
            status = "ok" if r.ok else "FAILED"
            lines.append(
                f"{r.arch:8} {r.installer:3} {what:29} {status:6} "
                f"{len(r.installed)} installed ({r.seconds:.1f} s)"
            )
            if r.kind == "refusal" and r.ok:
                lines.append(f"{'':13}verified: only rocm-torch installed; {r.installer} warned "
                             f"{len(r.warnings)}x about undeclared extras")
            for p in r.problems:
                lines.append(f"{'':13}- {p}")
            if not r.ok and r.output_tail:
                lines += [f"{'':13}| {line}" for line in r.output_tail.splitlines()]
        for problem in self.exposed:
            lines.append(f"exposed pin FAILED: {problem}")
        lines.append("index check: " + ("all passed" if self.ok else "FAILED"))
        return "\n".join(lines)


#: How the report names each kind of install, and how progress names it while it runs.
WHAT = {"install": "installs its own", "lock": "installs its hash lock", "pylock": f"installs its {PYLOCK_FILE}",
        "refusal": "refuses other arches' extras"}
DOING = {"install": "install", "lock": "install from the hash lock", "pylock": f"install from {PYLOCK_FILE}",
         "refusal": "refusal of other extras"}


def clean_env() -> dict[str, str]:
    """The environment minus pip/uv configuration (CA bundle kept: it decides nothing)."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("PIP_") or k.startswith("UV_")) or k == "PIP_CERT"}
    env.update(PIP_CONFIG_FILE=os.devnull, UV_HTTP_TIMEOUT=str(NET_TIMEOUT), UV_HTTP_RETRIES="0",
               UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1")
    return env


def uv_binary() -> str:
    found = shutil.which("uv")
    if found:
        return found
    try:
        import uv  # type: ignore[import-not-found]

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        raise RocmBakeError("index check: uv is not installed (pip install uv), so it cannot be checked") from None


def _run(cmd: Sequence[str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run with the stripped environment, in a neutral cwd (no project config found there)."""
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, env=clean_env(),
                              timeout=timeout, cwd=cwd or tempfile.gettempdir())
    except subprocess.TimeoutExpired as exc:
        raise RocmBakeError(f"index check: {' '.join(cmd[:4])} … timed out after {timeout:.0f} s") from None


def make_venv(installer: str, path: Path, python: str, timeout: float) -> Path:
    """An empty venv (no pip, no setuptools) so the installed set is only what was installed."""
    if installer == "uv":
        cmd = [uv_binary(), "venv", "--quiet", "--no-config", "--python", python, str(path)]
    else:
        cmd = [python, "-m", "venv", "--without-pip", str(path)]
    proc = _run(cmd, timeout)
    if proc.returncode != 0:
        raise RocmBakeError(f"index check: creating a venv with {installer} failed: {proc.stderr.strip()}")
    return path / "bin" / "python"


def install_cmd(installer: str, venv_python: Path, index_url: str, requirement: str,
                extra_index_url: str | None, lock: Path | None = None) -> list[str]:
    """The install command; with ``lock``, every distribution comes from that hash lock (``--require-hashes``)."""
    wanted = ["--require-hashes", "-r", str(lock)] if lock is not None else [requirement]
    if installer == "uv":
        # uv ranks --extra-index-url *above* --index-url and stops at the first
        # index that has a name, so the pip spelling would let PyPI's torch
        # shadow the arch's. --index (first) / --default-index (last) says it.
        indexes = (["--index", index_url, "--default-index", extra_index_url] if extra_index_url
                   else ["--default-index", index_url])
        return [uv_binary(), "pip", "install", "--python", str(venv_python), "--no-config", "--no-cache",
                "--no-build", *indexes, *wanted]
    extra = ["--extra-index-url", extra_index_url] if extra_index_url else []
    return [sys.executable, "-m", "pip", "--python", str(venv_python), "install", "--isolated",
            "--no-cache-dir", "--disable-pip-version-check", "--no-input", "--only-binary", ":all:",
            "--timeout", str(NET_TIMEOUT), "--retries", "0", "--index-url", index_url, *extra, *wanted]


def installed(venv_python: Path, timeout: float) -> dict[str, str]:
    # -I: no cwd or user site on sys.path, so only the venv's own distributions count.
    proc = _run([str(venv_python), "-I", "-c", LIST_SCRIPT], timeout)
    if proc.returncode != 0:
        raise RocmBakeError(f"index check: listing {venv_python}'s distributions failed: {proc.stderr.strip()}")
    return {str(canonicalize_name(n)): v for n, v in json.loads(proc.stdout)}


def compare(expected: dict[str, Version], got: dict[str, str]) -> list[str]:
    problems = [f"missing {n}=={v}" for n, v in sorted(expected.items()) if n not in got]
    problems += [f"unexpected {n}=={v}" for n, v in sorted(got.items()) if n not in expected]
    problems += [
        f"{n}: installed {got[n]}, the index has {v}"
        for n, v in sorted(expected.items()) if n in got and Version(got[n]) != v
    ]
    return problems


def run_one(
    arch: ArchSet, installer: Literal["pip", "uv"], kind: Kind, index_url: str,
    expected: dict[str, Version], work: Path, python: str, extra_index_url: str | None, timeout: float,
    lock: Path | None = None,
) -> InstallResult:
    if kind in ("lock", "pylock"):
        lock = lock if kind == "lock" else lock.with_name(PYLOCK_FILE)  # type: ignore[union-attr]
        requirement = f"-r {lock}"
        want = expected
    elif kind == "install":
        requirement = f"rocm-torch[{arch.extra}]"
        want = expected
    else:
        requirement = f"rocm-torch[{','.join(refused_extras(arch))}]"
        want = {METAPACKAGE: expected[METAPACKAGE]}
    start = time.monotonic()
    what = DOING[kind]
    progress.note(f"index check {arch}: {installer} {what} ...")
    venv_python = make_venv(installer, work / f"{arch.dir_name}-{installer}-{kind}", python, timeout)
    proc = _run(install_cmd(installer, venv_python, index_url, requirement, extra_index_url,
                            lock if kind in ("lock", "pylock") else None), timeout)
    got = installed(venv_python, timeout)
    output = proc.stdout + proc.stderr
    problems = compare(want, got)
    if kind == "install" and not problems:  # the installed checker must tell its own arch from another
        problems += fit_problems(venv_python, arch, work / f"{arch.dir_name}-{installer}-kfd", _run, timeout)
    if proc.returncode != 0:
        problems.insert(0, f"{installer} exited {proc.returncode}")
    if kind == "refusal" and problems:
        problems.insert(0, f"the {arch} index did not refuse other arches' extras cleanly")
    warnings = sorted({line.strip() for line in output.splitlines()
                       if "extra" in line.lower() and "device-" in line and "warn" in line.lower()})
    seconds = round(time.monotonic() - start, 2)
    progress.note(f"index check {arch}: {installer} {what} {'ok' if not problems else 'FAILED'} "
                  f"({len(got)} installed, {seconds:.1f} s)")
    return InstallResult(
        arch=arch, installer=installer, kind=kind, requirement=requirement, ok=not problems,
        expected={k: str(v) for k, v in want.items()}, installed=got, problems=problems,
        warnings=warnings, returncode=proc.returncode, seconds=seconds,
        output_tail="\n".join(output.strip().splitlines()[-15:]) if problems else "",
    )


def lock_pins(lock: Path) -> dict[str, Version]:
    """``name -> version`` of every ``name==version`` line of a hash lock; nothing when there is no lock."""
    import re

    try:
        text = lock.read_text()
    except OSError:
        return {}
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, re.M)
    return {str(canonicalize_name(name)): Version(version) for name, version in pins}


def kinds(installer: str, lock: Path) -> tuple[Kind, ...]:
    """What to install for ``installer``: the extra, each lock beside the index it reads, the refusal."""
    locks: tuple[Kind, ...] = ("lock",) if lock.is_file() else ()
    if installer == "uv" and lock.with_name(PYLOCK_FILE).is_file():
        locks += ("pylock",)
    return ("install", *locks, "refusal")


def no_lock(arch: ArchSet, installer: Literal["pip", "uv"], lock: Path) -> InstallResult:
    """A failed result: the index has no hash lock to install (its build could not resolve one)."""
    return InstallResult(
        arch=arch, installer=installer, kind="lock", requirement=f"-r {lock}", ok=False, expected={}, installed={},
        problems=[f"no hash lock {lock}: rebuild the index where its public index is reachable"],
        warnings=[], returncode=-1, seconds=0.0,
    )


def check_index(
    dist: Path,
    arches: list[ArchSet] | None = None,
    installers: Sequence[str] = INSTALLERS,
    extra_index_url: str | None = None,
    python: str | None = None,
    timeout: float = 600,
) -> CheckReport:
    """Install every arch's index with every installer; see the module docstring.

    ``extra_index_url`` is None by default here (tests have no network); the
    CLI defaults it to PyPI, since "--index-url replaces PyPI outright, and
    the first ordinary dependency — numpy, via triton-kernels — then fails".
    ``python`` is the venvs' interpreter (the wheels' tags must match it).
    """
    dist = Path(dist)
    arches = arches or discover_arches(dist)
    for installer in installers:
        if installer not in INSTALLERS:
            raise RocmBakeError(f"index check: unknown installer {installer!r} (expected pip or uv)")
    if python is not None and shutil.which(python) is None:
        raise RocmBakeError(f"index check --python {python}: no such interpreter (give a path or a name on PATH)")
    listings = {arch: index_wheels(dist, arch) for arch in arches}
    results: list[InstallResult] = []
    with tempfile.TemporaryDirectory(prefix="rocm-bake-check-") as tmp, serve(dist) as served:
        for arch in arches:
            index_url = f"{served.url}/index/{arch.dir_name}/"
            lock = (index_dir(dist, arch) / LOCK_FILE).absolute()  # the installers run in a neutral cwd
            # what the index needs from the public index: exactly what its lock names there (none without a lock)
            wanted = {**lock_pins(lock), **listings[arch]}
            for installer in installers:
                if not lock.is_file():
                    results.append(no_lock(arch, installer, lock))  # type: ignore[arg-type]
                for kind in kinds(installer, lock):
                    results.append(run_one(
                        arch, installer, kind, index_url, wanted, Path(tmp),  # type: ignore[arg-type]
                        python or sys.executable, extra_index_url, timeout, lock,
                    ))
    exposed = [problem for arch in arches for problem in exposed_elsewhere(listings[arch], extra_index_url, arch)]
    return CheckReport(
        ok=all(r.ok for r in results) and not exposed, dist=str(dist), arches=arches,
        extra_index_url=extra_index_url, results=results, exposed=exposed,
    )


def offered_versions(index_url: str, project: str) -> set[Version]:
    """The versions ``index_url`` (a PEP 503 simple index) lists for ``project``; none when it has no page for
    it or cannot be reached (then nothing can resolve from it)."""
    import urllib.error
    import urllib.request

    url = f"{index_url.rstrip('/')}/{project}/"
    if url.startswith("file:"):
        url += "index.html"
    try:
        with urllib.request.urlopen(url, timeout=NET_TIMEOUT) as response:  # noqa: S310 - the check's own URL
            body = response.read(8 << 20).decode("utf-8", "replace")
    except (OSError, urllib.error.URLError, ValueError):
        return set()
    parser = _Links()
    parser.feed(body)
    found = set()
    for href in parser.hrefs:
        filename = unquote(urlsplit(href).path.rsplit("/", 1)[-1])
        try:
            name, version = (parse_wheel_filename(filename)[:2] if filename.endswith(".whl")
                             else parse_sdist_filename(filename))
        except ValueError:
            continue  # not a distribution file
        if canonicalize_name(name) == project:
            found.add(version)
    return found


def exposed_elsewhere(listing: dict[str, Version], extra_index_url: str | None, arch: ArchSet) -> list[str]:
    """Each pin with no local version segment that ``extra_index_url`` also offers at that very version: pip
    merges both indexes' candidates, so that file could be installed in place of this index's one."""
    if not extra_index_url:
        return []
    problems = []
    for project, version in sorted(listing.items()):
        if project == METAPACKAGE or version.local is not None:
            continue
        if version in offered_versions(extra_index_url, project):
            problems.append(f"{arch}: {project}=={version} is also offered by {extra_index_url}: pip could install "
                            f"that file instead (the hash lock refuses it; register the name or rename it)")
    return problems

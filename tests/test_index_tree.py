"""The index on disk: incremental writes, one-rename swaps, crash recovery, served permissions."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import build as index_mod
from rocm_bake.index import stamp, tree
from rocm_bake.index.build import build_index, remove_index
from rocm_bake.index.check import clean_env, uv_binary
from rocm_bake.ports import free_port, port_in_use

from tests.index_fixtures import GIT, NATIVE_TAG, ROCM, arch_wheel_set, device_files, make_wheel
from tests.readonly_fixtures import run_read_only

ROOT = Path(__file__).resolve().parent.parent
#: Every step boundary of a write, in order (``tree.fault_point``).
STEPS = ["tree-created", "file-written", "files-written", "tree-complete", "link-created", "swapped",
         "old-removed", "stamp-written"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def inodes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_ino for p in sorted(root.rglob("*")) if p.is_file()}


def leftovers(dist: Path, dir_name: str = "gfx950") -> list[str]:
    """Anything beside the one live tree: temp trees, old trees, temp links, pre-symlink leftovers."""
    base = dist / "index"
    trees = base / ".trees" / dir_name
    live = os.readlink(base / dir_name).rsplit("/", 1)[-1] if (base / dir_name).is_symlink() else None
    extra = [f".trees/{dir_name}/{n}" for n in (os.listdir(trees) if trees.is_dir() else []) if n != live]
    extra += [n for n in os.listdir(base) if n.startswith((".link-", ".old-", ".tmp-"))]
    return extra


def filler(wheels: Path, count: int) -> None:
    """``count`` more small pure wheels, so one change is one among many."""
    for i in range(count):
        make_wheel(wheels, f"filler{i:03d}", "1.0.0")


@pytest.fixture()
def wheels(tmp_path: Path) -> Path:
    out = tmp_path / "dist" / "wheels" / "gfx950"
    arch_wheel_set(out, "gfx950")
    filler(out, 12)
    return out


@pytest.fixture(autouse=True)
def no_fault_hook() -> None:
    yield
    tree.FAULT_HOOK = None


# ------------------------------------------------------------ incremental


def changed_files(before: dict[str, int], after: dict[str, int]) -> set[str]:
    return {rel for rel, ino in after.items() if before.get(rel) != ino}


def test_one_changed_wheel_rewrites_only_its_files(wheels: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    root = dist / "index" / "gfx950"
    cold = build_index(ArchSet("gfx950"), wheels, dist)
    assert cold.files_written == len(snapshot(root)) and cold.files_kept == 0
    assert root.is_symlink() and not Path(os.readlink(root)).is_absolute()
    meta = f"files/{cold.metapackage}"

    # new bytes, same version: the wheel and its project page (the href's sha256); METADATA is the same
    before = inodes(root)
    nixl = wheels / "nixl-0.7.0-py3-none-any.whl"
    nixl.unlink()
    make_wheel(wheels, "nixl", "0.7.0", extra_files={"nixl/extra.py": b"X = 1\n"}, requires_python=">=3.10")
    same_version = build_index(ArchSet("gfx950"), wheels, dist)
    assert changed_files(before, inodes(root)) == {"files/nixl-0.7.0-py3-none-any.whl", "nixl/index.html"}
    assert same_version.files_written == 2 and same_version.files_kept == len(before) - 2

    # a new version: wheel, .metadata, project page, the metapackage (a new version), its .metadata and page
    before = inodes(root)
    for old in wheels.glob("triton-*"):
        old.unlink()
    version = f"3.6.1+{GIT}.{ROCM}"
    make_wheel(wheels, "triton", version, extra_files=device_files("triton", "gfx950"), tag=NATIVE_TAG)
    bumped = build_index(ArchSet("gfx950"), wheels, dist)
    triton = f"files/triton-{version}-{NATIVE_TAG}.whl"
    new_meta = f"files/{bumped.metapackage}"
    assert changed_files(before, inodes(root)) == {
        triton, f"{triton}.metadata", "triton/index.html", new_meta, f"{new_meta}.metadata", "rocm-torch/index.html",
    }
    assert bumped.files_written == 6 and meta not in inodes(root)

    # a new project adds the root page; removing one rewrites the root page and the metapackage only
    before = inodes(root)
    make_wheel(wheels, "extra-one", "1.0.0")
    added = build_index(ArchSet("gfx950"), wheels, dist)
    assert "index.html" in changed_files(before, inodes(root)) and added.files_written == 7
    before = inodes(root)
    next(wheels.glob("extra_one-*")).unlink()
    removed = build_index(ArchSet("gfx950"), wheels, dist)
    assert changed_files(before, inodes(root)) == {
        "index.html", f"files/{removed.metapackage}", f"files/{removed.metapackage}.metadata", "rocm-torch/index.html",
    }
    assert removed.files_written == 4 and not any("extra" in rel for rel in inodes(root))
    assert leftovers(dist) == []


def test_a_rebuild_with_nothing_changed_writes_nothing(wheels: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build_index(ArchSet("gfx950"), wheels, dist)
    link = os.readlink(dist / "index" / "gfx950")
    before = inodes(dist / "index" / "gfx950")
    warm = build_index(ArchSet("gfx950"), wheels, dist)
    assert warm.unchanged and warm.files_written == 0 and warm.hashed_bytes == 0
    assert os.readlink(dist / "index" / "gfx950") == link and inodes(dist / "index" / "gfx950") == before
    # the stamp gone (so the full build runs): it still finds the tree current and writes nothing
    stamp.stamp_path(dist, "gfx950").unlink()
    full = build_index(ArchSet("gfx950"), wheels, dist)
    assert full.unchanged and full.files_written == 0 and os.readlink(dist / "index" / "gfx950") == link


# --------------------------------------------------------------- crashes


class Crash(Exception):
    pass


def two_states(wheels: Path, tmp_path: Path) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """A dist holding the old index, the old and new trees' contents, and the wheels switched to the new set."""
    dist = tmp_path / "dist"
    build_index(ArchSet("gfx950"), wheels, dist)
    old = snapshot(dist / "index" / "gfx950")
    for stale in wheels.glob("triton-*"):
        stale.unlink()
    make_wheel(wheels, "triton", f"3.6.1+{GIT}.{ROCM}", extra_files=device_files("triton", "gfx950"), tag=NATIVE_TAG)
    reference = tmp_path / "reference"
    build_index(ArchSet("gfx950"), wheels, reference)
    new = snapshot(reference / "index" / "gfx950")
    assert old != new
    return dist, old, new


@pytest.fixture(scope="module")
def switched_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """``two_states`` built once for the crash tests: its directory (``dist/``, the wheels inside), old, new."""
    root = tmp_path_factory.mktemp("two-states")
    wheels = root / "dist" / "wheels" / "gfx950"
    arch_wheel_set(wheels, "gfx950")
    filler(wheels, 12)
    dist, old, new = two_states(wheels, root)
    return dist, old, new


@pytest.fixture()
def switched(switched_once: tuple[Path, dict[str, bytes], dict[str, bytes]],
             tmp_path: Path) -> tuple[Path, Path, dict[str, bytes], dict[str, bytes]]:
    """A test's own copy of ``switched_once``'s dist to crash a write into: dist, its wheels, old, new.

    The index's link is relative, so the copy's points into the copy; file modes and mtimes come along.
    """
    built, old, new = switched_once
    dist = tmp_path / "dist"
    shutil.copytree(built, dist, symlinks=True)
    assert snapshot(dist / "index" / "gfx950") == old and leftovers(dist) == []
    return dist, dist / "wheels" / "gfx950", old, new


def assert_old_or_new(dist: Path, old: dict[str, bytes], new: dict[str, bytes], step: str) -> None:
    seen = snapshot(dist / "index" / "gfx950")
    after_swap = STEPS.index(step) >= STEPS.index("swapped")
    assert seen == (new if after_swap else old), f"after a crash at {step} readers see neither index"


def recovers(dist: Path, wheels: Path, new: dict[str, bytes]) -> None:
    result = build_index(ArchSet("gfx950"), wheels, dist)
    assert snapshot(dist / "index" / "gfx950") == new
    assert leftovers(dist) == [], "the next run must clean what the crash left"
    assert build_index(ArchSet("gfx950"), wheels, dist).unchanged and result.index_sha256


@pytest.mark.parametrize("step", STEPS)
def test_an_exception_at_any_step_leaves_the_old_index_or_the_new(switched: tuple[Path, Path, dict[str, bytes],
                                                                  dict[str, bytes]], step: str) -> None:
    dist, wheels, old, new = switched

    def hook(at: str) -> None:
        if at == step:
            raise Crash(step)

    tree.FAULT_HOOK = hook
    with pytest.raises(Crash):
        build_index(ArchSet("gfx950"), wheels, dist)
    tree.FAULT_HOOK = None
    assert_old_or_new(dist, old, new, step)
    recovers(dist, wheels, new)


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from rocm_bake.archset import ArchSet
    from rocm_bake.index import tree
    from rocm_bake.index.build import build_index

    def hook(at):
        if at == sys.argv[1]:
            os.kill(os.getpid(), signal.SIGKILL)

    tree.FAULT_HOOK = hook
    build_index(ArchSet("gfx950"), Path(sys.argv[2]), Path(sys.argv[3]))
    sys.exit(3)  # the step never came
""")


@pytest.mark.parametrize("step", STEPS)
def test_a_kill_at_any_step_leaves_the_old_index_or_the_new(switched: tuple[Path, Path, dict[str, bytes],
                                                            dict[str, bytes]], step: str) -> None:
    dist, wheels, old, new = switched
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, step, str(wheels), str(dist)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert_old_or_new(dist, old, new, step)
    recovers(dist, wheels, new)


def test_a_kill_with_the_link_missing_relinks_the_newest_complete_tree(wheels: Path, tmp_path: Path) -> None:
    """A tree renamed complete and ``<dir>`` absent (an interrupted migration): the next run relinks it."""
    dist, old, new = two_states(wheels, tmp_path)
    tree.FAULT_HOOK = lambda at: (_ for _ in ()).throw(Crash(at)) if at == "tree-complete" else None
    with pytest.raises(Crash):
        build_index(ArchSet("gfx950"), wheels, dist)
    tree.FAULT_HOOK = None
    (dist / "index" / "gfx950").unlink()
    recovers(dist, wheels, new)


def test_leftovers_of_the_pre_symlink_layout_are_recovered(wheels: Path, tmp_path: Path) -> None:
    """The old swap, killed between its two renames, left ``.old-gfx950-*/tree`` and no index."""
    dist = tmp_path / "dist"
    build_index(ArchSet("gfx950"), wheels, dist)
    live = (dist / "index" / "gfx950").resolve()
    old_dir = dist / "index" / ".old-gfx950-abcd1234"
    old_dir.mkdir()
    shutil.copytree(live, old_dir / "tree", copy_function=os.link)  # the old layout hard-linked wheels too
    (dist / "index" / ".tmp-gfx950-zz99yy88").mkdir()
    (dist / "index" / "gfx950").unlink()
    shutil.rmtree(dist / "index" / ".trees")
    stamp.stamp_path(dist, "gfx950").unlink()
    expected = snapshot(old_dir / "tree")
    result = build_index(ArchSet("gfx950"), wheels, dist)
    assert snapshot(dist / "index" / "gfx950") == expected and leftovers(dist) == []
    assert result.files_written == 0 and result.files_kept == len(expected)  # everything reused


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "move-aside"])
def test_a_pre_symlink_directory_is_migrated(
    wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    dist = tmp_path / "dist"
    build_index(ArchSet("gfx950"), wheels, dist)
    link = dist / "index" / "gfx950"
    real = link.resolve()
    link.unlink()
    shutil.copytree(real, link, copy_function=os.link)  # the old layout: a real directory
    shutil.rmtree(dist / "index" / ".trees")
    expected = snapshot(link)
    if not exchange:
        monkeypatch.setattr(tree, "_exchange", lambda a, b: False)
    result = build_index(ArchSet("gfx950"), wheels, dist)
    assert link.is_symlink() and snapshot(link) == expected and leftovers(dist) == []
    assert result.files_written == 0


def test_readers_never_see_a_missing_index(wheels: Path, tmp_path: Path) -> None:
    """A reader process polls while the index swaps back and forth, each step slowed to widen any window."""
    dist = tmp_path / "dist"
    other = tmp_path / "other"
    shutil.copytree(wheels, other)
    make_wheel(other, "only-in-other", "1.0.0")
    build_index(ArchSet("gfx950"), wheels, dist)
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import os, sys
            root, stop = sys.argv[1], sys.argv[2]
            reads = misses = 0
            while not os.path.exists(stop):
                try:
                    with open(os.path.join(root, "index.html"), "rb") as page:
                        assert b"rocm-torch" in page.read()
                    os.listdir(os.path.join(root, "files"))
                    reads += 1
                except OSError:
                    misses += 1
            print(reads, misses)
        """), str(dist / "index" / "gfx950"), str(stop)],
        stdout=subprocess.PIPE, text=True,
    )
    tree.FAULT_HOOK = lambda _at: time.sleep(0.002)
    try:
        for i in range(16):
            build_index(ArchSet("gfx950"), other if i % 2 == 0 else wheels, dist)
    finally:
        tree.FAULT_HOOK = None
        stop.write_text("")
        out, _ = reader.communicate(timeout=30)
    reads, misses = map(int, out.split())
    assert reads > 100 and misses == 0


def test_a_second_writer_waits_for_the_first(wheels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One writer per index: a build waits, visibly, while another holds the index's lock."""
    import threading

    dist = tmp_path / "dist"
    store = index_mod._store(dist, ArchSet("gfx950"))
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.locked():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(10)
    results: list[object] = []
    builder = threading.Thread(target=lambda: results.append(build_index(ArchSet("gfx950"), wheels, dist)))
    builder.start()
    for _ in range(200):
        if "waiting for another rocm-bake writing" in capsys.readouterr().err:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the second writer neither waited visibly nor finished")
    assert not results and not os.path.lexists(dist / "index" / "gfx950")
    release.set()
    holder.join(10)
    builder.join(30)
    assert len(results) == 1 and (dist / "index" / "gfx950" / "index.html").is_file()


def test_a_foreign_directory_or_link_is_refused(wheels: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    (dist / "index").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (dist / "index" / "gfx950").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RocmBakeError, match="not an index rocm-bake wrote"):
        build_index(ArchSet("gfx950"), wheels, dist)
    assert os.readlink(dist / "index" / "gfx950") == str(tmp_path / "elsewhere")
    assert not (dist / "index" / ".trees").exists()


def test_remove_index_removes_the_link_and_its_trees(wheels: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build_index(ArchSet("gfx950"), wheels, dist)
    assert remove_index(dist, ArchSet("gfx950"))
    assert not os.path.lexists(dist / "index" / "gfx950") and not (dist / "index" / ".trees" / "gfx950").exists()
    assert not remove_index(dist, ArchSet("gfx950"))
    assert list(wheels.glob("*.whl"))  # the inputs stay


def test_out_is_a_file_or_read_only(wheels: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(RocmBakeError, match="is not a directory"):
        build_index(ArchSet("gfx950"), wheels, afile)
    # Read-only for real whoever runs this (root included: a read-only bind mount), through the CLI.
    ro = tmp_path / "ro"
    ro.mkdir()
    result = run_read_only(ro, ["index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out", str(ro)])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot write" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert list(ro.iterdir()) == [], "a refused build must write nothing"


# ----------------------------------------------------------- permissions


def test_the_index_is_world_readable_under_umask_022(wheels: Path, tmp_path: Path) -> None:
    """Served files get the user's umask, not mkdtemp's 0700: a web server as another user can read them."""
    private = make_wheel(tmp_path / "private", "privpkg", "1.0.0")
    private.chmod(0o600)
    os.replace(private, wheels / private.name)
    old = os.umask(0o022)
    try:
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    finally:
        os.umask(old)
    base = tmp_path / "dist" / "index"
    live = (base / "gfx950").resolve()
    for path in [base, base / ".trees", live.parent, live, *live.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        want = 0o755 if path.is_dir() else 0o644
        assert mode & want == want, f"{path.relative_to(base)} is {oct(mode)}"
    # the input's own mode is not widened: it was copied, not linked
    assert stat.S_IMODE((wheels / private.name).stat().st_mode) == 0o600
    assert (live / "files" / private.name).stat().st_ino != (wheels / private.name).stat().st_ino


# --------------------------------------------------------------- serving


def test_python_http_server_and_uv_follow_the_link(wheels: Path, tmp_path: Path) -> None:
    """``python -m http.server --directory dist`` (docs/wheel-pipeline.md's serving line) serves through the symlink."""
    dist = tmp_path / "dist"
    result = build_index(ArchSet("gfx950"), wheels, dist)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(dist)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if port_in_use(port):
                break
            time.sleep(0.05)
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        proc = subprocess.run(
            [uv_binary(), "pip", "install", "--dry-run", "--no-config", "--no-cache", "--python",
             str(venv / "bin" / "python"), "--index-url", f"http://127.0.0.1:{port}/index/gfx950/",
             "rocm-torch[device-gfx950]"],
            capture_output=True, text=True, env=clean_env(), cwd=tmp_path,
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr
    assert f"Would install {result.wheel_count} packages" in proc.stderr + proc.stdout
    assert tree.is_rocm_bake_index(dist / "index" / "gfx950")

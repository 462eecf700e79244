"""Index trees on disk: versioned, swapped in by one rename, written incrementally.

Layout under ``DIST/index/``::

    <dir>                           -> .trees/<dir>/<seq>-<digest12>  (a relative symlink)
    .trees/<dir>/<seq>-<digest12>/  the tree readers see (normally the only one)
    .trees/<dir>/.tmp-<token>/      a tree being written
    .link-<dir>-<token>             the new link, before it is renamed over the old one

**Atomic for readers.** A new tree is written beside the current one, renamed
to its final name once complete, then published by ``os.replace`` of a new
symlink over ``<dir>``: one ``rename(2)``, so a reader (``python -m
http.server --directory DIST``, pip with a ``file://`` URL, publishing)
resolves either the old tree or the new one and never finds ``<dir>``
missing. Old trees are removed after the swap.

**A crash at any point leaves the old index or the new one.** Before the
rename of the link nothing readers see has changed; after it, the new tree
is complete. The next run (under the same lock) removes a half-written
``.tmp-*`` tree and a stray ``.link-*``, relinks the newest complete tree if
``<dir>`` is missing, restores an ``.old-*`` tree the pre-symlink layout left
behind when killed mid-swap, and removes trees nothing points at.
:func:`fault_point` marks each step, so tests kill or raise at every one.
The guarantee is for a killed or crashing process: files are not fsynced
(a cold build would pay one per page), so a power cut is left to the
filesystem's rename ordering.

**Incremental.** A file of the new tree whose bytes the current tree already
has is hard-linked from it (same inode, nothing written). An input wheel is
**copied** from ``--wheels`` (a reflink where the filesystem can, else a
kernel copy), never linked: a symlink or hard link would let the served
bytes change after their sha256 was written into the pages; a copy
recorded by an earlier build is reused. Only files whose bytes change are written, so
one changed wheel writes its own file, its ``.metadata`` and project page,
the metapackage, its ``.metadata`` and page, and the root page if the
project list changed.

**Served with the user's umask.** Directories and files are created with
``mkdir``/``open`` (never ``mkdtemp``, which makes 0700), so a web server
running as another user can read them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rocm_bake.errors import RocmBakeError
from rocm_bake.index.defaults import GENERATOR_TAG

TREES = ".trees"
TMP_PREFIX = ".tmp-"
COMPLETE = re.compile(r"^(\d{6})-([0-9a-f]{12}|migrated)$")

#: Tests set this to raise or die at a named step (see :func:`fault_point`).
FAULT_HOOK: Callable[[str], None] | None = None


def fault_point(step: str) -> None:
    """A step boundary of a write; the hook lets tests crash the writer exactly here."""
    if FAULT_HOOK is not None:
        FAULT_HOOK(step)


def is_rocm_bake_index(path: Path) -> bool:
    """True when ``path`` is an index rocm-bake wrote (its root page says so)."""
    page = Path(path) / "index.html"
    try:
        with open(page, "rb") as handle:
            return GENERATOR_TAG.encode() in handle.read(4096)
    except OSError:
        return False


def current_umask() -> int:
    """The process umask, read without changing it where the kernel allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@dataclass(frozen=True)
class TreeFile:
    """One file of a tree: ``data`` to write, or ``source``, an input wheel to copy."""

    rel: str
    sha256: str
    data: bytes | None = None
    source: Path | None = None


@dataclass
class WriteStats:
    written: list[str] = field(default_factory=list)
    kept: int = 0
    tree: str | None = None
    notes: list[str] = field(default_factory=list)


#: Recorded stat of each file of the current tree: rel -> (size, mtime_ns, inode, sha256).
Recorded = dict[str, tuple[int, int, int, str]]


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """``renameat2(RENAME_EXCHANGE)``: swap two paths atomically; False where unsupported."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _sha256(path: Path) -> str | None:
    import hashlib

    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


#: ``ioctl(FICLONE)``: share the source's extents copy-on-write (btrfs, xfs): a copy that costs no bytes.
FICLONE = 0x40049409


def copy_file(src: Path, dest: Path) -> None:
    """A real copy of ``src``'s bytes (a symlink's target, never the link) at ``dest``, created with the umask."""
    import fcntl

    with open(src, "rb") as source, open(dest, "xb") as out:
        try:
            fcntl.ioctl(out.fileno(), FICLONE, source.fileno())
            return
        except OSError:
            pass
        shutil.copyfileobj(source, out, 1 << 20)


def link_or_copy(src: Path, dest: Path) -> bool:
    """Hard link (no bytes copied); copy when linking is impossible. True when copied."""
    try:
        os.link(src, dest)
        return False
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
            raise
    shutil.copyfile(src, dest)
    return True


class TreeStore:
    """``DIST/index/<dir_name>``: the link, its versioned trees, the lock (see the module docstring)."""

    def __init__(self, dist: Path, dir_name: str, lock_path: Path) -> None:
        self.base = Path(dist) / "index"
        self.dir_name = dir_name
        self.link = self.base / dir_name
        self.trees = self.base / TREES / dir_name
        self.lock_path = lock_path
        self._link_tmp = re.compile(rf"^\.link-{re.escape(dir_name)}-[0-9a-f]{{12}}$")
        # leftovers of the pre-symlink layout: mkdtemp names (8 chars)
        self._legacy_old = re.compile(rf"^\.old-{re.escape(dir_name)}-[a-z0-9_]{{8}}$")
        self._legacy_tmp = re.compile(rf"^\.tmp-{re.escape(dir_name)}-[a-z0-9_]{{8}}$")

    # ------------------------------------------------------------ state

    def link_target(self) -> str | None:
        """The complete tree ``<dir>`` points at when it is our link, else None."""
        try:
            target = os.readlink(self.link)
        except OSError:
            return None
        prefix = f"{TREES}/{self.dir_name}/"
        name = target[len(prefix):] if target.startswith(prefix) else ""
        return name if COMPLETE.match(name) else None

    def current(self) -> tuple[str, Path | None]:
        """What ``<dir>`` is now: ("absent"|"ours"|"foreign-link"|"directory"|"empty", tree path).

        Raises when it is something rocm-bake must not replace.
        """
        link = self.link
        if link.is_symlink():
            name = self.link_target()
            if name is not None and (self.trees / name).is_dir():
                return "ours", self.trees / name
            if name is not None:
                return "absent", None  # dangling: recover() relinks or removes it
            if is_rocm_bake_index(link):
                return "foreign-link", link
        elif link.is_dir():
            if is_rocm_bake_index(link):
                return "directory", link
            if not any(link.iterdir()):
                return "empty", None
        elif not link.exists():
            return "absent", None
        raise RocmBakeError(f"{link} exists and is not an index rocm-bake wrote; refusing to replace it")

    def complete_trees(self) -> list[str]:
        try:
            names = [e.name for e in os.scandir(self.trees) if COMPLETE.match(e.name)]
        except FileNotFoundError:
            return []
        return sorted(names, key=lambda n: int(n[:6]))

    def leftovers(self) -> bool:
        """True when a killed run left anything for :meth:`recover` (cheap: two listings)."""
        try:
            extra = [n for n in os.listdir(self.trees) if n != self.link_target()]
        except FileNotFoundError:
            extra = []
        if extra:
            return True
        try:
            return any(self._link_tmp.match(n) or self._legacy_old.match(n) or self._legacy_tmp.match(n)
                       for n in os.listdir(self.base))
        except FileNotFoundError:
            return False

    # ------------------------------------------------------------- lock

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One writer per index (an flock, released by the kernel if the writer dies)."""
        import fcntl

        from rocm_bake import progress

        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                progress.note(f"waiting for another rocm-bake writing {self.link} ...")
                fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --------------------------------------------------------- recovery

    def _relink(self, name: str) -> None:
        tmp = self.base / f".link-{self.dir_name}-{secrets.token_hex(6)}"
        os.symlink(f"{TREES}/{self.dir_name}/{name}", tmp)
        os.replace(tmp, self.link)

    def recover(self) -> list[str]:
        """Clean what a killed run left; relink or restore a missing ``<dir>``. Call under the lock."""
        notes: list[str] = []
        if self.base.is_dir():
            for entry in os.scandir(self.base):
                if self._link_tmp.match(entry.name) or self._legacy_tmp.match(entry.name):
                    _remove(Path(entry.path))
                    notes.append(f"removed {entry.name} left by an interrupted run")
        if self.trees.is_dir():
            for entry in os.scandir(self.trees):
                if entry.name.startswith(TMP_PREFIX):
                    _remove(Path(entry.path))
                    notes.append(f"removed a half-written tree {entry.name} left by an interrupted run")
        if self.base.is_dir():
            for entry in os.scandir(self.base):
                if not self._legacy_old.match(entry.name):
                    continue
                kept = Path(entry.path) / "tree"
                if not os.path.lexists(self.link) and is_rocm_bake_index(kept):
                    os.rename(kept, self.link)
                    notes.append(f"restored {self.link} from {entry.name} (a run killed mid-swap)")
                _remove(Path(entry.path))
        dangling = self.link.is_symlink() and not self.link.exists()
        if dangling or not os.path.lexists(self.link):
            complete = self.complete_trees()
            if complete:
                self._relink(complete[-1])
                notes.append(f"relinked {self.link} to {complete[-1]} (a run was interrupted after writing it)")
            elif dangling:
                self.link.unlink()
        current = self.link_target() if self.link.is_symlink() else None
        for name in self.complete_trees():
            if name != current:
                _remove(self.trees / name)
        return notes

    # ------------------------------------------------------------ write

    def reusable(self, current: Path | None, f: TreeFile, recorded: Recorded) -> Path | None:
        """A file of ``current`` holding exactly ``f``'s bytes, to hard-link instead of writing."""
        if current is None:
            return None
        old = current / f.rel
        try:
            st = os.lstat(old)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        if f.source is not None:
            if st.st_nlink > 1 and self._shares_input(old, f.source):
                return None  # linked to the input: its bytes can change after hashing; copy instead
            rec = recorded.get(f.rel)  # a copy an earlier run made and recorded
            if rec == (st.st_size, st.st_mtime_ns, st.st_ino, f.sha256):
                return old
            return old if _sha256(old) == f.sha256 else None  # no record (the stamp was lost): read it
        assert f.data is not None
        if st.st_size != len(f.data):
            return None
        try:
            return old if old.read_bytes() == f.data else None
        except OSError:
            return None

    def unchanged(self, files: list[TreeFile], recorded: Recorded) -> bool:
        """True when our link's tree already holds exactly ``files`` (nothing to write)."""
        kind, current = self.current()
        if kind != "ours" or current is None:
            return False
        present = set()
        for dirpath, _dirs, names in os.walk(current):
            rel = os.path.relpath(dirpath, current)
            present.update(n if rel == "." else f"{rel}/{n}" for n in names)
        if present != {f.rel for f in files}:
            return False
        return all(self.reusable(current, f, recorded) is not None for f in files)

    @staticmethod
    def _shares_input(old: Path, source: Path) -> bool:
        try:
            a, b = os.stat(old), os.stat(source)
        except OSError:
            return False
        return (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)

    def _place(self, f: TreeFile, dest: Path, served_mode: int) -> None:
        if f.data is not None:
            with open(dest, "xb") as out:
                out.write(f.data)
            return
        assert f.source is not None
        copy_file(f.source, dest)

    def _place_all(self, placed: list[tuple[TreeFile, Path]], served_mode: int) -> Iterator[TreeFile]:
        """Write every new file, on every core: copying wheels is the kernel writing pages, and one thread
        left a cold build's copy (2000 MiB) at half what two do. Yields each file, in order, once written."""
        from concurrent.futures import ThreadPoolExecutor

        from rocm_bake.index.hashcache import hash_workers

        def place(item: tuple[TreeFile, Path]) -> TreeFile:
            self._place(item[0], item[1], served_mode)
            return item[0]

        with ThreadPoolExecutor(max_workers=min(hash_workers(), max(1, len(placed)))) as pool:
            yield from pool.map(place, placed)

    def commit(self, files: list[TreeFile], digest: str, recorded: Recorded) -> WriteStats:
        """Write a new tree (reusing unchanged files) and swap it in. Call under the lock."""
        kind, current = self.current()
        stats = WriteStats()
        served_mode = 0o666 & ~current_umask()
        self.trees.mkdir(parents=True, exist_ok=True)
        tmp = self.trees / f"{TMP_PREFIX}{secrets.token_hex(6)}"
        os.mkdir(tmp)
        fault_point("tree-created")
        made: set[str] = set()
        placed: list[tuple[TreeFile, Path]] = []
        for f in sorted(files, key=lambda f: f.rel):
            parent = os.path.dirname(f.rel)
            if parent and parent not in made:
                os.makedirs(tmp / parent, exist_ok=True)
                made.add(parent)
            dest = tmp / f.rel
            old = self.reusable(current, f, recorded)
            if old is not None:
                try:
                    os.link(old, dest)
                    stats.kept += 1
                    continue
                except OSError:
                    pass
            placed.append((f, dest))
        for f in self._place_all(placed, served_mode):
            stats.written.append(f.rel)
            fault_point("file-written")
        fault_point("files-written")
        seq = max([int(n[:6]) for n in self.complete_trees()] + [0]) + 1
        name = f"{seq:06d}-{digest[:12]}"
        os.rename(tmp, self.trees / name)
        stats.tree = name
        fault_point("tree-complete")
        self._swap(name, kind)
        fault_point("swapped")
        for old_name in self.complete_trees():
            if old_name != name:
                _remove(self.trees / old_name)
        fault_point("old-removed")
        return stats

    def _swap(self, name: str, kind: str) -> None:
        """Point ``<dir>`` at ``name`` with one rename; migrate a pre-symlink directory."""
        tmp_link = self.base / f".link-{self.dir_name}-{secrets.token_hex(6)}"
        os.symlink(f"{TREES}/{self.dir_name}/{name}", tmp_link)
        fault_point("link-created")
        if kind in ("directory", "empty"):
            # A real directory cannot be renamed over; swap the two atomically
            # (Linux renameat2), else move it aside first (a brief window, once).
            if _exchange(tmp_link, self.link):
                _remove(tmp_link)  # now the old directory
                return
            os.rename(self.link, self.trees / "000000-migrated")
            fault_point("moved-aside")
        os.replace(tmp_link, self.link)

"""Read the GPUs of a host from its KFD topology: the rules and messages ``which-index`` and the checker share.

The kernel's KFD topology (``/sys/class/kfd/kfd/topology/nodes/*/properties``)
needs no ROCm install. Standard library only: the ``rocm_torch`` checker that
ships inside every index's metapackage carries a copy of this module, made at
build time, so ``rocm-bake which-index`` and ``python -m rocm_torch`` read a
host the same way and say the same thing about it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import NamedTuple

from rocm_bake.errors import RocmBakeError

KFD_NODES = Path("sys/class/kfd/kfd/topology/nodes")
#: A KFD ``properties`` file is a few dozen short lines; a bigger one is not one.
MAX_PROPERTIES_BYTES = 64 << 10
#: Control characters no sysfs text file holds (tab, newline and carriage return are fine).
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_GFX = re.compile(r"^gfx(\d{1,2})([0-9a-f])([0-9a-f])$")


class KfdGpu(NamedTuple):
    """One GPU node: its processor name, its node directory's name and the marketing name KFD gives."""

    gfx: str
    node: str
    marketing_name: str | None


def gfx_from_target_version(value: int) -> str:
    """``gfx_target_version`` (major*10000 + minor*100 + stepping) → ``gfxNNN``.

    Minor and stepping print as hex digits: 90010 → gfx90a, 110501 → gfx1151.
    """
    if value <= 0:
        raise ValueError(f"gfx_target_version {value} is not a GPU")
    if value >= 100 * 10000:
        raise ValueError(f"gfx_target_version {str(value)[:20]}: a major version above 99 is no AMDGPU processor")
    major, minor, stepping = value // 10000, (value // 100) % 100, value % 100
    if minor > 15 or stepping > 15:
        raise ValueError(f"gfx_target_version {value}: minor {minor} / stepping {stepping} exceed one hex digit")
    return f"gfx{major}{minor:x}{stepping:x}"


def target_version_of(gfx: str) -> int:
    """The inverse: ``gfx90a`` → 90010 (what KFD writes for that processor)."""
    match = _GFX.match(gfx)
    if match is None:
        raise ValueError(f"{gfx!r} is not a gfx processor name with a KFD target version")
    return int(match.group(1)) * 10000 + int(match.group(2), 16) * 100 + int(match.group(3), 16)


def _kind(path: Path) -> int | str:
    """``path``'s file type (``stat.S_IFMT``, symlinks followed), or why it has none, in words.

    ``is_file()``/``is_dir()`` say False for a missing file, a symlink loop
    and an unreadable one alike; the error must say which it is.
    """
    try:
        return stat.S_IFMT(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):  # nothing there (a file where a parent directory would be)
        return "missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        return f"cannot be read: {exc.strerror or exc}"


def _read_sysfs_text(path: Path) -> str:
    """A small sysfs text file, or a clear error naming it.

    A binary or oversized file where KFD keeps ``key value`` lines is not a
    machine without a GPU: reporting "no AMD GPU found" would send the user
    to the wrong fix (and the wrong index).
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_PROPERTIES_BYTES + 1)
    except OSError as exc:
        raise RocmBakeError(f"{path}: cannot read the KFD topology file: {exc.strerror or exc}") from None
    if len(data) > MAX_PROPERTIES_BYTES:
        raise RocmBakeError(f"{path}: larger than {MAX_PROPERTIES_BYTES >> 10} KiB, not a KFD topology file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RocmBakeError(
            f"{path}: binary data (not UTF-8 at byte {exc.start}), not a KFD topology file of 'key value' lines"
        ) from None
    if _BINARY.search(text):
        raise RocmBakeError(f"{path}: binary data (control characters), not a KFD topology file of 'key value' lines")
    return text


def _target_versions(text: str) -> list[str]:
    """Every ``gfx_target_version`` value of a properties file (a well-formed node has exactly one)."""
    return [parts[1].strip() for parts in (line.split(None, 1) for line in text.splitlines())
            if len(parts) == 2 and parts[0] == "gfx_target_version"]


def _read_node(node: Path) -> KfdGpu | None:
    """The GPU of one KFD node, None for a CPU node; a node that cannot be read raises, naming why."""
    kind = _kind(node)
    if kind != stat.S_IFDIR:
        raise RocmBakeError(f"{node}: {kind if isinstance(kind, str) else 'not a directory'}, not a KFD node")
    props_file = node / "properties"
    kind = _kind(props_file)
    if kind == "missing":
        raise RocmBakeError(f"{props_file}: missing (every KFD node has one)")
    if kind != stat.S_IFREG:  # a FIFO or a device would block or never end
        raise RocmBakeError(f"{props_file}: {kind if isinstance(kind, str) else 'not a regular file'}, "
                            f"not a KFD topology file")
    versions = _target_versions(_read_sysfs_text(props_file))
    if not versions:
        raise RocmBakeError(f"{props_file}: no gfx_target_version line")
    if len(versions) > 1:
        raise RocmBakeError(f"{props_file}: gfx_target_version appears {len(versions)} times "
                            f"({', '.join(v[:20] for v in versions[:4])}): which one is the GPU is not known")
    raw = versions[0]
    try:
        version = int(raw)
    except ValueError:
        raise RocmBakeError(f"{props_file}: gfx_target_version {raw[:40]!r} is not an integer") from None
    if version == 0:
        return None
    try:
        gfx = gfx_from_target_version(version)
    except ValueError as exc:
        raise RocmBakeError(f"{props_file}: {exc}") from None
    name_file = node / "name"
    name = _read_sysfs_text(name_file).strip() if name_file.is_file() else None
    return KfdGpu(gfx=gfx, node=node.name, marketing_name=name or None)


def _is_node_number(name: str) -> bool:
    """A KFD node directory's name: a decimal number as the kernel prints it (``0``, ``12``; not ``01``)."""
    return name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0"))


def read_kfd(sysfs_root: Path) -> list[KfdGpu] | None:
    """GPUs in the KFD topology under ``sysfs_root``; None when the tree is absent.

    CPU nodes carry ``gfx_target_version 0`` and are skipped (an APU shows
    one CPU node and one GPU node). The GPUs come in node-number order,
    numerically (node 10 after node 9): that is the order the ROCm runtime
    numbers devices in, so a GPU's place in the list is its device ordinal.
    A node that cannot be read is never dropped silently: every such
    node is named, in one error, since choosing an index without it could
    pick the wrong one. So is an entry the kernel would not write (a name
    that is not a node number): counting it as a GPU would shift every
    ordinal after it, and skipping it would hide a tree that is not KFD's.
    """
    nodes_dir = sysfs_root / KFD_NODES
    kind = _kind(nodes_dir)
    if kind == "missing":
        return None
    if kind != stat.S_IFDIR:  # a loop or a file there is a broken copy, not a host without the driver
        raise RocmBakeError(f"{nodes_dir}: {kind if isinstance(kind, str) else 'not a directory'}, "
                            f"not a KFD topology")
    gpus: list[KfdGpu] = []
    try:
        entries = list(nodes_dir.iterdir())
    except OSError as exc:
        raise RocmBakeError(f"{nodes_dir}: cannot list the KFD topology: {exc.strerror or exc}") from None
    problems = [f"{entry}: not a KFD node (the kernel names its nodes 0, 1, 2, ...)"
                for entry in sorted(entries) if not _is_node_number(entry.name)]
    nodes = sorted((entry for entry in entries if _is_node_number(entry.name)), key=lambda p: int(p.name))
    for node in nodes:
        try:
            gpu = _read_node(node)
        except RocmBakeError as exc:
            problems.append(str(exc))
            continue
        if gpu is not None:
            gpus.append(gpu)
    if problems:
        raise RocmBakeError(f"cannot read {len(problems)} KFD node(s), so the GPUs of this host are not known: "
                            + "; ".join(problems))
    return gpus


def check_sysfs_root(sysfs_root: Path) -> None:
    """Refuse a ``--sysfs-root`` that is not a directory (a typo is not a host without GPUs)."""
    if not sysfs_root.is_dir():
        raise RocmBakeError(f"{sysfs_root}: not a directory (expected the root holding sys/class/kfd, default /)")


def no_gpu_message(looked_at: list[str]) -> str:
    """What to say when nothing that was looked at shows an AMD GPU."""
    return f"no AMD GPU found (looked at {' and '.join(looked_at)})"


#: Where to go from "no GPU here", in both tools' words (the option is the same in both).
RUN_WHERE_THE_GPUS_ARE = (
    "run it on the host that has the GPUs; in a container, give it the host's /sys (read-only), or copy "
    "the host's /sys/class/kfd tree here and pass its root: {command} --sysfs-root DIR"
)

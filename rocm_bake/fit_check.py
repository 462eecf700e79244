"""``python -m rocm_torch``: do the wheels installed from one index fit this machine's GPUs?

A wheel built for the wrong GPU installs fine and fails at the first kernel
(``hipErrorInvalidImage``). This checker ships inside every index's
``rocm-torch`` metapackage (``rocm_bake.index.checker_copy`` copies it and the
modules it needs in at build time), so the people who installed the wheels can
ask without a rocm-bake checkout. It reports, in a few lines:

* the index's arch set and where it came from (recorded when it was built);
* this host's GPUs, read from KFD with the rules and messages of
  ``rocm-bake which-index`` (``rocm_bake.gpu.kfd``);
* per distribution the metapackage pinned: whether its installed files still
  hash to its RECORD, and which offload targets its ELF files carry (the
  reader of ``rocm-bake wheel arches``, ``rocm_bake.offload.scan``);
* the verdict. Exit 0: every GPU is covered. Exit 1: one is not, or the
  installed files are not what the index served (the fix is an install line).
  Exit 2: it cannot tell (no KFD, an unreadable node, device code it cannot
  read). Each with its reason in one line.

Standard library only, never imported by anything else (importing torch never
runs it), never writes and never opens a socket: the metapackage builder
refuses to copy a module that imports one.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu.kfd import KFD_NODES, RUN_WHERE_THE_GPUS_ARE, KfdGpu, check_sysfs_root, no_gpu_message, read_kfd
from rocm_bake.install_line import BASE_PLACEHOLDER, METAPACKAGE, index_url, locked_line
from rocm_bake.offload.scan import scan_file
from rocm_bake.offload.targets import covers

#: Exit codes: every GPU covered; a GPU not covered (or an install that is not the index's); cannot tell.
FITS, DOES_NOT_FIT, CANNOT_TELL = 0, 1, 2
VERDICTS = {FITS: "ok", DOES_NOT_FIT: "does-not-fit", CANNOT_TELL: "cannot-tell"}
#: RECORD hash algorithms a wheel may use (sha256 or stronger).
RECORD_HASHES = ("sha256", "sha384", "sha512")
_CHUNK = 1 << 20


class Built(NamedTuple):
    """What the index recorded in its metapackage when it was built (``rocm_torch/index.json``)."""

    arches: list[str]
    dir_name: str
    version: str
    pins: dict[str, str]
    #: Where the index is served (``<base>/<dir_name>/``); None when the build was not told.
    index_base: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Built:
        return cls(list(data["arches"]), data["dir_name"], data["version"], dict(data["pins"]),
                   data.get("index_base"))

    @property
    def base(self) -> str:
        return self.index_base or BASE_PLACEHOLDER

    def where(self) -> str:
        return index_url(self.index_base, self.dir_name) if self.index_base else (
            f"{self.dir_name} (its URL was not recorded: the index was built without --index-base)")


class Installed(NamedTuple):
    """One pinned distribution as installed: what differs from the index, and its device code."""

    name: str
    pinned: str
    version: str | None
    files: int
    problems: list[str]
    targets: list[str]
    unreadable: list[str]

    def line(self) -> str:
        if self.version is None:
            return f"{self.name}: not installed (the index pins {self.pinned})"
        code = (f"code objects for {', '.join(self.targets)}" if self.targets
                else "device code unreadable" if self.unreadable else "no device code")
        state = "; ".join(self.problems) if self.problems else f"{self.files} files hash to RECORD"
        return f"{self.name} {self.version}: {state}; {code}"


def _digest(path: Path, algo: str) -> str:
    digest = hashlib.new(algo)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def check_installed(name: str, pinned: str) -> Installed:
    """Hash every RECORD-listed file of ``name`` and read the offload targets of its ELF files."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return Installed(name, pinned, None, 0, [f"not installed (the index pins {pinned})"], [], [])
    problems = [] if dist.version.lower() == pinned.lower() else [f"installed {dist.version}, the index pins {pinned}"]
    files = dist.files
    if files is None:
        return Installed(name, pinned, dist.version, 0, problems + ["no RECORD: its files cannot be checked"], [], [])
    targets: set[str] = set()
    unreadable: list[str] = []
    hashed = 0
    for file in files:
        if file.hash is None:  # RECORD itself, and the bytecode an installer compiled
            continue
        path = Path(str(file.locate()))
        if file.hash.mode not in RECORD_HASHES:
            problems.append(f"{file} has no sha256 (or stronger) hash in RECORD")
            continue
        try:
            if _digest(path, file.hash.mode) != file.hash.value.rstrip("="):
                problems.append(f"{file} does not hash to its RECORD entry (changed after install)")
                continue
            sources = scan_file(path, name, str(file))
        except FileNotFoundError:
            problems.append(f"{file} is missing")
            continue
        except OSError as exc:
            problems.append(f"{file} cannot be read: {exc.strerror or exc}")
            continue
        except RocmBakeError as exc:
            unreadable.append(str(exc))
            continue
        hashed += 1
        for source in sources or ():
            targets.update(source["targets"])
            if not source["readable"]:
                unreadable.append(f"{file}: {source['note'] or 'targets unknown'}")
    return Installed(name, pinned, dist.version, hashed, problems, sorted(targets), unreadable)


class Report(NamedTuple):
    built: Built
    looked_at: str
    gpus: list[KfdGpu]
    installed: list[Installed]
    exit: int
    reason: str
    #: What to do about it: install lines, or where to run the check instead.
    next_steps: list[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "index": {"arches": self.built.arches, "dir_name": self.built.dir_name, "base": self.built.index_base,
                      METAPACKAGE: self.built.version},
            "looked_at": self.looked_at,
            "gpus": [g._asdict() for g in self.gpus],
            "distributions": [i._asdict() for i in self.installed],
            "verdict": VERDICTS[self.exit], "exit": self.exit, "reason": self.reason, "next_steps": self.next_steps,
        }

    def text(self) -> str:
        built = self.built
        lines = [f"index: {built.dir_name} (arches {', '.join(built.arches)}), {METAPACKAGE} {built.version}, "
                 f"from {built.where()}"]
        if self.gpus:
            lines.append("GPUs: " + ", ".join(f"{g.gfx} (kfd node {g.node})" for g in self.gpus))
        lines += [f"  {i.line()}" for i in self.installed]
        lines.append(f"{VERDICTS[self.exit]}: {self.reason}")
        lines += [f"  {line}" for line in self.next_steps]
        return "\n".join(lines)


def _cannot_tell(built: Built, looked_at: str, reason: str, steps: list[str]) -> Report:
    return Report(built, looked_at, [], [], CANNOT_TELL, reason, steps)


def check(built: Built, sysfs_root: Path) -> Report:
    """The whole check: host GPUs, then every pinned distribution, then the verdict."""
    looked_at = str(sysfs_root / KFD_NODES)
    where_next = [RUN_WHERE_THE_GPUS_ARE.format(command="python -m rocm_torch")]
    try:
        check_sysfs_root(sysfs_root)
        gpus = read_kfd(sysfs_root)
    except RocmBakeError as exc:
        return _cannot_tell(built, looked_at, str(exc), [])
    if not gpus:
        return _cannot_tell(built, looked_at, no_gpu_message([looked_at]), where_next)
    installed = [check_installed(name, version) for name, version in sorted(built.pins.items())]
    host = sorted({g.gfx for g in gpus})
    reasons, steps = _uncovered(built, host)
    more_reasons, more_steps = _not_as_served(built, installed, [a for a in host if a in built.arches])
    reasons, steps = reasons + more_reasons, steps + more_steps
    unknown = [u for i in installed for u in i.unreadable]
    if reasons:
        code, reason = DOES_NOT_FIT, "; ".join(reasons)
    elif unknown:
        code, reason = CANNOT_TELL, f"device code it cannot read: {'; '.join(unknown)}"
    else:
        code, reason = FITS, f"every GPU here ({', '.join(host)}) is covered by this install"
    return Report(built, looked_at, gpus, installed, code, reason, steps)


def _uncovered(built: Built, host: list[str]) -> tuple[list[str], list[str]]:
    """The host's arches the index does not build, and the hash-locked line of each one's own index."""
    uncovered = [a for a in host if a not in built.arches]
    if not uncovered:
        return [], []
    reason = (f"{', '.join(uncovered)} {'is' if len(uncovered) == 1 else 'are'} not covered by the "
              f"{built.dir_name} index (it carries code for {', '.join(built.arches)})")
    steps = [f"for {a}: {locked_line(built.base, a)}" for a in uncovered]
    if len(host) > 1:
        steps.append(f"this host has GPUs of {len(host)} arches ({', '.join(host)}): one environment holds one "
                     f"index's wheels, so use a fat-build index that holds all of them, or one environment per arch")
    return [reason], steps


def _not_as_served(built: Built, installed: list[Installed], covered: list[str]) -> tuple[list[str], list[str]]:
    """Installed files that differ from RECORD, and code objects for none of the covered GPUs: reinstall."""
    reasons = []
    broken = [f"{i.name}: {i.problems[0]}" for i in installed if i.problems]
    if broken:
        reasons.append(f"the installed files are not what the index served ({'; '.join(broken)})")
    wrong = [f"{i.name} carries code objects for {', '.join(i.targets)}, none for {a}"
             for i in installed if i.targets for a in covered if not any(covers(t, a) for t in i.targets)]
    if wrong:
        reasons.append(f"{'; '.join(wrong)}: not the {built.dir_name} index's wheels")
    if not reasons:
        return [], []
    return reasons, [f"reinstall from this index: {locked_line(built.base, built.dir_name)} --force-reinstall"]


def main(argv: Sequence[str], built_file: Path) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rocm_torch",
        description="Check that the wheels installed from this index fit this machine's GPUs. "
                    "Exit 0: every GPU is covered; 1: one is not (an install line follows); 2: cannot tell.",
    )
    parser.add_argument("command", nargs="?", choices=["check"], default="check", help="the check (the default)")
    parser.add_argument("--sysfs-root", type=Path, default=Path("/"),
                        help="the root holding sys/class/kfd (default /): a copy of a GPU host's tree")
    parser.add_argument("--json", action="store_true", help="print the report as JSON, for scripts")
    args = parser.parse_args(list(argv))
    try:
        built = Built.from_json(json.loads(built_file.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"{built_file}: the index's record in this metapackage cannot be read ({exc})", file=sys.stderr)
        return CANNOT_TELL
    report = check(built, args.sysfs_root)
    print(json.dumps(report.as_json(), indent=2) if args.json else report.text())
    return report.exit

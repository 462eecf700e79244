"""Which index is this host's: detected GPUs mapped to the configured indexes (``rocm-bake which-index``).

"Installing through the index is always correct, because the index path and
the rocm-torch metapackage both carry the architecture. Downloading a
release asset by hand is not." This closes the remaining gap: knowing
which index is yours — including on a host with GPUs of several arches,
where two per-arch installs would conflict (their wheel filenames are the
same string for every arch) and only a fat build covers every card.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rocm_bake.archset import Arch, ArchSet, sorted_arches
from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu import Detection, Gpu, RocminfoRunner, detect_gpus, run_rocminfo
from rocm_bake.gpu.kfd import RUN_WHERE_THE_GPUS_ARE, no_gpu_message
from rocm_bake.offload import GENERIC_COVERS

#: The published gh-pages index (wheels live in per-arch releases).
PYPI = "https://pypi.org/simple"
#: Stacks named ``demo-*`` build stand-in wheels into local indexes; they never publish to the public URL.
DEMO_PREFIX = "demo-"


class Choice(BaseModel):
    """The index for one distinct GPU arch, or why there is none."""

    gpu_arch: str
    gpus: list[str]
    #: ROCm's device ordinals of these GPUs (the order the runtime enumerates them: KFD node order).
    devices: list[int] = []
    index_arch: Arch | None
    native: bool
    reason: str
    #: The preferred install line (the hash-locked one when there is a lock); ``install_lines`` holds them all.
    install: str | None
    install_lines: list[str] = []
    env: dict[str, str] = {}
    #: On a mixed host with no covering index: the environment that shows a process only these GPUs
    #: (``ROCR_VISIBLE_DEVICES``, the runtime's own filter, seen by HIP and everything above it).
    pin: dict[str, str] = {}
    #: The same pin at the HIP level; an alternative to ``pin``, never set together with it.
    pin_hip: dict[str, str] = {}


class WhichIndex(BaseModel):
    detection: Detection
    choices: list[Choice]
    multi_arch: bool
    message: str
    #: Every configured index considered (non-demo stacks), as index directory names.
    configured: list[str] = []
    #: The configured index (a fat stack) whose arches cover every GPU here, when there is one.
    covering_index: str | None = None
    install: str | None = None
    install_lines: list[str] = []
    #: The index base the lines hang off; the placeholder when none was given (then ``base_hint`` says how).
    index_base: str = ""
    base_hint: str | None = None
    #: With no GPU found: what to do instead (run it where the GPUs are, or pick an index by hand).
    next_steps: list[str] = []


def install_lines(index_base: str, dir_name: str) -> list[str]:
    """The index's install lines (``rocm_bake.install_line`` writes them), hash-locked first.

    ``dir_name`` is an index directory name: ``gfx950``, or a fat build's
    ``gfx950-gfx1201``, whose extra is ``device-gfx950-gfx1201``. The pinned
    pip and uv lines need the metapackage's version, known only for an index
    on this host (a ``file://`` base); a remote index gets the hash-locked line,
    which pins every version through its lock.
    """
    from rocm_bake.install_line import file_index_dir, lines_for, local_index_facts

    local = file_index_dir(index_base, dir_name)
    if local is None or not local.is_dir():  # not on this host: its lock pins what its version would
        return lines_for(index_base, dir_name, None)
    version, locked = local_index_facts(local)
    return lines_for(index_base, dir_name, version, locked)


def configured_indexes(stacks_dir: Path | None = None) -> list[ArchSet]:
    """Every configured index's arch set, arches in the stack's declared order (``stacks/Pulumi.*.yaml``).

    A stack's ``rocm-bake:pytorchRocmArch`` (``gfx950;gfx1201`` for a fat
    stack), or its name when the key is absent, as everywhere else. Demo
    stacks (``demo-*``) are left out: they build stand-in wheels into local
    indexes and are never published at the public URL this command prints.
    The stack file's value is an edge: it is parsed into an ``ArchSet`` here, once.
    """
    from rocm_bake.config import STACKS_DIR, read_stack_file

    root = stacks_dir or STACKS_DIR
    paths = sorted(root.glob("Pulumi.*.yaml"))
    if not paths:
        raise RocmBakeError(f"{root}: no stacks/Pulumi.*.yaml here; which-index reads the configured indexes "
                            f"from a rocm-bake checkout's stack files")
    found: list[ArchSet] = []
    for path in paths:
        stack = path.name[len("Pulumi."):-len(".yaml")]
        if stack.startswith(DEMO_PREFIX):
            continue
        value = read_stack_file(stack, root).get("rocm-bake:pytorchRocmArch") or stack
        try:
            arch_set = ArchSet(str(value))
        except RocmBakeError as exc:
            raise RocmBakeError(f"{path}: rocm-bake:pytorchRocmArch {str(value)[:80]!r}: {exc}") from None
        if arch_set not in found:
            found.append(arch_set)
    return sorted(found, key=lambda s: (len(s.arches), [(len(a), a) for a in s.arches]))


def covering(host_arches: set[str], configured: list[ArchSet]) -> ArchSet | None:
    """The smallest configured fat index whose arches include every arch on this host."""
    candidates = [s for s in configured if s.is_fat and host_arches <= set(s.arches)]
    return min(candidates, key=lambda s: len(s.arches)) if candidates else None


def pin_env(devices: list[int]) -> dict[str, str]:
    """Show a process only these GPUs, at the ROCm runtime (ROCr) level: HIP and everything above see only them."""
    return {"ROCR_VISIBLE_DEVICES": ",".join(str(i) for i in devices)}


def pin_hip_env(devices: list[int]) -> dict[str, str]:
    """The same at the HIP level. Not combined with ``pin_env``: HIP numbers only the GPUs ROCr leaves visible,
    so ``ROCR_VISIBLE_DEVICES=1 HIP_VISIBLE_DEVICES=1`` would show a process no GPU at all."""
    return {"HIP_VISIBLE_DEVICES": ",".join(str(i) for i in devices)}


_GFX = re.compile(r"^gfx(\d+)([0-9a-f])([0-9a-f])$")


def gfx_version(arch: str) -> tuple[int, int, int] | None:
    """(major, minor, stepping) of a processor name: gfx90a → (9, 0, 10)."""
    match = _GFX.match(arch)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2), 16), int(match.group(3), 16)


def _generic_of(arch: str) -> str | None:
    for generic, members in GENERIC_COVERS.items():
        if arch in members:
            return generic
    return None


def nearest_compatible(gpu_arch: str, supported: list[Arch]) -> Arch | None:
    """A built arch whose ISA matches ``gpu_arch``'s closely enough to name, or None.

    Conservative on purpose ("never guesses across families"): the same gfx
    major.minor (only the stepping differs) AND the same LLVM generic
    processor. So gfx1200 → gfx1201 and gfx1150 → gfx1151, but never
    gfx942 → gfx950 (9.4 vs 9.5) nor gfx1100 → gfx1151.
    """
    mine, generic = gfx_version(gpu_arch), _generic_of(gpu_arch)
    if mine is None or generic is None:
        return None
    candidates = []
    for arch in supported:
        theirs = gfx_version(arch)
        if theirs and theirs[:2] == mine[:2] and _generic_of(arch) == generic and arch != gpu_arch:
            candidates.append((abs(theirs[2] - mine[2]), arch))
    return min(candidates)[1] if candidates else None


def _lines(index_base: str, dir_name: str) -> dict[str, Any]:
    """``install`` (the preferred line) and ``install_lines`` (every line) of one index, as model fields."""
    lines = install_lines(index_base, dir_name)
    return {"install": lines[0] if lines else None, "install_lines": lines}


def choose(gpu_arch: str, gpus: list[Gpu], supported: list[Arch], index_base: str) -> Choice:
    """The index for the GPUs of one detected processor (``gpu_arch``: KFD's name, which may be an arch
    this project does not know, so a plain ``str``), among the single-arch indexes ``supported``."""
    where = [f"{g.source} {g.node}" for g in gpus]
    native = next((arch for arch in supported if arch == gpu_arch), None)
    if native is not None:
        return Choice(
            gpu_arch=gpu_arch, gpus=where, index_arch=native, native=True,
            reason=f"{gpu_arch} is built by this project", **_lines(index_base, native),
        )
    near = nearest_compatible(gpu_arch, supported)
    if near is None:
        return Choice(
            gpu_arch=gpu_arch, gpus=where, index_arch=None, native=False, install=None,
            reason=(
                f"{gpu_arch} is not built by this project (it builds {', '.join(supported) or 'no single arch'}) "
                f"and no built arch is ISA-compatible with it: no compatible index"
            ),
        )
    major, minor, stepping = gfx_version(near)  # type: ignore[misc]
    override = f"{major}.{minor}.{stepping}"
    return Choice(
        gpu_arch=gpu_arch, gpus=where, index_arch=near, native=False,
        **_lines(index_base, near),
        env={"HSA_OVERRIDE_GFX_VERSION": override},
        reason=(
            f"{gpu_arch} is not built by this project; the nearest ISA-compatible arch is {near} "
            f"(same gfx{major}.{minor} family, both {_generic_of(near)}), but its code objects are "
            f"compiled for {near}: the ROCm runtime loads them on {gpu_arch} only with "
            f"HSA_OVERRIDE_GFX_VERSION={override}, which is not a supported configuration"
        ),
    )


def which_index(detection: Detection, configured: list[ArchSet], index_base: str) -> WhichIndex:
    """Map detected GPUs to indexes: one fat index that covers them all, else one per distinct arch.

    ``configured`` is every configured index's arch set (one arch, or a fat
    stack's in declared order). A host whose GPUs are all of one arch gets
    that arch's index; a fat index is chosen when the host has several arches
    (or its one arch has no index of its own) and the fat build covers every one.
    """
    supported = sorted((s.arches[0] for s in configured if not s.is_fat), key=lambda a: (len(a), a))
    by_arch: dict[str, list[Gpu]] = {}
    devices: dict[str, list[int]] = {}
    for ordinal, gpu in enumerate(detection.gpus):
        by_arch.setdefault(gpu.gfx, []).append(gpu)
        devices.setdefault(gpu.gfx, []).append(ordinal)
    host = sorted_arches(list(by_arch))
    choices = [choose(a, by_arch[a], supported, index_base) for a in host]
    for choice in choices:
        choice.devices = devices[choice.gpu_arch]
    names = [s.dir_name for s in configured]
    if not detection.gpus:
        return WhichIndex(detection=detection, choices=choices, multi_arch=False, configured=names,
                          message=no_gpu_message(detection.looked_at),
                          next_steps=no_gpu_next_steps(names, index_base))
    multi = len(host) > 1
    fat = covering(set(host), configured)
    if fat is not None and (multi or not choices[0].native):
        name = fat.dir_name
        what = (f"GPUs of {len(host)} arches ({', '.join(host)})" if multi
                else f"{host[0]} GPUs, which have no index of their own")
        return WhichIndex(
            detection=detection, choices=choices, multi_arch=multi, configured=names, covering_index=name,
            **_lines(index_base, name),
            message=(f"this host has {what}; the fat-build index {name} carries code objects for "
                     f"{', '.join(fat.arches)} in one set of wheels: install that one"),
        )
    if not multi:
        usable = choices[0].index_arch
        message = f"index for this host: {usable}" if usable else "no compatible index for the GPU(s) found"
        return WhichIndex(detection=detection, choices=choices, multi_arch=False, configured=names, message=message)
    for choice in choices:
        if choice.install:
            choice.pin = pin_env(choice.devices)
            choice.pin_hip = pin_hip_env(choice.devices)
    message = (
        f"no configured index covers every GPU here: this host has GPUs of {len(host)} different arches "
        f"({', '.join(host)}) and no configured fat-build index holds all of them. One environment can hold "
        f"only one arch's wheels (their filenames are the same for every arch), so install each arch into its "
        f"own environment and run each process pinned to that arch's GPUs with the variable shown"
    )
    return WhichIndex(detection=detection, choices=choices, multi_arch=True, configured=names, message=message)


def no_gpu_next_steps(configured: list[str], index_base: str) -> list[str]:
    """Where to go from "no GPU here": the GPU host itself, a copied KFD tree, or the arch list by hand."""
    from rocm_bake.install_line import lines_for

    return [
        RUN_WHERE_THE_GPUS_ARE.format(command="rocm-bake which-index"),
        "or pick the index yourself: on the GPU host, rocminfo | grep -o 'gfx[0-9a-f]*' | sort -u names each "
        f"GPU; the configured indexes are {', '.join(configured) or 'none'} (a fat build's name lists every arch "
        "it covers: use the one that covers all of your GPUs), installed with",
        *(f"  {line}" for line in lines_for(index_base, "ARCH", None)),
        f"every index, with its size and its pip and uv lines: {index_base}/",
    ]


def check_index_base(value: str) -> str:
    """https, file://, or plain http only to loopback: an install line over plain http off this host is
    one anyone on the path can answer with other wheels."""
    from urllib.parse import urlsplit

    from rocm_bake.loopback import is_loopback

    base = value.rstrip("/")
    if not re.match(r"^(https?|file)://\S+$", base):
        raise RocmBakeError("--index-base: expected an https://, file:// or loopback http:// URL")
    parts = urlsplit(base)
    if parts.scheme == "http" and not is_loopback(parts.hostname or ""):
        raise RocmBakeError("--index-base: plain http is refused off loopback (the wheels could be swapped on the "
                            "way); use https, or http://127.0.0.1 for a local server")
    return base


#: Says how to give the base when the lines carry the placeholder.
BASE_HINT = ("{placeholder} is where your team serves its indexes: give it with --index-base URL (e.g. "
             "https://OWNER.github.io/REPO/data/wheels), or set the stack's publish settings "
             "(rocm-bake:githubRepo OWNER/NAME in stacks/Pulumi.<stack>.yaml) and it is that repository's Pages site")


def stack_index_base(stacks_dir: Path | None = None) -> str | None:
    """The Pages base of the one repository the (non-demo) stacks publish to (``rocm-bake:githubRepo``); None
    when no stack names one, or they name several (then no single base is theirs)."""
    from rocm_bake.config import STACKS_DIR, read_stack_file
    from rocm_bake.publish.origin import pages_index_base

    root = stacks_dir or STACKS_DIR
    repos = set()
    for path in sorted(root.glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi."):-len(".yaml")]
        repo = None if stack.startswith(DEMO_PREFIX) else read_stack_file(stack, root).get("rocm-bake:githubRepo")
        if isinstance(repo, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
            repos.add(repo)
    return pages_index_base(repos.pop()) if len(repos) == 1 else None


def choose_base(given: str | None, stacks_dir: Path | None = None) -> tuple[str, str | None]:
    """(the index base, how to give one when it is the placeholder): ``--index-base``, else the stacks'
    publish repository, else the GitHub ``origin``'s Pages site, else ``<your index base>``."""
    from rocm_bake.install_line import BASE_PLACEHOLDER
    from rocm_bake.publish.origin import origin_github_repo, pages_index_base

    if given is not None:
        return check_index_base(given), None
    from_stacks = stack_index_base(stacks_dir)
    if from_stacks is not None:
        return from_stacks, None
    repo = origin_github_repo()
    if repo is not None:
        return pages_index_base(repo), None
    return BASE_PLACEHOLDER, BASE_HINT.format(placeholder=BASE_PLACEHOLDER)


def run_which_index(
    sysfs_root: Path, index_base: str | None, rocminfo: RocminfoRunner = run_rocminfo,
    stacks_dir: Path | None = None,
) -> WhichIndex:
    base, hint = choose_base(index_base, stacks_dir)
    result = which_index(detect_gpus(sysfs_root, rocminfo), configured_indexes(stacks_dir), base)
    result.index_base, result.base_hint = base, hint
    return result


def _assignments(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items())


def _index_named(dir_name: str) -> str:
    """The arch set, the index directory and the extra: what a line's index is, with or without a base."""
    arch = ArchSet.from_dir_name(dir_name)
    arches = ", ".join(arch.arches) if arch is not None else dir_name
    return f"index {dir_name}/ (arches {arches}; extra {arch.extra if arch is not None else 'device-' + dir_name})"


def _line_block(lines: list[str], indent: str = "  ") -> list[str]:
    from rocm_bake.install_line import with_hint

    return [f"{indent}{line}" for line in with_hint(lines)]


def render(result: WhichIndex) -> str:
    lines = [result.message]
    if result.next_steps:
        steps = [f"    {step.strip()}" if step.startswith(" ") else f"  - {step}" for step in result.next_steps]
        return "\n".join([*lines, "", "Next:", *steps, *_base_hint(result)])
    if result.covering_index:
        gpus = ", ".join(f"{c.gpu_arch} ({', '.join(c.gpus)})" for c in result.choices)
        return "\n".join([*lines, f"GPUs: {gpus}", "", f"  {_index_named(result.covering_index)}",
                          *_line_block(result.install_lines), *_base_hint(result)])
    for choice in result.choices:
        lines.append("")
        lines.append(f"{choice.gpu_arch} ({', '.join(choice.gpus)}): {choice.reason}")
        if choice.install and choice.index_arch is not None:
            lines.append(f"  {_index_named(ArchSet._trusted(choice.index_arch).dir_name)}")
            lines += _line_block(choice.install_lines)
            if choice.env:
                lines.append(f"  then run with: export {_assignments(choice.env)}")
            if choice.pin:
                which = "device" if len(choice.devices) == 1 else "devices"
                lines.append(f"  run its processes on {which} {','.join(map(str, choice.devices))} only: "
                             f"{_assignments(choice.pin)} python ...")
                lines.append(f"    (or {_assignments(choice.pin_hip)} python ...)")
    if any(c.pin for c in result.choices):
        lines += ["", "Set one of the two variables, not both: HIP numbers only the GPUs ROCR_VISIBLE_DEVICES "
                      "leaves visible, so the same ordinal in both can leave a process with no GPU."]
    return "\n".join([*lines, *_base_hint(result)])


def _base_hint(result: WhichIndex) -> list[str]:
    return ["", result.base_hint] if result.base_hint else []

"""Which index is this host's: detected GPUs mapped to the configured indexes (``rocm-bake which-index``).

"Installing through the index is always correct, because the index path and
the rocm-torch metapackage both carry the architecture. Downloading a
release asset by hand is not." This closes the remaining gap: knowing
which index is yours.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from rocm_bake.arch import sorted_arches
from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu import Detection, Gpu, RocminfoRunner, detect_gpus, run_rocminfo
from rocm_bake.offload import GENERIC_COVERS

#: The published gh-pages index (wheels live in per-arch releases).
DEFAULT_INDEX_BASE = "https://sbates130272.github.io/rocm-bake/data/wheels"
PYPI = "https://pypi.org/simple"


class Choice(BaseModel):
    """The index for one distinct GPU arch, or why there is none."""

    gpu_arch: str
    gpus: list[str]
    index_arch: str | None
    native: bool
    reason: str
    install: str | None
    env: dict[str, str] = {}
    #: On a mixed host with no covering index: the environment that shows a process only these GPUs.
    pin: dict[str, str] = {}


class WhichIndex(BaseModel):
    detection: Detection
    choices: list[Choice]
    multi_arch: bool
    message: str
    #: The configured index (a fat stack) whose arches cover every GPU here, when there is one.
    covering_index: str | None = None
    install: str | None = None
    install_uv: str | None = None


def install_line(index_base: str, arch: str) -> str:
    """The exact command; ``--extra-index-url`` is not optional (numpy et al. live on PyPI).

    ``arch`` is an index directory name: ``gfx950``, or a fat build's ``gfx950-gfx1201``,
    whose extra is ``device-gfx950-gfx1201``.
    """
    return (
        f"pip install --index-url {index_base}/{arch}/ --extra-index-url {PYPI} "
        f'"rocm-torch[device-{arch}]"'
    )


def uv_install_line(index_base: str, arch: str) -> str:
    """uv prefers ``--extra-index-url`` over ``--index-url``, so say which index is which."""
    return f'uv pip install --index {index_base}/{arch}/ --default-index {PYPI} "rocm-torch[device-{arch}]"'


def configured_fat_indexes(stacks_dir: Path | None = None) -> list[tuple[str, ...]]:
    """The fat stacks' arch lists, in declared order (``stacks/Pulumi.*.yaml``).

    Demo stacks (``demo-*``) are left out: they make local indexes, never the published ones.
    """
    from rocm_bake.config import STACKS_DIR, read_stack_file

    found = []
    for path in sorted((stacks_dir or STACKS_DIR).glob("Pulumi.*.yaml")):
        stack = path.name[len("Pulumi."):-len(".yaml")]
        if stack.startswith("demo-"):
            continue
        value = read_stack_file(stack, stacks_dir).get("rocm-bake:pytorchRocmArch") or stack
        arches = tuple(a for a in str(value).split(";") if a)
        if len(arches) > 1:
            found.append(arches)
    return found


def covering(host_arches: set[str], fat: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The smallest configured fat index whose arches include every arch on this host."""
    candidates = [arches for arches in fat if host_arches <= set(arches)]
    return min(candidates, key=len) if candidates else None


def pin_env(indices: list[int]) -> dict[str, str]:
    """Show a process only these GPUs: HIP's view and the ROCm runtime's (device ordinals)."""
    devices = ",".join(str(i) for i in indices)
    return {"HIP_VISIBLE_DEVICES": devices, "ROCR_VISIBLE_DEVICES": devices}


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


def nearest_compatible(gpu_arch: str, supported: list[str]) -> str | None:
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


def choose(gpu_arch: str, gpus: list[Gpu], supported: list[str], index_base: str) -> Choice:
    where = [f"{g.source} {g.node}" for g in gpus]
    if gpu_arch in supported:
        return Choice(
            gpu_arch=gpu_arch, gpus=where, index_arch=gpu_arch, native=True,
            reason=f"{gpu_arch} is built by this project", install=install_line(index_base, gpu_arch),
        )
    near = nearest_compatible(gpu_arch, supported)
    if near is None:
        return Choice(
            gpu_arch=gpu_arch, gpus=where, index_arch=None, native=False, install=None,
            reason=(
                f"{gpu_arch} is not built by this project (it builds {', '.join(supported)}) and no "
                f"built arch is ISA-compatible with it: no compatible index"
            ),
        )
    major, minor, stepping = gfx_version(near)  # type: ignore[misc]
    override = f"{major}.{minor}.{stepping}"
    return Choice(
        gpu_arch=gpu_arch, gpus=where, index_arch=near, native=False,
        install=install_line(index_base, near), env={"HSA_OVERRIDE_GFX_VERSION": override},
        reason=(
            f"{gpu_arch} is not built by this project; the nearest ISA-compatible arch is {near} "
            f"(same gfx{major}.{minor} family, both {_generic_of(near)}), but its code objects are "
            f"compiled for {near}: the ROCm runtime loads them on {gpu_arch} only with "
            f"HSA_OVERRIDE_GFX_VERSION={override}, which is not a supported configuration"
        ),
    )


def which_index(detection: Detection, supported: list[str], index_base: str,
                fat_indexes: list[tuple[str, ...]] | None = None) -> WhichIndex:
    """Map detected GPUs to indexes: one per distinct arch, or one fat index that covers them all."""
    by_arch: dict[str, list[Gpu]] = {}
    ordinal: dict[str, list[int]] = {}
    for index, gpu in enumerate(detection.gpus):
        by_arch.setdefault(gpu.gfx, []).append(gpu)
        ordinal.setdefault(gpu.gfx, []).append(index)
    choices = [choose(a, by_arch[a], supported, index_base) for a in sorted_arches(list(by_arch))]
    usable = {c.index_arch for c in choices if c.index_arch}
    multi = len(by_arch) > 1
    if not detection.gpus:
        return WhichIndex(detection=detection, choices=choices, multi_arch=False,
                          message=f"no AMD GPU found (looked at {' and '.join(detection.looked_at)})")
    if not multi:
        message = f"index for this host: {usable.pop()}" if usable else "no compatible index for the GPU(s) found"
        return WhichIndex(detection=detection, choices=choices, multi_arch=False, message=message)
    host = sorted_arches(list(by_arch))
    fat = covering(set(host), fat_indexes or [])
    if fat is not None:
        name = "-".join(fat)
        return WhichIndex(
            detection=detection, choices=choices, multi_arch=True, covering_index=name,
            install=install_line(index_base, name), install_uv=uv_install_line(index_base, name),
            message=(f"this host has GPUs of {len(host)} arches ({', '.join(host)}); the fat-build index {name} "
                     f"carries code objects for all of them in one set of wheels: install that one"),
        )
    for choice in choices:
        if choice.install:
            choice.pin = pin_env(ordinal[choice.gpu_arch])
    message = (
        f"this host has GPUs of {len(host)} different arches ({', '.join(host)}) and no configured index "
        f"covers them all (a fat-build index would): one environment can hold only one arch's wheels (their "
        f"filenames are the same for every arch): install each arch into its own environment, and run each "
        f"process pinned to that arch's GPUs with the variables shown"
    )
    return WhichIndex(detection=detection, choices=choices, multi_arch=True, message=message)


def check_index_base(value: str) -> str:
    base = value.rstrip("/")
    if not re.match(r"^(https?|file)://\S+$", base):
        raise RocmBakeError(f"--index-base {value!r}: expected an http(s):// or file:// URL")
    return base


def run_which_index(
    sysfs_root: Path, index_base: str, rocminfo: RocminfoRunner = run_rocminfo
) -> WhichIndex:
    from rocm_bake.manifests import load_targets  # YAML: read when the command runs, not for --help

    supported = load_targets().default_arches
    return which_index(detect_gpus(sysfs_root, rocminfo), supported, check_index_base(index_base),
                       configured_fat_indexes())


def render(result: WhichIndex) -> str:
    lines = [result.message]
    if result.covering_index:
        return "\n".join([*lines, "", f"  {result.install}", f"  {result.install_uv}"])
    for choice in result.choices:
        lines.append("")
        lines.append(f"{choice.gpu_arch} ({', '.join(choice.gpus)}): {choice.reason}")
        if choice.install:
            prefix = " ".join(f"{k}={v}" for k, v in choice.env.items())
            lines.append(f"  {choice.install}")
            if prefix:
                lines.append(f"  then run with: export {prefix}")
            if choice.pin:
                pin = " ".join(f"{k}={v}" for k, v in choice.pin.items())
                lines.append(f"  run its processes on these GPUs only: {pin} python ...")
    return "\n".join(lines)

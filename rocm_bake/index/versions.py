"""Version and naming rules for the wheels an arch's index may serve.

Most wheels carry the ROCm version in their own version string:
torchvision, atom, cupy and lmcache as ``+rocm10.1.0``; torch, triton and
amd_aiter appended to the commit they were built from, as in
``2.15.0a0+git31a77fc.rocm10.1.0``; vllm upstream's own ``+rocm101``. Three
do not, each for its own reason: nixl and triton_kernels are pure Python,
and nixl_rocm is identified by its name rather than its version. The
architecture is in none of them: torch would otherwise resolve differently
per machine from a single index.

Everything is parsed with ``packaging``; each refusal names the wheel file,
the index arch and the rule it broke.
"""

from __future__ import annotations

import re
from enum import Enum

from packaging.tags import Tag
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import Version
from pydantic import BaseModel, ConfigDict

from rocm_bake import install_line
from rocm_bake.archset import ArchSet
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.defaults import DEFAULT_ROCM_VERSION as DEFAULT_ROCM_VERSION  # re-exported

ROCM_VERSION_PATTERN = re.compile(r"^\d+\.\d+\.\d+$")
#: The metapackage's name; it is generated per index and never fetched.
METAPACKAGE = canonicalize_name(install_line.METAPACKAGE)  # one home: the install lines name it too
#: Any local-version part that names a GPU processor (gfx950, gfx90a, gfx12-generic).
ARCH_IN_VERSION = re.compile(r"gfx[0-9a-f]+", re.IGNORECASE)
ARCH_REASON = (
    "the architecture is deliberately in no version: torch would then resolve differently "
    "per machine from one index, which is what the per-arch index path and the "
    "rocm-torch[device-<arch>] metapackage exist to express"
)


class Rule(str, Enum):
    """Which version shape a project's wheels must have."""

    ROCM = "rocm"  # +rocm10.1.0
    GIT_ROCM = "git-rocm"  # +git<sha>.rocm10.1.0
    VLLM = "vllm"  # +rocm101 (upstream's own spelling)
    PURE = "pure"  # no ROCm code to qualify: must be pure Python
    BY_NAME = "by-name"  # nixl_rocm: meson gives no hook, the name says rocm


#: Known projects (canonical names) and their rule; unknown projects get
#: ``default_rule``.
PROJECT_RULES: dict[str, Rule] = {
    "torchvision": Rule.ROCM,
    "atom": Rule.ROCM,
    "cupy": Rule.ROCM,
    "lmcache": Rule.ROCM,
    "torch": Rule.GIT_ROCM,
    "triton": Rule.GIT_ROCM,
    "amd-aiter": Rule.GIT_ROCM,
    "vllm": Rule.VLLM,
    "nixl": Rule.PURE,
    "triton-kernels": Rule.PURE,
    "nixl-rocm": Rule.BY_NAME,
}


class WheelName(BaseModel):
    """A wheel filename, parsed and checked."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    filename: str
    project: str  # canonical (PEP 503 normalized) name
    version: Version
    tags: frozenset[Tag]
    rule: Rule

    @property
    def pure(self) -> bool:
        return is_pure(self.tags)


def is_pure(tags: frozenset[Tag]) -> bool:
    """True when every tag is ``none``-ABI and ``any``-platform (pure Python)."""
    return all(t.abi == "none" and t.platform == "any" for t in tags)


def check_rocm_version(rocm_version: str) -> str:
    if not ROCM_VERSION_PATTERN.match(rocm_version):
        raise RocmBakeError(f"ROCm version {rocm_version!r} is not X.Y.Z (e.g. {DEFAULT_ROCM_VERSION})")
    return rocm_version


def vllm_local(rocm_version: str) -> str:
    """vllm's own spelling: major and minor run together (10.1.0 -> ``rocm101``)."""
    major, minor, _patch = rocm_version.split(".")
    return f"rocm{major}{minor}"


def default_rule(pure: bool) -> Rule:
    """Unknown projects: pure wheels are exempt (nothing to qualify), native ones need +rocm.

    A native wheel with no ROCm marker is indistinguishable from one built
    against another ROCm, so it is held to the commonest rule.
    """
    return Rule.PURE if pure else Rule.ROCM


def check_safe_filename(filename: str, arch: ArchSet) -> None:
    """No path separators or ``..``: a filename becomes a path and a URL here."""
    if not filename or "/" in filename or "\\" in filename or ".." in filename or "\0" in filename:
        raise RocmBakeError(
            f"{filename!r} (index {arch}): rule safe-filename: a wheel name must not contain "
            f"path separators or '..' (it becomes a path under files/ and a URL)"
        )


def parse_name(filename: str, arch: ArchSet) -> WheelName:
    """Parse ``filename`` with packaging; raise naming the file, arch and rule."""
    check_safe_filename(filename, arch)
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise RocmBakeError(
            f"{filename} (index {arch}): rule wheel-filename: not a valid wheel filename ({exc})"
        ) from None
    project: NormalizedName = canonicalize_name(name)
    rule = PROJECT_RULES.get(project) or default_rule(is_pure(tags))
    return WheelName(filename=filename, project=project, version=version, tags=tags, rule=rule)


def check_version(wheel: WheelName, arch: ArchSet, rocm_version: str = DEFAULT_ROCM_VERSION) -> None:
    """Apply the ROCm-marker rule (module docstring) for ``wheel.project``; raise on a violation."""
    check_rocm_version(rocm_version)
    where = f"{wheel.filename} (index {arch})"
    local = wheel.version.local or ""
    if wheel.project == METAPACKAGE:
        raise RocmBakeError(
            f"{where}: rule metapackage: rocm-torch is generated per index from the index's own "
            f"wheels and must not be among the input wheels"
        )
    if ARCH_IN_VERSION.search(str(wheel.version)):
        raise RocmBakeError(f"{where}: rule no-arch-in-version: version {wheel.version} names an "
                            f"architecture; {ARCH_REASON}")
    rocm = f"rocm{rocm_version}"
    if wheel.rule is Rule.ROCM:
        if local != rocm:
            raise RocmBakeError(
                f"{where}: rule rocm-local: {wheel.project} must carry the local version "
                f"+{rocm} (got {_shown(local)}), so the filename says which ROCm it was built for"
            )
    elif wheel.rule is Rule.GIT_ROCM:
        if not re.fullmatch(rf"git[0-9a-f]{{7,40}}\.{re.escape(rocm)}", local):
            raise RocmBakeError(
                f"{where}: rule git-rocm-local: {wheel.project} must carry "
                f"+git<sha>.{rocm} (the commit it was built from, then the ROCm version; "
                f"got {_shown(local)})"
            )
    elif wheel.rule is Rule.VLLM:
        want = vllm_local(rocm_version)
        if local != want:
            raise RocmBakeError(
                f"{where}: rule vllm-local: vllm carries upstream's own +{want} (got {_shown(local)})"
            )
    elif wheel.rule is Rule.PURE:
        if not wheel.pure:
            raise RocmBakeError(
                f"{where}: rule pure-exempt: {wheel.project} is exempt from the ROCm version "
                f"marker only because it is pure Python, but its tags "
                f"({', '.join(sorted(str(t) for t in wheel.tags))}) are platform-specific"
            )
    # Rule.BY_NAME (nixl_rocm): identified by name, any version without an arch.


def _shown(local: str) -> str:
    return f"+{local}" if local else "no local version"

"""Fleet and target manifests (``manifests/*.yml``), validated by pydantic.

Errors name the file and the field, so a typo in a manifest is a one-line
fix rather than a stack trace. Fleet lookups (which node holds which card,
whether a build can be GPU-tested) live here, with the fleet: the arch
policy is a pure function of the arch value and imports no manifest.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from rocm_bake.archset import Arch, ArchSet
from rocm_bake.errors import RocmBakeError

#: manifests/ at the repository root (the package lives beside it).
MANIFEST_DIR = Path(__file__).resolve().parent.parent / "manifests"

#: The fleet manifest to use instead of manifests/fleet.yml (the CLI's ``--fleet`` wins over it). An
#: environment variable, so it reaches the Pulumi program and its providers, which the engine starts.
FLEET_ENV = "ROCM_BAKE_FLEET"

#: A manifest is a few KB of YAML; anything this big is not one (and is not read whole).
MAX_MANIFEST_BYTES = 1 << 20


def repo_relative(value: str) -> str:
    """A path inside the repository: relative, POSIX, never climbing out with ``..``.

    Build inputs are named relative to the project so a stack builds the same
    on every checkout; an absolute path or one that escapes would build from
    whatever that machine has there.
    """
    if not value or "\\" in value or "\x00" in value:
        raise ValueError(f"{value!r}: expected a relative path inside the repository (POSIX separators)")
    if posixpath.isabs(value) or (len(value) > 1 and value[1] == ":"):
        raise ValueError(f"{value!r} is absolute: expected a path inside the repository")
    normal = posixpath.normpath(value)
    if normal == ".." or normal.startswith("../"):
        raise ValueError(f"{value!r} escapes the repository (..): expected a path inside it")
    return value


RepoPath = Annotated[str, AfterValidator(repo_relative)]
#: An ssh destination part (host or user): never an ssh option (``-oProxyCommand=…``), never blank.
SshWord = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_\[][A-Za-z0-9_.:%@\[\]-]*$")]


class Node(BaseModel):
    """One fleet machine reachable over SSH, and the GPUs it holds."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    host: SshWord
    user: SshWord | None = None
    port: int = Field(default=22, ge=1, le=65535)
    gpus: list[Arch]
    #: Lock held while a GPU test runs, so a second test on a busy node waits.
    lock_path: str = "/tmp/rocm-bake-gpu-test.lock"
    #: How the node runs a test: ``{image}`` (by digest) and ``{test}`` are filled in.
    run_template: str = "docker run --rm --device=/dev/kfd --device=/dev/dri {image} {test}"


class FleetCoverage(BaseModel):
    """Which nodes can GPU-test a build, and whether every arch of it is covered."""

    fleet_nodes: list[str]
    gpu_testable: bool


class Fleet(BaseModel):
    """The fleet: nodes plus the default ``gpu_node`` for GPU tests."""

    model_config = ConfigDict(extra="forbid")
    gpu_node: str
    nodes: list[Node]

    @model_validator(mode="after")
    def _check(self) -> "Fleet":
        names = [n.name for n in self.nodes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"node names must be unique, repeated: {', '.join(dupes)}")
        if self.gpu_node not in names:
            raise ValueError(f"gpu_node {self.gpu_node!r} is not one of the nodes ({', '.join(names)})")
        return self

    def nodes_for(self, arch: Arch) -> list[str]:
        """Names of nodes holding a GPU of ``arch`` (empty: cross-compile only). A lookup, not a validation."""
        return [n.name for n in self.nodes if arch in n.gpus]

    def coverage(self, rocm_arch: ArchSet) -> FleetCoverage:
        """The nodes that hold any arch of a build, and whether it is GPU-testable.

        A fat build is GPU-testable only when every arch in it has a node: an
        untested code object is not covered just because its neighbour is.
        """
        arches = rocm_arch.arches
        return FleetCoverage(
            fleet_nodes=sorted({n for a in arches for n in self.nodes_for(a)}),
            gpu_testable=all(self.nodes_for(a) for a in arches),
        )

    def node(self, name: str) -> Node:
        for candidate in self.nodes:
            if candidate.name == name:
                return candidate
        raise RocmBakeError(
            f"unknown fleet node {name!r}: known are {', '.join(n.name for n in self.nodes)}"
        )

    def gpu_host(self, override: str | None = None) -> Node:
        """The node GPU tests run on: an override (GPU_HOST / stack key) or gpu_node.

        GPU_HOST exists so a test can move to e.g. snoc-strix when the default
        gpu_node is busy; an override naming no fleet node is an error.
        """
        chosen = override or os.environ.get("GPU_HOST") or self.gpu_node
        return self.node(chosen)


class Target(BaseModel):
    """One image build target (a stage of a multi-stage Dockerfile)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    #: Inside the repository (relative, no ``..`` out of it): an image is built from the project's files only.
    dockerfile: RepoPath
    stage: str = Field(min_length=1)
    device_code: bool = True
    depends_on: list[str] = []
    wheels: list[str] = []
    #: Command run inside the built image on a node with the card (none: not GPU-tested).
    gpu_test: str | None = None


class Targets(BaseModel):
    """All build targets and the default ARCHES list the fan-out uses."""

    model_config = ConfigDict(extra="forbid")
    default_arches: list[Arch]
    targets: list[Target]

    @model_validator(mode="after")
    def _check(self) -> "Targets":
        names = [t.name for t in self.targets]
        for target in self.targets:
            missing = [d for d in target.depends_on if d not in names]
            if missing:
                raise ValueError(f"target {target.name!r} depends on unknown {', '.join(missing)}")
        self.build_order()  # raises on a cycle
        return self

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise RocmBakeError(
            f"unknown target {name!r}: known are {', '.join(t.name for t in self.targets)}"
        )

    def build_order(self) -> list[Target]:
        """Targets with every dependency before its dependants."""
        by_name = {t.name: t for t in self.targets}
        ordered: list[Target] = []
        state: dict[str, str] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "active":
                raise ValueError(f"dependency cycle: {' -> '.join(path + [name])}")
            state[name] = "active"
            for dep in by_name[name].depends_on:
                visit(dep, path + [name])
            state[name] = "done"
            ordered.append(by_name[name])

        for t in self.targets:
            visit(t.name, [])
        return ordered


def read_yaml(path: Path, what: str = "file") -> Any:
    """A small YAML file the user points us at, every way it can be wrong named as one clear error.

    Missing, a directory, unreadable, too big, not UTF-8 or not YAML: each is
    bad input (exit 2 naming the file), never a traceback.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise RocmBakeError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise RocmBakeError(f"{path}: is a directory, expected a YAML {what}") from None
    except OSError as exc:
        raise RocmBakeError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise RocmBakeError(f"{path}: larger than {MAX_MANIFEST_BYTES >> 20} MiB, not a {what}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RocmBakeError(f"{path}: not UTF-8 text (byte {exc.start}): expected a YAML {what}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RocmBakeError(f"{path}: not valid YAML: {exc}") from None
    except ValueError as exc:  # PyYAML's int() of a number too long to convert
        raise RocmBakeError(f"{path}: not usable YAML: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise RocmBakeError(f"{path}: nested too deeply to be a {what}") from None


def _load(path: Path, model: type[BaseModel]) -> Any:
    raw = read_yaml(path, "manifest")
    if not isinstance(raw, dict):
        raise RocmBakeError(
            f"{path}: expected a mapping of {model.__name__} fields at the top level, got "
            f"{'nothing (empty file)' if raw is None else type(raw).__name__}"
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<top>'}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise RocmBakeError(f"{path}: {problems}") from None


def fleet_path(path: Path | None = None) -> Path:
    """``path``, else ``$ROCM_BAKE_FLEET``, else the shipped ``manifests/fleet.yml``."""
    return path or Path(os.environ.get(FLEET_ENV) or MANIFEST_DIR / "fleet.yml")


def load_fleet(path: Path | None = None) -> Fleet:
    fleet = _load(fleet_path(path), Fleet)
    assert isinstance(fleet, Fleet)
    return fleet


def load_targets(path: Path | None = None) -> Targets:
    targets = _load(path or MANIFEST_DIR / "targets.yml", Targets)
    assert isinstance(targets, Targets)
    return targets

"""Fleet and target manifests (``manifests/*.yml``), validated by pydantic.

Errors name the file and the field, so a typo in a manifest is a one-line
fix rather than a stack trace.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from rocm_bake.arch import validate_arch
from rocm_bake.errors import RocmBakeError

#: manifests/ at the repository root (the package lives beside it).
MANIFEST_DIR = Path(__file__).resolve().parent.parent / "manifests"


def _arch_field(value: str) -> str:
    try:
        return validate_arch(value)
    except RocmBakeError as exc:
        raise ValueError(str(exc)) from None


ArchName = Annotated[str, AfterValidator(_arch_field)]


class Node(BaseModel):
    """One fleet machine reachable over SSH, and the GPUs it holds."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    host: str = Field(min_length=1)
    user: str | None = None
    port: int = 22
    gpus: list[ArchName]
    #: Lock held while a GPU test runs, so a second test on a busy node waits.
    lock_path: str = "/tmp/rocm-bake-gpu-test.lock"
    #: How the node runs a test: ``{image}`` (by digest) and ``{test}`` are filled in.
    run_template: str = "docker run --rm --device=/dev/kfd --device=/dev/dri {image} {test}"


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

    def nodes_for(self, arch: str) -> list[str]:
        """Names of nodes holding a GPU of ``arch`` (empty: cross-compile only)."""
        return [n.name for n in self.nodes if arch in n.gpus]

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
    dockerfile: str
    stage: str
    device_code: bool = True
    depends_on: list[str] = []
    wheels: list[str] = []
    #: Command run inside the built image on a node with the card (none: not GPU-tested).
    gpu_test: str | None = None


class Targets(BaseModel):
    """All build targets and the default ARCHES list the fan-out uses."""

    model_config = ConfigDict(extra="forbid")
    default_arches: list[ArchName]
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

    def wheel_projects(self) -> list[str]:
        return [w for t in self.targets for w in t.wheels]


def _load(path: Path, model: type[BaseModel]) -> BaseModel:
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise RocmBakeError(f"{path}: manifest not found") from None
    except yaml.YAMLError as exc:
        raise RocmBakeError(f"{path}: not valid YAML: {exc}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<top>'}: {err['msg']}" for err in exc.errors()
        )
        raise RocmBakeError(f"{path}: {problems}") from None


def load_fleet(path: Path | None = None) -> Fleet:
    fleet = _load(path or MANIFEST_DIR / "fleet.yml", Fleet)
    assert isinstance(fleet, Fleet)
    return fleet


def load_targets(path: Path | None = None) -> Targets:
    targets = _load(path or MANIFEST_DIR / "targets.yml", Targets)
    assert isinstance(targets, Targets)
    return targets

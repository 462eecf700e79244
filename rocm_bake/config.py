"""Stack configuration (``rocm-bake:*`` keys) read once into a pydantic model.

The Pulumi program and ``rocm-bake plan`` both go through
``stack_config_from_mapping`` so a bad value fails before anything is
declared, with a message naming the key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from rocm_bake.arch import ArchPolicy, arch_policy, check_prebuild_kernels, parse_rocm_arch
from rocm_bake.errors import RocmBakeError

NAMESPACE = "rocm-bake"
STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"

#: Config key (camelCase, as in the stack YAML) -> model field.
KEYS: dict[str, str] = {
    "pytorchRocmArch": "pytorch_rocm_arch",
    "rocmVersion": "rocm_version",
    "registry": "registry",
    "repository": "repository",
    "builder": "builder",
    "push": "push",
    "prebuildKernels": "prebuild_kernels",
    "cacheArch": "cache_arch",
    "targets": "targets",
    "dist": "dist",
    "publish": "publish",
    "githubRepo": "github_repo",
    "githubApiUrl": "github_api_url",
    "githubUploadsUrl": "github_uploads_url",
    "githubWebUrl": "github_web_url",
    "githubPagesUrl": "github_pages_url",
    "githubToken": "github_token",
    "gpuHost": "gpu_host",
    "gpuTest": "gpu_test",
    "dockerfileDir": "dockerfile_dir",
    "buildArgs": "build_args",
}
FIELD_TO_KEY = {v: k for k, v in KEYS.items()}


class StackConfig(BaseModel):
    """One stack's settings; defaults are the embedded local defaults."""

    model_config = ConfigDict(extra="forbid")
    stack: str
    pytorch_rocm_arch: str
    rocm_version: str = Field(default="10.1.0", pattern=r"^\d+\.\d+\.\d+$")
    registry: str = "127.0.0.1:5000"
    repository: str = Field(default="rocm-bake", pattern=r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*$")
    #: buildx builder: docker-container, kubernetes or remote driver. Scale-out
    #: is BuildKit's: point this at a build farm, never at a queue of ours.
    builder: str = "rocm-bake"
    push: bool = True
    prebuild_kernels: int | None = None
    cache_arch: str | None = None
    targets: list[str] | None = None
    dist: str = "dist"
    publish: bool = False
    github_repo: str = Field(default="sbates130272/rocm-bake", pattern=r"^[\w.-]+/[\w.-]+$")
    github_api_url: str = "https://api.github.com"
    #: Release uploads, release downloads (the hrefs of the published index) and
    #: the Pages site: github.com's by default; a GitHub Enterprise names its own.
    github_uploads_url: str = "https://uploads.github.com"
    github_web_url: str = "https://github.com"
    github_pages_url: str = "https://{owner}.github.io/{repo}"
    github_token: str | None = None
    gpu_host: str | None = None
    gpu_test: bool = True
    #: Where the targets' Dockerfiles live (same file names as targets.yml):
    #: ``dockerfiles/demo`` holds stand-ins with the same stage graph, so the
    #: demo stacks differ from the real ones only in configuration.
    dockerfile_dir: str = "dockerfiles"
    #: Extra build args for every target, e.g. the base images
    #: (``ROCM_IMAGE``, ``PYTHON_IMAGE``). They are the same for every arch, so
    #: the shared triton-wheel cache stays shared.
    build_args: dict[str, str] = Field(default_factory=dict)

    @field_validator("pytorch_rocm_arch")
    @classmethod
    def _arches(cls, value: str) -> str:
        try:
            parse_rocm_arch(value)
        except RocmBakeError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("prebuild_kernels")
    @classmethod
    def _pin(cls, value: int | None, info: ValidationInfo) -> int | None:
        arch = info.data.get("pytorch_rocm_arch")
        if arch is not None:
            try:
                check_prebuild_kernels(parse_rocm_arch(arch), value)
            except RocmBakeError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def arches(self) -> list[str]:
        return parse_rocm_arch(self.pytorch_rocm_arch)

    @property
    def is_fat(self) -> bool:
        """Several arches in one PYTORCH_ROCM_ARCH: one binary, one set of tags."""
        return len(self.arches) > 1

    @property
    def arch_label(self) -> str:
        """The arch part of tags and cache refs (``gfx950`` or ``gfx950_gfx1201``)."""
        return "_".join(self.arches)

    @property
    def image_tag(self) -> str:
        """Images are tagged by arch, never ``:latest`` (whichever arch pushed last)."""
        return f"{self.arch_label}-rocm{self.rocm_version}"

    @property
    def index_name(self) -> str:
        """The index directory, release and gh-pages folder name: ``gfx950`` or ``gfx950-gfx1201``."""
        return "-".join(self.arches)

    @property
    def effective_cache_arch(self) -> str:
        return self.cache_arch or self.arch_label

    def publish_token(self) -> str:
        """The GitHub token publishing needs: the secret key or GITHUB_TOKEN.

        Absent is an error at declaration, before anything is created.
        """
        token = self.github_token or os.environ.get("GITHUB_TOKEN")
        if not token:
            raise RocmBakeError(
                f"stack {self.stack}: rocm-bake:publish is true but there is no GitHub token; run "
                "`pulumi config set --secret rocm-bake:githubToken …` or set GITHUB_TOKEN"
            )
        return token

    def policy(self) -> ArchPolicy:
        return arch_policy(self.pytorch_rocm_arch, prebuild_kernels=self.prebuild_kernels)


def _coerce(field: str, value: Any) -> Any:
    """Pulumi config values arrive as strings; YAML may give real types."""
    if not isinstance(value, str):
        return value
    annotation = StackConfig.model_fields[field].annotation
    if annotation in (bool,):
        lowered = value.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        return value
    if field == "prebuild_kernels":
        return int(value) if value.strip().lstrip("-").isdigit() else value
    if field == "build_args":
        import json

        try:
            return json.loads(value)
        except ValueError:
            return value
    if field == "targets":
        return [t.strip() for t in value.replace(",", " ").split() if t.strip()]
    return value


def stack_config_from_mapping(stack: str, config: dict[str, Any], source: str) -> StackConfig:
    """Build a StackConfig from ``{"rocm-bake:key": value}``; errors name the key."""
    fields: dict[str, Any] = {"stack": stack}
    for full_key, value in config.items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            continue  # other providers' keys (github:token, docker-build:...) are theirs
        if key not in KEYS:
            raise RocmBakeError(
                f"{source}: unknown config key {full_key!r}; known keys: "
                + ", ".join(f"{NAMESPACE}:{k}" for k in KEYS)
            )
        fields[KEYS[key]] = _coerce(KEYS[key], value)
    fields.setdefault("pytorch_rocm_arch", stack)
    try:
        return StackConfig.model_validate(fields)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = err["loc"][0] if err["loc"] else None
            key = f"{NAMESPACE}:{FIELD_TO_KEY.get(str(loc), loc)}" if loc else "config"
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{key}: {msg}")
        raise RocmBakeError(f"{source} (stack {stack}): " + "; ".join(problems)) from None


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    return (stacks_dir or STACKS_DIR) / f"Pulumi.{stack}.yaml"


def read_stack_file(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The ``config:`` mapping of ``stacks/Pulumi.<stack>.yaml``."""
    path = stack_file(stack, stacks_dir)
    if not path.exists():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in path.parent.glob("Pulumi.*.yaml"))
        raise RocmBakeError(f"no stack {stack!r}: {path} does not exist (stacks: {', '.join(known)})")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise RocmBakeError(f"{path}: not valid YAML: {exc}") from None
    config = raw.get("config") or {}
    if not isinstance(config, dict):
        raise RocmBakeError(f"{path}: 'config' must be a mapping")
    return {k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in config.items()}


def load_stack_config(stack: str, overrides: dict[str, Any] | None = None) -> StackConfig:
    config = read_stack_file(stack)
    config.update(overrides or {})
    return stack_config_from_mapping(stack, config, str(stack_file(stack)))

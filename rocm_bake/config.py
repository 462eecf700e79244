"""Stack configuration (``rocm-bake:*`` keys) read once into a pydantic model.

The Pulumi program and ``rocm-bake plan`` both go through
``stack_config_from_mapping`` so a bad value fails before anything is
declared, with a message naming the key. The key table is the model itself:
each field's alias is its camelCase key (``pytorch_rocm_arch`` is
``rocm-bake:pytorchRocmArch``), and Pulumi's string values ("true", "2",
) become typed values through pydantic's own conversions. The one
structured key, ``buildArgs``, is a mapping in a stack file; the engine
hands it to the program as JSON text, which ``from_engine_values`` decodes
once at that edge, so the model only ever sees a mapping.

The arch value is parsed once, here: ``pytorch_rocm_arch`` is a
``ArchSet``, and everything downstream takes it as it is.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic import ValidationError, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from rocm_bake.arch import ArchPolicy, arch_policy, check_prebuild_kernels
from rocm_bake.archset import Arch, ArchSet
from rocm_bake.checkout import DEFAULT_BUILDER
from rocm_bake.errors import RocmBakeError
from rocm_bake.http_waits import check_service_url
from rocm_bake.manifests import RepoPath, read_yaml
from rocm_bake.problems import problem_lines

NAMESPACE = "rocm-bake"
STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"

#: A Pulumi stack name: what ``pulumi stack init`` accepts, so it is also a safe file name part.
STACK_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#: ``host[:port]``: a DNS name or IPv4 address, or a bracketed IPv6 address; no scheme, path or spaces.
_REGISTRY = re.compile(rf"^(?P<host>{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{{1,5}}))?$")


def registry_host(value: str) -> str:
    """The registry as image refs need it: ``host[:port]``, and recognisably a host.

    Docker reads a first path part with no ``.`` or ``:`` (and not
    ``localhost``) as a Docker Hub namespace, so ``myregistry`` would push to
    Docker Hub: refused here, where the key can still be named.
    """
    match = _REGISTRY.match(value)
    if not match:
        raise ValueError(
            "not a registry host[:port] such as 127.0.0.1:5000 or ghcr.io (no scheme, path or spaces)"
        )
    port = match.group("port")
    if port is not None and not 1 <= int(port) <= 65535:
        raise ValueError("the port is not in 1..65535")
    host = match.group("host")
    if not ("." in host or port is not None or host.startswith("[") or host == "localhost"):
        raise ValueError(
            "no '.', ':' or port: Docker would read it as a Docker Hub namespace; "
            "give the registry host, e.g. registry.example or 127.0.0.1:5000"
        )
    return value


#: System directories ``rocm-bake:dist`` may be neither nor lie under (the index writer deletes and replaces
#: what it owns there), and top-level directories it may lie under but not be.
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
               "/sys", "/usr", "/var/lib", "/var/log", "/var/run")
SHARED_TOPS = ("/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var")


def dist_dir(value: str) -> str:
    """``rocm-bake:dist``: a directory of its own, relative to the project or absolute, never ``/`` or a system one.

    The rule is judged on where the value leads, resolved as it is used:
    against the working directory (the project's, for the program) when
    relative, with ``..`` and symlinks followed. There it may be neither ``/`` nor a shared
    top-level directory (``/home``, ``/tmp``, ``/var`` …) itself, nor be or lie
    under a system directory (``/etc``, ``/usr``, ``/var/lib`` …): so
    ``../../../../usr/local/x`` is judged as ``/usr/local/x``. ``rocm-bake``
    writes ``wheels/<arch>`` and ``index/<arch>`` there and replaces what it wrote.
    """
    if not value.strip() or "\x00" in value:
        raise ValueError("expected a directory, e.g. dist or /srv/rocm-bake/dist")
    normal = os.path.realpath(value)
    normal = "/" + normal.lstrip("/")  # '//x' is '/x'
    if normal in SHARED_TOPS:
        raise ValueError("is / or a shared top-level directory: give a directory of its own under it")
    if any(normal == d or normal.startswith(d + "/") for d in SYSTEM_DIRS):
        raise ValueError("is or lies under a system directory (" + ", ".join(SYSTEM_DIRS) + ")")
    return value


def _words(value: Any) -> Any:
    """``rocm-bake:targets`` from the Pulumi CLI is one string: ``"torch vllm"`` or ``"torch,vllm"``."""
    if isinstance(value, str):
        return [word for word in value.replace(",", " ").split() if word]
    return value


Registry = Annotated[str, AfterValidator(registry_host)]
#: A GitHub endpoint the token is sent to: https, or http to loopback; never credentials in it.
ServiceUrl = Annotated[str, AfterValidator(check_service_url)]
TargetNames = Annotated[list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$")]], BeforeValidator(_words)]
#: Build arg name -> value: a mapping in the stack YAML (the engine's JSON text is decoded at its edge).
BuildArgs = dict[str, str]
#: Keys whose value is a mapping: the engine passes each to the program as JSON text.
STRUCTURED_KEYS = frozenset({"buildArgs"})
#: ``{registry}`` / ``{repository}`` in a build arg: the stack's own values, so a base image pushed to
#: the stack's registry (the demo's) is named without writing a host:port into a tracked file.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
BUILD_ARG_PLACEHOLDERS = ("registry", "repository")

#: An OCI tag fragment: the cache ref is ``cache:<target>-<cacheArch>``.
CacheScope = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")]


class StackConfig(BaseModel):
    """One stack's settings; defaults are the embedded local defaults.

    Field ``x_y`` is config key ``rocm-bake:xY``; Python callers may use
    either spelling, a stack file only the key.
    """

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )
    stack: str
    pytorch_rocm_arch: ArchSet
    rocm_version: str = Field(default="10.1.0", pattern=r"^\d+\.\d+\.\d+$")
    registry: Registry = "127.0.0.1:5000"
    repository: str = Field(default="rocm-bake", pattern=r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*$")
    #: buildx builder: docker-container, kubernetes or remote driver. Scale-out
    #: is BuildKit's: point this at a build farm, never at a queue of ours.
    builder: str = Field(default=DEFAULT_BUILDER, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    push: bool = True
    prebuild_kernels: int | None = None
    cache_arch: CacheScope | None = None
    targets: TargetNames | None = None
    dist: Annotated[str, AfterValidator(dist_dir)] = "dist"
    publish: bool = False
    #: OWNER/NAME. No default: publishing needs it, or an ``origin`` remote on GitHub (``github_repo_source``).
    github_repo: str | None = Field(default=None, pattern=r"^[\w.-]+/[\w.-]+$")
    #: Where ``github_repo`` came from (the key or the origin remote): not a key, the outputs say it.
    github_repo_source: str | None = None
    github_api_url: ServiceUrl = "https://api.github.com"
    #: Release uploads, release downloads (the hrefs of the published index) and
    #: the Pages site: github.com's by default; a GitHub Enterprise names its own.
    github_uploads_url: ServiceUrl = "https://uploads.github.com"
    github_web_url: ServiceUrl = "https://github.com"
    github_pages_url: ServiceUrl = "https://{owner}.github.io/{repo}"
    github_token: str | None = None
    #: A fleet node's name (manifests/fleet.yml), checked against the fleet when the config is read.
    gpu_host: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", max_length=255)
    gpu_test: bool = True
    #: Where the targets' Dockerfiles live (same file names as targets.yml):
    #: ``dockerfiles/demo`` holds stand-ins with the same stage graph, so the
    #: demo stacks differ from the real ones only in configuration. Inside the
    #: repository, like every build input.
    dockerfile_dir: RepoPath = "dockerfiles"
    #: Extra build args for every target, e.g. the base images
    #: (``ROCM_IMAGE``, ``PYTHON_IMAGE``). They are the same for every arch, so
    #: the shared triton-wheel cache stays shared. ``{registry}`` and
    #: ``{repository}`` in a value are replaced here, once, by the stack's own.
    build_args: BuildArgs = Field(default_factory=dict)

    @field_validator("prebuild_kernels")
    @classmethod
    def _pin(cls, value: int | None, info: ValidationInfo) -> int | None:
        arch = info.data.get("pytorch_rocm_arch")  # absent when the arch itself was refused
        if arch is not None:
            check_prebuild_kernels(arch.arches, value)  # an ArchError is a ValueError: reported under the key
        return value

    @field_validator("build_args")
    @classmethod
    def _placeholders(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        known = {name: info.data.get(name) for name in BUILD_ARG_PLACEHOLDERS}
        if None in known.values():
            return value  # the registry or repository itself was refused: that error is the one to read

        def fill(arg: str, text: str) -> str:
            def one(match: re.Match[str]) -> str:
                name = match.group(1)
                if name not in known:
                    raise ValueError(f"{arg}: unknown placeholder {{{name}}}; known: "
                                     + ", ".join(f"{{{n}}}" for n in BUILD_ARG_PLACEHOLDERS))
                return str(known[name])
            return _PLACEHOLDER.sub(one, text)

        return {arg: fill(arg, text) for arg, text in value.items()}

    @property
    def arches(self) -> list[Arch]:
        return list(self.pytorch_rocm_arch.arches)

    @property
    def is_fat(self) -> bool:
        """Several arches in one PYTORCH_ROCM_ARCH: one binary, one set of tags."""
        return self.pytorch_rocm_arch.is_fat

    @property
    def arch_label(self) -> str:
        """The arch part of tags and cache refs (``gfx950`` or ``gfx950_gfx1201``)."""
        return self.pytorch_rocm_arch.tag_suffix

    @property
    def image_tag(self) -> str:
        """Images are tagged by arch, never ``:latest`` (whichever arch pushed last)."""
        return f"{self.arch_label}-rocm{self.rocm_version}"

    @property
    def index_name(self) -> str:
        """The index directory, release and gh-pages folder name: ``gfx950`` or ``gfx950-gfx1201``."""
        return self.pytorch_rocm_arch.dir_name

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
        """The build policy of the already-parsed arch value (not validated again)."""
        return arch_policy(self.pytorch_rocm_arch, prebuild_kernels=self.prebuild_kernels)


#: Model fields that are not config keys: set by the program, never by a stack file.
NOT_KEYS = frozenset({"stack", "github_repo_source"})
#: Config key (camelCase, as in the stack YAML) -> model field: the model's own aliases.
KEYS: dict[str, str] = {
    (info.alias or name): name for name, info in StackConfig.model_fields.items() if name not in NOT_KEYS
}
FIELD_TO_KEY = {v: k for k, v in KEYS.items()}


def key_name(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as the key the user wrote: ``rocm-bake:buildArgs.ROCM_IMAGE``."""
    if not loc:
        return "config"
    key = f"{NAMESPACE}:{FIELD_TO_KEY.get(str(loc[0]), loc[0])}"
    inner = [str(part) for part in loc[1:]]
    return key + ("." + ".".join(inner) if inner else "")  # rocm-bake:targets.0


def unknown_key_message(full_key: str) -> str:
    """An unknown key refused, with the nearest known key (a typo is the usual cause)."""
    key = full_key.partition(":")[2]
    near = difflib.get_close_matches(key, list(KEYS), n=1, cutoff=0.6) or difflib.get_close_matches(
        key.lower(), [k.lower() for k in KEYS], n=1, cutoff=0.6)
    nearest = next((k for k in KEYS if k.lower() == near[0].lower()), None) if near else None
    hint = f"did you mean {NAMESPACE}:{nearest}?" if nearest else "known keys: " + ", ".join(
        f"{NAMESPACE}:{k}" for k in KEYS)
    return f"unknown config key {full_key[:80]!r}; {hint}"


def near_namespace(namespace: str) -> bool:
    """``namespace`` is ours mistyped (``rocm_bake``, ``Rocm-Bake``, ``rocmbake``), not another provider's."""
    written = namespace.lower().replace("_", "-")
    return namespace != NAMESPACE and difflib.SequenceMatcher(None, written, NAMESPACE).ratio() >= 0.85


def mistyped_namespace_message(full_key: str) -> str:
    """A key under a near miss of ``rocm-bake:`` (ignored, it would silently change nothing): the right key."""
    key = full_key.partition(":")[2]
    near = difflib.get_close_matches(key.lower(), [k.lower() for k in KEYS], n=1, cutoff=0.6)
    nearest = next((k for k in KEYS if k.lower() == near[0]), None) if near else None
    hint = f"did you mean {NAMESPACE}:{nearest}?" if nearest else f"keys are written {NAMESPACE}:<key>"
    return f"config key {full_key[:80]!r} is not in the {NAMESPACE} namespace; {hint}"


def with_publish_target(config: StackConfig, source: str) -> StackConfig:
    """Publishing needs a repository: ``rocm-bake:githubRepo``, else a GitHub ``origin`` remote; never a default."""
    from rocm_bake.publish.origin import FROM_CONFIG, FROM_ORIGIN, origin_github_repo

    if config.github_repo is not None:
        return config.model_copy(update={"github_repo_source": FROM_CONFIG})
    if not config.publish:
        return config
    origin = origin_github_repo()
    if origin is None:
        raise RocmBakeError(
            f"{source} (stack {config.stack}): {NAMESPACE}:githubRepo: required when {NAMESPACE}:publish is true "
            "(OWNER/NAME; there is no default target, and the origin remote is not on GitHub)"
        )
    return config.model_copy(update={"github_repo": origin, "github_repo_source": FROM_ORIGIN})


def from_engine_values(given: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The engine's ``rocm-bake:*`` values as a stack file holds them: each structured key's JSON text decoded.

    The engine passes config to a program (and a policy pack) as strings, a
    mapping as its JSON text; this is the one place that text is read, so
    the model sees the mapping a stack file holds. Text that is not a JSON
    object is refused naming the key (never echoing the text: it may hold a
    secret).
    """
    values = dict(given)
    for key in STRUCTURED_KEYS:
        full = f"{NAMESPACE}:{key}"
        text = values.get(full)
        if not isinstance(text, (str, bytes)):
            continue
        try:
            values[full] = json.loads(text)
        except ValueError:
            raise RocmBakeError(f"{source}: {full}: not a JSON object") from None
    return values


def stack_config_from_mapping(stack: str, config: dict[str, Any], source: str) -> StackConfig:
    """Build a StackConfig from ``{"rocm-bake:key": value}``; errors name the key."""
    fields: dict[str, Any] = {"stack": stack}
    for full_key, value in config.items():
        if not isinstance(full_key, str):
            raise RocmBakeError(f"{source}: config key {full_key!r} is not a string like 'rocm-bake:registry'")
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE and near_namespace(namespace):
            raise RocmBakeError(f"{source}: {mistyped_namespace_message(full_key)}")
        if namespace != NAMESPACE:
            continue  # other providers' keys (github:token, docker-build:...) are theirs
        if key not in KEYS:
            raise RocmBakeError(f"{source}: {unknown_key_message(full_key)}")
        fields[key] = value
    fields.setdefault("pytorchRocmArch", stack)
    try:
        config = StackConfig.model_validate(fields)
    except ValidationError as exc:
        raise RocmBakeError(f"{source} (stack {stack}): " + "; ".join(problem_lines(exc.errors(), key_name))) from None
    if config.gpu_host is not None:
        check_gpu_host(config.gpu_host, f"{source} (stack {stack})")
    if config.publish and config.targets:
        named = " ".join(config.targets)
        raise RocmBakeError(
            f"{source} (stack {stack}): {NAMESPACE}:targets: with {NAMESPACE}:publish true it would undeclare every "
            f"other image and so shrink the published index and release to {named}; remove it and narrow one run "
            f"instead: rocm-bake arches up --arches {stack} " + " ".join(f"--target {t}" for t in config.targets)
            + " (the engine's --target, which keeps the rest)")
    return with_publish_target(config, source)


def check_gpu_host(name: str, where: str) -> None:
    """``rocm-bake:gpuHost`` names a node of the fleet (the name is not repeated: the key is)."""
    from rocm_bake.manifests import load_fleet

    known = [node.name for node in load_fleet().nodes]
    if name not in known:
        raise RocmBakeError(f"{where}: {NAMESPACE}:gpuHost: not a fleet node (known: {', '.join(known)})")


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    """``stacks/Pulumi.<stack>.yaml``; a stack name is a name, never a path."""
    if not STACK_NAME.match(stack) or ".." in stack:
        raise RocmBakeError(
            f"stack name {stack[:80]!r}: expected letters, digits, '-', '_' or '.', e.g. gfx950 "
            "(a stack is named, not given as a path)"
        )
    return (stacks_dir or STACKS_DIR) / f"Pulumi.{stack}.yaml"


def read_stack_file(stack: str, stacks_dir: Path | None = None) -> dict[str, Any]:
    """The ``config:`` mapping of ``stacks/Pulumi.<stack>.yaml``."""
    path = stack_file(stack, stacks_dir)
    if not path.exists():
        known = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in path.parent.glob("Pulumi.*.yaml"))
        raise RocmBakeError(f"no stack {stack!r}: {path} does not exist (stacks: {', '.join(known)})")
    raw = read_yaml(path, "stack file")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RocmBakeError(
            f"{path}: the top level must be a mapping with a 'config:' key, got a {type(raw).__name__}"
        )
    config = raw.get("config") or {}
    if not isinstance(config, dict):
        raise RocmBakeError(f"{path}: 'config' must be a mapping of 'rocm-bake:<key>: value'")
    return {k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in config.items()}


def load_stack_config(
    stack: str, overrides: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None
) -> StackConfig:
    """``stacks/Pulumi.<stack>.yaml`` over ``defaults`` (e.g. the checkout's registry), under ``overrides``."""
    config = {**(defaults or {}), **read_stack_file(stack), **(overrides or {})}
    return stack_config_from_mapping(stack, config, str(stack_file(stack)))

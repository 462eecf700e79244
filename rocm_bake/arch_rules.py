"""The arch rules every stack keeps, as checks over the resources a program declares.

The policy pack (``policy/``) holds each rule as a mandatory policy, so
``pulumi preview`` and ``pulumi up`` refuse a program that breaks one,
whoever edited it. The rules themselves are the core's: tags and cache refs
come from ``rocm_bake.image_plan`` and ``StackConfig``, the ``:latest`` and
other-arch refusals from ``check_ref_for_arch``, the PREBUILD_KERNELS
refusal from ``check_prebuild_kernels``, release tags from
``release_tag``. This module only says where in a declared resource each
one applies. It is Pulumi-free: the pack hands it plain values, with
values that preview cannot know yet as ``UNKNOWN`` (checked at ``up``, when
they are known).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from rocm_bake.arch import check_prebuild_kernels
from rocm_bake.archset import ARCH_PATTERN, ArchError, ArchSet
from rocm_bake.checkout import local_defaults
from rocm_bake.config import StackConfig, from_engine_values, stack_config_from_mapping
from rocm_bake.errors import RocmBakeError
from rocm_bake.manifests import Target, load_targets
from rocm_bake.resource_types import FETCHED_WHEELS, IMAGE, PUBLISHING

#: The program's secret config: never parsed, never kept (the engine hands the pack decrypted config).
SECRET_KEYS = frozenset({"rocm-bake:githubToken"})
#: An arch name inside any string: the core's own pattern, not touching other letters or hex digits.
ARCH_TOKEN = re.compile(r"(?<![0-9a-z])" + ARCH_PATTERN.pattern.strip("^$") + r"(?![0-9a-f])")


class Unknown:
    """A value preview cannot know yet (an image digest, a path another resource returns)."""

    def __repr__(self) -> str:
        return "<unknown during preview>"


UNKNOWN = Unknown()


@dataclass(frozen=True)
class Declared:
    """One declared resource as the engine shows it: type token, name and inputs."""

    type: str
    name: str
    props: Mapping[str, Any]


@dataclass(frozen=True)
class Rule:
    """One arch rule: its policy name, why it exists, and the check that finds breaches."""

    name: str
    description: str
    check: Callable[[StackConfig, Declared], list[str]]


def stack_config(stack: str, config: Mapping[str, str], secret_keys: set[str] | frozenset[str]) -> StackConfig:
    """The stack's config as the engine gave it, parsed once; secret keys are dropped unread.

    The registry and builder default to the checkout's own, exactly as the
    program's ``read_config`` takes them (``local_defaults`` of the project
    directory, where the language host runs the pack), so the pack judges the
    refs the program declared rather than the built-in ``127.0.0.1:5000``.
    """
    plain = dict(local_defaults(Path.cwd()))
    plain.update({k: v for k, v in config.items() if k not in secret_keys and k not in SECRET_KEYS})
    source = f"stack {stack} config"
    return stack_config_from_mapping(stack, from_engine_values(plain, source), source)


def declared_arch_set(value: str) -> ArchSet:
    """An arch value a declared resource carries (a build arg, a publish input): the engine's input, parsed here."""
    return ArchSet(value)


def _known(value: Any) -> bool:
    return value is not None and value is not UNKNOWN


def _dockerfile(res: Declared) -> str | None:
    dockerfile = res.props.get("dockerfile")
    location = dockerfile.get("location") if isinstance(dockerfile, Mapping) else None
    return location if isinstance(location, str) else None


@lru_cache(maxsize=1)
def _targets_by_file() -> dict[str, Target]:
    """targets.yml, read once per process (the pack judges every resource of every preview)."""
    return {PurePosixPath(t.dockerfile).name: t for t in load_targets().targets}


def image_target(res: Declared) -> Target | None:
    """The targets.yml target an Image builds, by its Dockerfile's name (as ``image_plan.dockerfile_path``)."""
    location = _dockerfile(res)
    if location is None:
        return None
    return _targets_by_file().get(PurePosixPath(location).name)


def pushed_names(res: Declared) -> list[Any] | Unknown:
    """Every name an image is pushed under: its tags and the names of its ``image``/``registry`` exports."""
    tags = res.props.get("tags")
    if tags is UNKNOWN:
        return UNKNOWN
    names = list(tags or [])
    exports = res.props.get("exports")
    for export in exports if isinstance(exports, list) else []:
        for kind in ("registry", "image"):
            spec = export.get(kind) if isinstance(export, Mapping) else None
            listed = spec.get("names") if isinstance(spec, Mapping) else None
            if listed is UNKNOWN:
                return UNKNOWN
            names += listed if isinstance(listed, list) else []
    return names


def _pushes(res: Declared) -> bool:
    """``push`` on, or an ``image``/``registry`` export (which pushes whatever ``push`` says)."""
    exports = res.props.get("exports")
    return bool(res.props.get("push")) or any(
        isinstance(e, Mapping) and ("registry" in e or (isinstance(e.get("image"), Mapping) and e["image"].get("push")))
        for e in (exports if isinstance(exports, list) else []))


def check_tags(config: StackConfig, res: Declared) -> list[str]:
    """Images are pushed only under this stack's arch tag, never ``:latest``; the wheel fetch reads only such tags."""
    from rocm_bake.registry.tags import check_ref_for_arch

    if res.type == IMAGE:
        names = pushed_names(res)
        if names is UNKNOWN:
            return []
        refs = names
        if not refs and _pushes(res):
            return [f"{res.name} is pushed with no tag, which the registry reads as :latest; "
                    f"tag it {config.image_tag}"]
    elif res.type == FETCHED_WHEELS.token and isinstance(res.props.get("image_refs"), list):
        refs = res.props["image_refs"]
    else:
        return []
    problems = []
    for ref in refs:
        if not isinstance(ref, str):
            continue
        try:
            parsed = check_ref_for_arch(ref, config.pytorch_rocm_arch)
        except RocmBakeError as exc:
            problems.append(f"{res.name}: {exc}")
            continue
        if parsed.tag is not None and parsed.tag != config.image_tag:
            problems.append(f"{res.name}: {ref!r} is tagged {parsed.tag!r}, not this stack's {config.image_tag!r}")
    return problems


def _cache_entries(res: Declared) -> Iterator[tuple[str, Any]]:
    for kind in ("cacheFrom", "cacheTo"):
        entries = res.props.get(kind)
        if isinstance(entries, list):
            for entry in entries:
                yield kind, entry


def own_cache_scope(config: StackConfig) -> str | None:
    """Why the stack's cache scope (``rocm-bake:cacheArch``) is not its own arch set's, or None when it is.

    CACHE_ARCH keeps each arch's device-code cache apart: a scope must name
    this stack's arch set (``gfx950``, or ``gfx950-<anything>``), so two arch
    stacks can never meet on one ref. ``shared`` is the ref of the targets
    with no device code.
    """
    scope, label = config.effective_cache_arch, config.arch_label
    if scope == label or scope.startswith((f"{label}-", f"{label}_", f"{label}.")):
        return None
    return (f"rocm-bake:cacheArch {scope!r} is not stack {config.stack}'s own cache scope: device code is cached "
            f"per arch set, so it must be {label!r} or start with '{label}-' (another arch's stack could use "
            f"{scope!r} too)")


def check_cache(config: StackConfig, res: Declared) -> list[str]:
    """Each arch's layer cache is its own (CACHE_ARCH); triton-wheel, with no device code, shares one ref."""
    from rocm_bake.image_plan import cache_ref

    if res.type != IMAGE:
        return []
    entries = [(kind, entry) for kind, entry in _cache_entries(res) if _known(entry)]
    if not entries:
        return []
    target = image_target(res)
    if target is None:
        return [f"{res.name} builds {_dockerfile(res) or 'no Dockerfile'}, which is no target of "
                "manifests/targets.yml: which cache ref it may use is unknown"]
    scope = own_cache_scope(config)
    if target.device_code and scope:
        return [f"{res.name}: {scope}"]
    want = cache_ref(config, target)
    why = ("the ref every arch shares: it compiles no device code" if not target.device_code
           else f"this stack's CACHE_ARCH ({config.effective_cache_arch}) ref")
    problems = []
    for kind, entry in entries:
        registry = entry.get("registry") if isinstance(entry, Mapping) else None
        if not isinstance(registry, Mapping):
            problems.append(f"{res.name} {kind}: {entry!r} is not a registry cache ref; {target.name}'s is {want}")
            continue
        ref = registry.get("ref")
        if _known(ref) and ref != want:
            problems.append(f"{res.name} {kind} {ref!r}: {target.name}'s cache is {want} ({why})")
    return problems


def check_prebuild(config: StackConfig, res: Declared) -> list[str]:
    """AITER PREBUILD_KERNELS is 0 unless the stack pins a level, and 2 is refused off CDNA."""
    args = res.props.get("buildArgs") if res.type == IMAGE else None
    value = args.get("PREBUILD_KERNELS") if isinstance(args, Mapping) else None
    if not _known(value):
        return []
    try:
        level = int(value)
    except (TypeError, ValueError):
        return [f"{res.name}: PREBUILD_KERNELS={value!r} is not a level AITER knows (0, 1 or 2)"]
    arch_value = args.get("PYTORCH_ROCM_ARCH")
    try:
        arches = declared_arch_set(arch_value).arches if isinstance(arch_value, str) else tuple(config.arches)
        check_prebuild_kernels(arches, level)
    except ArchError as exc:
        return [f"{res.name}: {exc}"]
    want = config.policy().prebuild_kernels
    if level != want:
        pin = ("no pin (0 is the default everywhere)" if config.prebuild_kernels is None
               else f"the pin {config.prebuild_kernels}")
        return [f"{res.name}: PREBUILD_KERNELS={level}, but stack {config.stack} has {pin} "
                "(rocm-bake:prebuildKernels)"]
    return []


#: The arch-decided build args judged here (PREBUILD_KERNELS has a rule of its own).
ARCH_BUILD_ARGS = ("PYTORCH_ROCM_ARCH", "USE_ROCM_CK_SDPA_GFX12", "AMDGPU_SCHED_STRATEGY", "ROCM_PRUNE_KEEP",
                   "CACHE_ARCH")


def check_arch_build_args(config: StackConfig, res: Declared) -> list[str]:
    """Each arch-dependent build arg an image sets is the one this stack's arch policy gives.

    gfx1250 is gfx12-numbered but a datacenter part: USE_ROCM_CK_SDPA_GFX12
    (RDNA4 only) must stay 0 there, and coexec scheduling is gfx950's and
    gfx1250's alone. An arg the image does not set is not judged here.
    """
    from rocm_bake.image_plan import arch_build_args

    args = res.props.get("buildArgs") if res.type == IMAGE else None
    if not isinstance(args, Mapping):
        return []
    target = image_target(res)
    if target is not None and not target.device_code:
        return []
    want = arch_build_args(config, config.policy())
    return [f"{res.name}: {key}={args[key]!r}, but stack {config.stack} ({config.pytorch_rocm_arch}) builds with "
            f"{key}={want[key]!r}" for key in ARCH_BUILD_ARGS if _known(args.get(key)) and args[key] != want[key]]


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string in a value with where it sits; internal keys (the pickled provider) are not inputs."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and not key.startswith("__"):
                yield from _strings(key, where)
                yield from _strings(item, f"{where}.{key}" if where else key)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")


def check_own_arches(config: StackConfig, res: Declared) -> list[str]:
    """A stack's resources name only its own arches: another arch's name means another stack's artifact."""
    if res.type == "pulumi:pulumi:Stack" or res.type.startswith("pulumi:providers:"):
        return []
    own = set(config.arches)
    foreign: dict[str, str] = {}
    for where, text in [("name", res.name), *_strings(res.props, "")]:
        for match in ARCH_TOKEN.finditer(text):
            if match.group() not in own:
                foreign.setdefault(match.group(), where)
    return [f"{res.name} names {arch} (in {where}), which is not an arch of stack {config.stack} "
            f"({', '.join(config.arches)})" for arch, where in foreign.items()]


def is_publishing(res: Declared) -> bool:
    """The publish resources (release, assets, gh-pages), known by their types."""
    return res.type in PUBLISHING


def check_own_release(config: StackConfig, res: Declared) -> list[str]:
    """A stack publishes only its own release, and only when ``rocm-bake:publish`` says so."""
    from rocm_bake.publish.naming import release_tag

    if not is_publishing(res):
        return []
    props = res.props
    problems = []
    if not config.publish:
        problems.append(f"{res.name} publishes, but stack {config.stack} has rocm-bake:publish false "
                        "(publishing is a separate decision)")
    own = config.pytorch_rocm_arch
    arch = props.get("arch")
    if isinstance(arch, str):
        try:
            theirs = declared_arch_set(arch)
        except RocmBakeError as exc:
            theirs = None
            problems.append(f"{res.name}: {exc}")
        if theirs is not None and theirs != own:
            problems.append(f"{res.name} publishes {theirs.spelling}'s index, not stack {config.stack}'s "
                            f"({own.spelling})")
    checks = (("repo", config.github_repo, "rocm-bake:githubRepo"),
              ("rocm_version", config.rocm_version, "rocm-bake:rocmVersion"),
              ("tag", release_tag(own, config.rocm_version), "its own release"))
    for key, want, source in checks:
        value = props.get(key)
        if isinstance(value, str) and want is not None and value != want:  # no githubRepo: publish is off
            problems.append(f"{res.name} {key} {value!r} is not this stack's {want!r} ({source})")
    return problems


RULES: tuple[Rule, ...] = (
    Rule("arch-build-args", "The build args the arch decides (PYTORCH_ROCM_ARCH, USE_ROCM_CK_SDPA_GFX12, "
         "AMDGPU_SCHED_STRATEGY, ROCM_PRUNE_KEEP, CACHE_ARCH) are the stack's own: gfx1250 is no RDNA4 part "
         "despite its number.", check_arch_build_args),
    Rule("arch-scoped-tags", "Images are tagged by arch (<arch>-rocm<version>), never :latest, which is "
         "written by whichever arch was pushed last.", check_tags),
    Rule("per-arch-cache-refs", "Each arch's registry layer cache is its own (cache:<target>-<CACHE_ARCH>); "
         "triton-wheel, which compiles no device code, shares cache:triton-wheel-shared.", check_cache),
    Rule("prebuild-kernels", "AITER PREBUILD_KERNELS is 0 unless the stack pins a level; 2 is refused off "
         "CDNA, where it produces no wheel.", check_prebuild),
    Rule("own-arches-only", "A stack's resources name only its own arches.", check_own_arches),
    Rule("own-release-only", "A stack publishes only its own release (wheels-<arch>-rocm<version>), and only "
         "with rocm-bake:publish true.", check_own_release),
)


def violations(config: StackConfig, resources: list[Declared]) -> list[tuple[str, str]]:
    """(rule, message) for every breach in ``resources``: the pack's verdict without the engine."""
    return [(rule.name, message) for res in resources for rule in RULES for message in rule.check(config, res)]

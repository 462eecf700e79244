"""What every rocm-bake dynamic provider shares: typed inputs echoed into outputs, the engine's unknown
marker, check(), plain errors, and a resource type of its own."""

from __future__ import annotations

import dataclasses
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Self

import pulumi
import pulumi.dynamic
from pulumi.dynamic import CheckFailure, CheckResult, DiffResult, ResourceProvider
from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN

from rocm_bake.errors import RocmBakeError
from rocm_bake.resource_types import UNTYPED

__all__ = ["UNKNOWN", "ProviderInputs", "TypedResource", "has_unknown", "check_inputs", "unknown_or_replace"]


@dataclasses.dataclass(frozen=True)
class ProviderInputs:
    """A dynamic resource's inputs as one typed value; subclasses are frozen dataclasses of the input fields.

    The engine stores a dynamic resource's inputs and outputs as one flat
    property map, and every provider echoes its inputs into its outputs so
    ``diff``, ``read`` and ``delete`` see them again. This class is that echo,
    written once: ``to_props``/``declared`` on the program side, ``from_props``
    in the provider (state is an edge: ``EDGE_PARSERS`` turn its plain values
    back into their types, e.g. ``{"arch": ArchSet}``), ``outputs`` for what
    ``create``/``update`` return.
    """

    #: Output names the resource declares (``None`` until the provider fills them in).
    OUTPUTS: ClassVar[tuple[str, ...]] = ()
    #: Field -> constructor applied to the plain value read back from state.
    EDGE_PARSERS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The input keys, in declaration order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> Self:
        """The inputs out of a property map (news, olds or state); a key absent there is None."""
        values = {key: props.get(key) for key in cls.keys()}
        for key, parse in cls.EDGE_PARSERS.items():
            if values.get(key) is not None:
                values[key] = parse(values[key])
        return cls(**values)

    def to_props(self) -> dict[str, Any]:
        """The inputs as the engine's property map (no deep copy: Outputs stay Outputs)."""
        return {key: getattr(self, key) for key in self.keys()}

    def declared(self) -> dict[str, Any]:
        """What the resource is declared with: its inputs and every output name, unset."""
        return {**self.to_props(), **{name: None for name in self.OUTPUTS}}

    def outputs(self, **outs: Any) -> dict[str, Any]:
        """What create/update return: the inputs echoed, then the outputs they produced."""
        return {**self.to_props(), **outs}


def has_unknown(props: dict[str, Any], keys: Iterable[str]) -> bool:
    """True while preview still lacks any of ``keys`` (a value known only after apply)."""

    def unknown(value: Any) -> bool:
        # The engine's marker arrives as the string in diff and as an ``Unknown`` in check.
        if isinstance(value, Unknown) or (isinstance(value, str) and value == UNKNOWN):
            return True
        if isinstance(value, (list, tuple)):
            return any(unknown(v) for v in value)
        return False

    return any(unknown(props.get(k)) for k in keys)


def check_inputs(news: dict[str, Any], validators: dict[str, Callable[[Any], None]]) -> CheckResult:
    """Run each key's validator in ``check()``, so bad input fails in preview, before any apply.

    A value still unknown in preview is checked once it is known (the engine
    calls ``check`` again during ``up``).
    """
    failures = []
    for key, validate in validators.items():
        value = news.get(key)
        if value is None or has_unknown(news, [key]):
            continue
        try:
            validate(value)
        except RocmBakeError as exc:
            failures.append(CheckFailure(key, str(exc)))
    return CheckResult(news, failures)


def unknown_or_replace(olds: dict[str, Any], news: dict[str, Any], input_keys: Iterable[str],
                       replace_keys: Iterable[str], *, delete_first: bool = True) -> DiffResult | None:
    """The diff every provider starts with: a change while inputs are unknown (preview), a
    replace when a key that names the output moved; None to go on comparing.

    ``delete_first`` suits an output this machine owns at one path (a local
    directory: the new one may be the old one's place). What others use from
    elsewhere (a published release) is replaced create-first, so a new
    target that fails leaves the old one whole.
    """
    if has_unknown(news, input_keys):
        return DiffResult(changes=True)
    replaces = [k for k in replace_keys if olds.get(k) != news.get(k)]
    if replaces:
        return DiffResult(changes=True, replaces=replaces, delete_before_replace=delete_first)
    return None


class _OneLineErrors:
    """Stands in for ``traceback`` inside Pulumi's dynamic-provider host (``python -m pulumi.dynamic``).

    The host answers every exception of a provider method with
    ``traceback.format_exc()``, so a refused input or a GitHub 401 reached the
    user as a Python traceback. Our own errors (``RocmBakeError``: the message
    already names the cause) become that one line, and the engine puts the
    resource's name in front of it; anything else (a bug) keeps its traceback.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    @staticmethod
    def format_exc(*args: Any, **kwargs: Any) -> str:
        exc = sys.exc_info()[1]
        if isinstance(exc, RocmBakeError):
            return " ".join(str(exc).split())
        return traceback.format_exc(*args, **kwargs)


def one_line_provider_errors() -> None:
    """Install ``_OneLineErrors`` when this process is the dynamic-provider host (never in the program or tests)."""
    host = sys.modules.get("__main__")
    spec = getattr(host, "__spec__", None)
    if spec is not None and spec.name == "pulumi.dynamic.__main__" and getattr(host, "traceback", None) is traceback:
        host.traceback = _OneLineErrors()  # type: ignore[union-attr]


one_line_provider_errors()


def _untyped(alias: pulumi.Alias | str) -> pulumi.Alias | str:
    """The same former place under the former type (a URN string already names its type: kept as it is)."""
    if isinstance(alias, str):
        return alias
    return pulumi.Alias(name=alias.name, type_=UNTYPED, parent=alias.parent, stack=alias.stack,
                        project=alias.project)


def with_untyped_aliases(opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """``opts`` plus the aliases that adopt this resource's state from when every dynamic resource was UNTYPED.

    One alias for the same place under the old type, and one for each former
    place ``opts`` already aliases (a resource that moved under a component
    was recorded at the root *and* untyped), so every earlier layout upgrades
    with no replacement and no re-run.
    """
    opts = opts or pulumi.ResourceOptions()
    former = list(opts.aliases or [])
    extra: list[pulumi.Alias | str] = [pulumi.Alias(type_=UNTYPED), *(_untyped(a) for a in former)]
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=extra))  # lists concatenate


class TypedResource(pulumi.dynamic.Resource):
    """A dynamic resource with a type of its own, still adopting state recorded under the untyped one.

    Subclasses name their type from ``rocm_bake.resource_types``:
    ``class FetchedWheels(TypedResource, module=FETCHED_WHEELS.module, name=FETCHED_WHEELS.name)``.
    """

    def __init__(self, provider: ResourceProvider, name: str, props: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(provider, name, props, with_untyped_aliases(opts))

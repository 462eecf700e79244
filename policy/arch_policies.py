"""The arch rules (``rocm_bake.arch_rules``) as mandatory pulumi-policy resource policies.

Kept apart from ``__main__.py``, which serves them (``PolicyPack`` blocks
forever), so tests can evaluate these same policies on a planned stack.

Which stack is checked, and its config, come from the engine the way every
Python policy pack gets them: the language host's RunPlugin starts the pack
under ``python -m pulumi.policy`` behind the SDK's PolicyProxy, which waits
for the engine's ConfigureStack and puts the stack in ``PULUMI_STACK`` and
its config in ``PULUMI_CONFIG``. They are parsed once, on first use, into a
``StackConfig`` (secret keys dropped unread); a stack whose config does not
parse is reported once, naming the key, on the first resource judged (one
mandatory violation fails the run; every policy on every resource saying
the same would bury it).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy
from pulumi_policy.proxy import UnknownValueError

from rocm_bake.arch_rules import RULES, UNKNOWN, Declared, Rule, stack_config
from rocm_bake.config import StackConfig
from rocm_bake.errors import RocmBakeError

PACK_NAME = "rocm-bake-arch-rules"

_lock = threading.Lock()
#: ``config``: the parsed config or why there is none; ``reported``: that reason was said once already.
_stack: dict[str, StackConfig | str | bool] = {}


def configure_stack(stack: str, config: Mapping[str, Any], secret_keys: Sequence[str] = ()) -> None:
    """Parse the stack's config once; a bad one is kept as its one-line error."""
    try:
        parsed: StackConfig | str = stack_config(stack, config, frozenset(secret_keys))
    except RocmBakeError as exc:
        parsed = str(exc)
    with _lock:
        _stack["config"] = parsed
        _stack.pop("reported", None)


def _from_engine() -> None:
    import pulumi.runtime

    stack = os.environ.get("PULUMI_STACK")
    if not stack:
        with _lock:
            _stack["config"] = ("the policy pack was started without PULUMI_STACK: run it through "
                                "`pulumi preview|up --policy-pack policy`, whose language host sets it")
        return
    configure_stack(stack, pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())


def current_config() -> StackConfig | str:
    """The checked stack's config, or why there is none."""
    with _lock:
        known = "config" in _stack
    if not known:
        _from_engine()
    with _lock:
        return _stack["config"]  # type: ignore[return-value]


def first_telling() -> bool:
    """True the first time the pack would report that the config is unusable, False after."""
    with _lock:
        told = bool(_stack.get("reported"))
        _stack["reported"] = True
    return not told


def plain(value: Any) -> Any:
    """The SDK's unknown-checking proxy as plain values, with what preview cannot know as ``UNKNOWN``."""
    if isinstance(value, Mapping):
        out = {}
        for key in value:
            try:
                out[key] = plain(value[key])
            except UnknownValueError:
                out[key] = UNKNOWN
        return out
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = []
        for i in range(len(value)):
            try:
                items.append(plain(value[i]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


def validator(rule: Rule):
    """One rule's check over one resource, each breach a violation on that resource."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        config = current_config()
        if isinstance(config, str):
            if first_telling():
                report_violation(config, args.urn)
            return
        resource = Declared(args.resource_type, args.name, plain(args.props))
        for message in rule.check(config, resource):
            report_violation(message, args.urn)

    return validate


POLICIES = [
    ResourceValidationPolicy(name=rule.name, description=rule.description, validate=validator(rule),
                             enforcement_level=EnforcementLevel.MANDATORY)
    for rule in RULES
]

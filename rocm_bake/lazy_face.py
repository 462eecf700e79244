"""Lazy package faces (PEP 562): a package exports names without importing them.

The CLI's start-up is part of its performance: ``rocm-bake --version`` must not
pay for httpx or pydantic, so a face maps each public name to the submodule
that defines it and imports that submodule on first use only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_getattr(package: str, exports: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that loads ``exports[name]`` on first access."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__

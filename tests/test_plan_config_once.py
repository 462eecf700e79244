"""``rocm-bake plan``: each stack's config is read and validated once, before any stack is declared."""

from __future__ import annotations

import pytest

from rocm_bake.commands.plan import plans
from rocm_bake.config import StackConfig
from rocm_bake.errors import RocmBakeError


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stack of every StackConfig validated while the test runs."""
    seen: list[str] = []
    validate = StackConfig.model_validate.__func__  # type: ignore[attr-defined]

    def counted(cls, obj, *args, **kwargs):
        seen.append(obj.get("stack") if isinstance(obj, dict) else repr(obj))
        return validate(cls, obj, *args, **kwargs)

    monkeypatch.setattr(StackConfig, "model_validate", classmethod(counted))
    return seen


def test_each_stack_is_validated_once(validations: list[str]) -> None:
    results = plans(["gfx950", "gfx1201", "gfx950"], {"rocm-bake:buildArgs": '{"EXTRA": "1"}'})
    assert validations == ["gfx950", "gfx1201"]
    assert [r["stack"] for r in results] == ["gfx950", "gfx1201"]
    images = [r for r in results[0]["resources"] if r["type"] == "docker-build:index:Image"]
    assert images and all(r["inputs"]["buildArgs"]["EXTRA"] == "1" for r in images)  # --set text decoded once


def test_a_bad_stack_fails_before_any_is_declared(validations: list[str]) -> None:
    with pytest.raises(RocmBakeError, match=r"rocm-bake:buildArgs: not a JSON object"):
        plans(["gfx950"], {"rocm-bake:buildArgs": "{"})
    with pytest.raises(RocmBakeError, match="rocm-bake:pytorchRocmArch"):
        plans(["gfx950", "gfx1201"], {"rocm-bake:pytorchRocmArch": "gfx9999"})
    assert validations == ["gfx950"]  # the first stack's refusal stops the rest

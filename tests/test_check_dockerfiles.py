"""``make check-dockerfiles`` on the real BuildKit: the real Dockerfiles pass, broken ones fail naming why.

The same code the make target runs (dockerfiles/check_dockerfiles.py) on a private
buildkitd that can reach no registry, so "offline" is what is tested.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine_fixtures import ROOT, engine

sys.path.insert(0, str(ROOT / "dockerfiles"))
import check_dockerfiles as tool  # noqa: E402  (dockerfiles/check_dockerfiles.py: make check-dockerfiles)

from rocm_bake.config import StackConfig, load_stack_config  # noqa: E402


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tool.OfflineBuilder]:
    engine("buildkitd"), engine("buildx")
    started = tool.start_offline_builder(tmp_path_factory.mktemp("check-buildkit"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def config() -> StackConfig:
    return load_stack_config("gfx950")


def broken(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of a real Dockerfile (same name, so the same target's contexts) with one edit."""
    text = (ROOT / "dockerfiles" / name).read_text()
    assert old in text, f"{name} no longer holds {old!r}: update the test"
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


def test_every_real_dockerfile_passes_offline(kit: tool.OfflineBuilder, config: StackConfig) -> None:
    files = tool.dockerfiles()
    assert {f.name for f in files} >= {"pytorch-base.Dockerfile", "triton-wheel.Dockerfile", "torch.Dockerfile",
                                       "torchvision.Dockerfile", "amd_aiter.Dockerfile", "vllm.Dockerfile",
                                       "torch-runtime.Dockerfile"}
    results = tool.check_all(files, kit.name, kit.env, config)
    assert [r.line() for r in results if not r.ok] == []


def test_no_real_dockerfile_pulls_a_frontend_from_docker_hub() -> None:
    for path in tool.dockerfiles():
        assert not any(line.lower().startswith("# syntax=") for line in path.read_text().splitlines()), path


def test_undefined_stage_in_copy_from_fails_naming_it(kit: tool.OfflineBuilder, config: StackConfig,
                                                      tmp_path: Path) -> None:
    path = broken(tmp_path, "torch.Dockerfile", "COPY --from=triton-wheel", "COPY --from=tritonwheel")
    result = tool.check(path, kit.name, kit.env, config)
    assert not result.ok
    assert "failed to resolve source metadata for docker.io/library/tritonwheel" in result.complaint
    assert "neither a stage of this Dockerfile" in result.complaint
    assert "connection refused" in result.complaint  # the dead proxy: nothing was fetched


def test_undefined_arg_in_from_fails_naming_it(kit: tool.OfflineBuilder, config: StackConfig,
                                               tmp_path: Path) -> None:
    path = broken(tmp_path, "pytorch-base.Dockerfile", "FROM ${ROCM_IMAGE} AS base", "FROM ${ROCM_IMAGEX} AS base")
    result = tool.check(path, kit.name, kit.env, config)
    assert not result.ok
    assert "UndefinedArgInFrom" in result.complaint
    assert "FROM argument 'ROCM_IMAGEX' is not declared" in result.complaint


def test_a_syntax_line_fails_offline_naming_the_frontend(kit: tool.OfflineBuilder, config: StackConfig,
                                                         tmp_path: Path) -> None:
    text = (ROOT / "dockerfiles" / "torchvision.Dockerfile").read_text()
    path = tmp_path / "torchvision.Dockerfile"
    path.write_text("# syntax=docker/dockerfile:1.7\n" + text)
    result = tool.check(path, kit.name, kit.env, config)
    assert not result.ok
    assert "docker.io/docker/dockerfile:1.7" in result.complaint and "# syntax=" in result.complaint


def test_the_make_target_exits_1_and_names_the_broken_file(kit: tool.OfflineBuilder, tmp_path: Path) -> None:
    path = broken(tmp_path, "vllm.Dockerfile", "COPY --from=amd_aiter", "COPY --from=aiter")
    good = ROOT / "dockerfiles" / "torch.Dockerfile"
    result = subprocess.run([sys.executable, str(ROOT / "dockerfiles" / "check_dockerfiles.py"), "--builder", kit.name,
                             str(good), str(path)], env={**os.environ, **kit.env}, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ok: torch.Dockerfile" in result.stdout
    assert "FAILED: vllm.Dockerfile: " in result.stdout and "docker.io/library/aiter" in result.stdout
    assert "1 of 2 passed" in result.stdout

"""The version/naming rules (``rocm_bake.index.versions``), one wheel filename at a time."""

from __future__ import annotations

import pytest

from rocm_bake.errors import RocmBakeError
from rocm_bake.index.versions import Rule, check_version, parse_name, vllm_local

NATIVE = "cp314-cp314-linux_x86_64"
PURE = "py3-none-any"


def check(filename: str, rocm_version: str = "10.1.0") -> None:
    check_version(parse_name(filename, "gfx950"), "gfx950", rocm_version)


@pytest.mark.parametrize(
    "filename",
    [
        f"torch-2.15.0a0+git31a77fc.rocm10.1.0-{NATIVE}.whl",
        f"triton-3.6.0+git0123456789abcdef.rocm10.1.0-{NATIVE}.whl",
        f"amd_aiter-0.1.28+git31a77fc.rocm10.1.0-{NATIVE}.whl",
        f"torchvision-0.30.0+rocm10.1.0-{NATIVE}.whl",
        f"atom-0.2.0+rocm10.1.0-{NATIVE}.whl",
        f"cupy-14.0.0+rocm10.1.0-{NATIVE}.whl",
        f"lmcache-0.3.9+rocm10.1.0-{NATIVE}.whl",
        f"vllm-0.12.0+rocm101-{NATIVE}.whl",
        f"nixl-0.7.0-{PURE}.whl",
        f"triton_kernels-1.0.0-{PURE}.whl",
        f"nixl_rocm-0.7.0-{NATIVE}.whl",
        f"somepurelib-1.0-{PURE}.whl",
        f"somenative-1.0+rocm10.1.0-{NATIVE}.whl",
    ],
)
def test_seed_versions_pass(filename: str) -> None:
    check(filename)


@pytest.mark.parametrize(
    ("filename", "rule"),
    [
        (f"torch-2.15.0a0+rocm10.1.0-{NATIVE}.whl", "git-rocm-local"),
        (f"torch-2.15.0a0+git31a77fc-{NATIVE}.whl", "git-rocm-local"),
        (f"torch-2.15.0a0+git31a77fc.rocm7.1.0-{NATIVE}.whl", "git-rocm-local"),
        (f"torch-2.15.0-{NATIVE}.whl", "git-rocm-local"),
        (f"amd_aiter-0.1.28+gitXYZ.rocm10.1.0-{NATIVE}.whl", "git-rocm-local"),
        (f"torchvision-0.30.0-{NATIVE}.whl", "rocm-local"),
        (f"cupy-14.0.0+rocm101-{NATIVE}.whl", "rocm-local"),
        (f"vllm-0.12.0+rocm10.1.0-{NATIVE}.whl", "vllm-local"),
        (f"nixl-0.7.0-{NATIVE}.whl", "pure-exempt"),
        (f"triton_kernels-1.0.0-{NATIVE}.whl", "pure-exempt"),
        (f"somenative-1.0-{NATIVE}.whl", "rocm-local"),
        (f"rocm_torch-1.0-{PURE}.whl", "metapackage"),
    ],
)
def test_rule_violations_name_file_arch_and_rule(filename: str, rule: str) -> None:
    with pytest.raises(RocmBakeError) as err:
        check(filename)
    message = str(err.value)
    assert filename in message and "gfx950" in message and f"rule {rule}" in message


@pytest.mark.parametrize(
    "filename",
    [
        f"torch-2.15.0a0+git31a77fc.rocm10.1.0.gfx950-{NATIVE}.whl",
        f"torchvision-0.30.0+rocm10.1.0.gfx1201-{NATIVE}.whl",
        f"nixl_rocm-0.7.0+gfx90a-{NATIVE}.whl",
        f"nixl-0.7.0+gfx950-{PURE}.whl",
    ],
)
def test_arch_in_version_refused_with_the_reason(filename: str) -> None:
    with pytest.raises(RocmBakeError) as err:
        check(filename)
    message = str(err.value)
    assert "rule no-arch-in-version" in message and filename in message
    assert "resolve differently per machine" in message


@pytest.mark.parametrize(
    ("filename", "rule"),
    [
        ("../torch-2.15.0-py3-none-any.whl", "safe-filename"),
        ("sub/torch-2.15.0-py3-none-any.whl", "safe-filename"),
        ("torch..evil-1.0-py3-none-any.whl", "safe-filename"),
        ("torch-2.15.0.whl", "wheel-filename"),
        ("torch-notaversion-py3-none-any.whl", "wheel-filename"),
    ],
)
def test_bad_filenames(filename: str, rule: str) -> None:
    with pytest.raises(RocmBakeError, match=f"rule {rule}"):
        parse_name(filename, "gfx950")


def test_rocm_version_is_configurable() -> None:
    check(f"torchvision-0.30.0+rocm7.1.0-{NATIVE}.whl", rocm_version="7.1.0")
    check(f"vllm-0.12.0+rocm71-{NATIVE}.whl", rocm_version="7.1.0")
    with pytest.raises(RocmBakeError, match=r"rule rocm-local.*\+rocm7\.1\.0"):
        check(f"torchvision-0.30.0+rocm10.1.0-{NATIVE}.whl", rocm_version="7.1.0")
    with pytest.raises(RocmBakeError, match="not X.Y.Z"):
        check(f"torchvision-0.30.0+rocm10.1.0-{NATIVE}.whl", rocm_version="10.1")
    assert vllm_local("10.1.0") == "rocm101"


def test_names_are_canonicalized_for_rules() -> None:
    assert parse_name(f"amd_aiter-0.1+git31a77fc.rocm10.1.0-{NATIVE}.whl", "gfx950").rule is Rule.GIT_ROCM
    assert parse_name(f"Triton_Kernels-1.0-{PURE}.whl", "gfx950").project == "triton-kernels"
    assert parse_name(f"nixl_rocm-0.7.0-{NATIVE}.whl", "gfx950").rule is Rule.BY_NAME

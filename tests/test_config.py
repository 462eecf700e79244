"""Stack config: every shipped stack loads; bad keys and values name the key."""

import pytest

from rocm_bake.config import STACKS_DIR, load_stack_config
from rocm_bake.errors import RocmBakeError


@pytest.mark.parametrize("stack", ["gfx950", "gfx1201", "gfx1151", "gfx1250"])
def test_one_stack_per_default_arch(stack):
    config = load_stack_config(stack)
    assert config.arches == [stack] and not config.is_fat
    assert config.image_tag == f"{stack}-rocm10.1.0"
    assert config.publish is False  # publishing is a separate decision


def test_fat_stack_is_one_build_one_tag_set():
    config = load_stack_config("fat-gfx950-gfx1201")
    assert config.is_fat and config.arches == ["gfx950", "gfx1201"]
    assert config.image_tag == "gfx950_gfx1201-rocm10.1.0"


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"rocm-bake:pubish": "true"}, "unknown config key 'rocm-bake:pubish'"),
        ({"rocm-bake:prebuildKernels": "2"}, "rocm-bake:prebuildKernels: PREBUILD_KERNELS=2 refused for gfx1201"),
        ({"rocm-bake:pytorchRocmArch": "GFX1201"}, "rocm-bake:pytorchRocmArch: malformed"),
        ({"rocm-bake:publish": "maybe"}, "rocm-bake:publish"),
        ({"rocm-bake:rocmVersion": "10.1"}, "rocm-bake:rocmVersion"),
    ],
)
def test_bad_config_names_the_key(overrides, words):
    with pytest.raises(RocmBakeError, match=words):
        load_stack_config("gfx1201", overrides)


def test_other_namespaces_are_left_to_their_providers():
    assert load_stack_config("gfx950", {"github:owner": "x"}).stack == "gfx950"


def test_missing_stack_lists_known(tmp_path):
    with pytest.raises(RocmBakeError, match="no stack 'gfx9000'.*gfx950"):
        load_stack_config("gfx9000")
    assert (STACKS_DIR / "Pulumi.gfx950.yaml").exists()

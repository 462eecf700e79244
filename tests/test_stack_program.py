"""The Pulumi program under Pulumi's mock runtime: declared resources and inputs.

The mocks are the ones `rocm-bake plan` uses, so these tests also pin what plan shows.
"""

import pytest

from rocm_bake.config import load_stack_config
from rocm_bake.resource_types import DYNAMIC, GPU_TEST


def declare(stack, overrides=None):
    from components.stack import define_stack
    from rocm_bake.plan_runtime import declare_under_mocks

    mocks, exports = declare_under_mocks(stack, load_stack_config(stack, overrides), define_stack)
    images = {r.name: r.inputs for r in mocks.registered if r.typ == "docker-build:index:Image"}
    return mocks.registered, images, exports


@pytest.mark.parametrize("stack", ["gfx950", "gfx1201", "gfx1151", "gfx1250"])
def test_each_arch_stack_declares_every_target_tagged_by_arch(stack):
    _, images, exports = declare(stack)
    assert set(images) == {f"{t}-{stack}" for t in ("pytorch-base", "triton-wheel", "torch", "torchvision", "amd_aiter", "vllm", "torch-runtime")}
    for name, inputs in images.items():
        (tag,) = inputs["tags"]
        assert tag.endswith(f":{stack}-rocm10.1.0") and ":latest" not in tag
        assert inputs["builder"] == {"name": "rocm-bake"}
        assert inputs["platforms"] == ["linux/amd64"]
        assert inputs["push"] is True and inputs["buildOnPreview"] is False
    assert exports["arch"] == stack
    assert exports["images"]["torch"].startswith(f"127.0.0.1:5000/rocm-bake/torch:{stack}-rocm10.1.0@sha256:")


@pytest.mark.parametrize(
    ("stack", "ck", "coexec"),
    [("gfx950", "0", "coexec"), ("gfx1201", "1", ""), ("gfx1151", "0", ""), ("gfx1250", "0", "coexec")],
)
def test_build_args_follow_arch_policy(stack, ck, coexec):
    _, images, _ = declare(stack)
    args = images[f"torch-{stack}"]["buildArgs"]
    assert args["PYTORCH_ROCM_ARCH"] == stack
    assert args["USE_ROCM_CK_SDPA_GFX12"] == ck
    assert args["AMDGPU_SCHED_STRATEGY"] == coexec
    assert args["PREBUILD_KERNELS"] == "0"
    assert args["ROCM_PRUNE_KEEP"] == f"-{stack}"


def test_cache_scoped_by_arch_except_triton():
    _, a, _ = declare("gfx950")
    _, b, _ = declare("gfx1201")

    def ref(images, name):
        (cache_to,) = images[name]["cacheTo"]
        (cache_from,) = images[name]["cacheFrom"]
        assert cache_to["registry"]["ref"] == cache_from["registry"]["ref"]
        assert cache_to["registry"]["mode"] == "max"
        return cache_to["registry"]["ref"]

    assert ref(a, "triton-wheel-gfx950") == ref(b, "triton-wheel-gfx1201")
    assert "PYTORCH_ROCM_ARCH" not in a["triton-wheel-gfx950"]["buildArgs"]
    for target in ("pytorch-base", "torch", "amd_aiter", "vllm"):
        assert ref(a, f"{target}-gfx950") != ref(b, f"{target}-gfx1201")
        assert ref(a, f"{target}-gfx950").endswith("-gfx950")


def test_dependencies_are_named_contexts_pinned_by_digest():
    _, images, _ = declare("gfx1151")
    named = images["vllm-gfx1151"]["context"]["named"]
    assert set(named) == {"pytorch-base", "torch", "amd_aiter", "triton-wheel"}
    for dep, ctx in named.items():
        assert ctx["location"].startswith(f"docker-image://127.0.0.1:5000/rocm-bake/{dep}:gfx1151-rocm10.1.0@sha256:")


def test_fat_build_gets_one_set_of_tags():
    _, images, exports = declare("fat-gfx950-gfx1201")
    assert exports["fat_build"] is True
    torch = images["torch-gfx950_gfx1201"]
    assert torch["tags"] == ["127.0.0.1:5000/rocm-bake/torch:gfx950_gfx1201-rocm10.1.0"]
    assert torch["buildArgs"]["PYTORCH_ROCM_ARCH"] == "gfx950;gfx1201"
    assert torch["buildArgs"]["USE_ROCM_CK_SDPA_GFX12"] == "1"
    assert torch["buildArgs"]["ROCM_PRUNE_KEEP"] == "-gfx950 -gfx1201"


def test_targets_narrowing_keeps_dependencies():
    _, images, _ = declare("gfx950", {"rocm-bake:targets": "torchvision"})
    assert set(images) == {"pytorch-base-gfx950", "triton-wheel-gfx950", "torch-gfx950", "torchvision-gfx950"}


def test_builder_and_registry_come_from_config():
    _, images, _ = declare("gfx950", {"rocm-bake:builder": "farm", "rocm-bake:registry": "reg.example:443"})
    inputs = images["torch-gfx950"]
    assert inputs["builder"] == {"name": "farm"}
    assert inputs["tags"] == ["reg.example:443/rocm-bake/torch:gfx950-rocm10.1.0"]


def dynamic(resources, name):
    (found,) = [r for r in resources if r.typ in DYNAMIC and r.name == name]
    return found.inputs


def test_wheels_fetched_from_every_wheel_image_then_indexed():
    resources, _, exports = declare("gfx1201")
    fetch = dynamic(resources, "wheels-gfx1201")
    assert fetch["arch"] == "gfx1201" and fetch["dist"] == "dist"
    refs = fetch["image_refs"]
    assert len(refs) == 5 and all(":gfx1201-rocm10.1.0@sha256:" in r for r in refs)
    assert not any("pytorch-base" in r for r in refs)  # no wheels in the base image
    index = dynamic(resources, "index-gfx1201")
    assert index["arch"] == "gfx1201"
    assert exports["publish"].startswith("not declared: rocm-bake:publish is false")


def test_publish_on_declares_release_per_arch(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    resources, _, exports = declare("gfx950", {"rocm-bake:publish": "true", "rocm-bake:githubRepo": "octo/r"})
    (release,) = [r for r in resources if r.name == "publish-gfx950-release"]
    assert release.inputs["tag"] == "wheels-gfx950-rocm10.1.0"
    assert exports["release_tag"] == "wheels-gfx950-rocm10.1.0"


def test_fat_build_is_a_full_stack(monkeypatch):
    """One fat binary, one index of its own (index/gfx950-gfx1201/), its own release when publishing."""
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    resources, _, exports = declare("fat-gfx950-gfx1201", {"rocm-bake:publish": "true", "rocm-bake:githubRepo": "octo/r"})
    dynamic = {r.name: r.inputs for r in resources if r.typ in DYNAMIC}
    assert dynamic["wheels-gfx950-gfx1201"]["arch"] == "gfx950;gfx1201"
    assert all(":gfx950_gfx1201-rocm10.1.0@" in ref for ref in dynamic["wheels-gfx950-gfx1201"]["image_refs"])
    assert dynamic["index-gfx950-gfx1201"]["index_dir"].endswith("index/gfx950-gfx1201")
    (release,) = [r for r in resources if r.name == "publish-gfx950-gfx1201-release"]
    assert release.inputs["tag"] == "wheels-gfx950-gfx1201-rocm10.1.0"


def test_gpu_test_declared_where_a_node_has_the_card():
    resources, _, exports = declare("gfx1151")
    (test,) = [r for r in resources if r.name.startswith("gpu-test-")]
    assert test.name == "gpu-test-gfx1151" and test.typ == GPU_TEST.token
    assert test.inputs["arch"] == "gfx1151" and test.inputs["node"] == "snoc-strix"
    digest = exports["images"]["torch-runtime"].split("@")[1]
    assert test.inputs["digest"] == digest  # re-runs when the image digest changes
    assert exports["gpu_tested"] == "(known after apply)"  # the test's own result


@pytest.mark.parametrize("stack", ["gfx950", "gfx1250"])
def test_no_node_declares_no_gpu_test_and_says_not_covered(stack):
    resources, _, exports = declare(stack)
    assert not [r for r in resources if r.name.startswith("gpu-test-")]
    assert exports["gpu_tested"] is False
    assert exports["gpu_test"] == f"not covered: no fleet node has {stack}; cross-compiled only"


def test_gpu_host_without_the_card_fails_the_program():
    from rocm_bake.errors import RocmBakeError
    from components.gpu_test import declare_gpu_test

    with pytest.raises(RocmBakeError, match="snoc-navi has gfx1201, not gfx1151"):
        declare_gpu_test(load_stack_config("gfx1151", {"rocm-bake:gpuHost": "snoc-navi"}), {"torch-runtime": object()})

"""The per-stack GPU test resource under Pulumi's mock runtime, and its provider's diff and check.

Single-arch stacks are pinned in test_stack_program.py; these cover the
cases around them: fat builds (each arch tested on its own node, an arch
without a node making the whole build not GPU-tested), gpuTest off, the
gpuHost override, and when the provider runs the test again. The run itself
(over a real sshd, through the real engine) is tests/test_gpu_test_engine.py.
"""

import pytest

from rocm_bake.plan_runtime import UNKNOWN_AFTER_APPLY

from rocm_bake.config import load_stack_config
from rocm_bake.errors import RocmBakeError
from rocm_bake.resource_types import GPU_TEST


def declare(stack, overrides=None):
    from components.stack import define_stack
    from rocm_bake.plan_runtime import declare_under_mocks

    mocks, exports = declare_under_mocks(stack, load_stack_config(stack, overrides), define_stack)
    tests = {r.name: r.inputs for r in mocks.registered
             if r.typ == GPU_TEST.token and r.name.startswith("gpu-test-")}
    return tests, exports


def torch_digest(exports):
    return exports["images"]["torch-runtime"].split("@", 1)[1]


def test_fat_build_tests_each_arch_on_its_own_node():
    commands, exports = declare("fat-gfx950-gfx1201", {"rocm-bake:pytorchRocmArch": "gfx1151;gfx1201"})
    assert set(commands) == {"gpu-test-gfx1151", "gpu-test-gfx1201"}
    assert commands["gpu-test-gfx1151"]["arch"] == "gfx1151" and commands["gpu-test-gfx1151"]["node"] == "snoc-strix"
    assert commands["gpu-test-gfx1201"]["arch"] == "gfx1201" and commands["gpu-test-gfx1201"]["node"] == "snoc-navi"
    for inputs in commands.values():
        assert inputs["digest"] == torch_digest(exports)  # what re-runs it
        assert inputs["image"] == exports["images"]["torch-runtime"]  # by digest
        assert inputs["test"].startswith("python3 -c 'import torch;")  # torch-runtime's gpu_test
    # the tests' own result: only known once they have run (they fail the update unless the test passed)
    assert exports["gpu_tested"] == UNKNOWN_AFTER_APPLY and "gpu_test" not in exports
    assert exports["gpu_test_node"] == {"gfx1151": "snoc-strix", "gfx1201": "snoc-navi"}


def test_fat_build_with_an_uncovered_arch_is_not_gpu_tested():
    commands, exports = declare("fat-gfx950-gfx1201")
    assert set(commands) == {"gpu-test-gfx1201"}  # the covered arch still runs
    assert exports["gpu_tested"] is False
    assert exports["gpu_test"] == "not covered: no fleet node has gfx950; cross-compiled only"


def test_gpu_test_off_declares_nothing():
    commands, exports = declare("gfx1151", {"rocm-bake:gpuTest": "false"})
    assert commands == {} and exports["gpu_tested"] is False


def test_gpu_host_override_moves_the_test_to_a_node_with_the_card():
    commands, _ = declare("gfx1151", {"rocm-bake:gpuHost": "snoc-strix"})
    assert commands["gpu-test-gfx1151"]["node"] == "snoc-strix"
    with pytest.raises(RocmBakeError, match=r"rocm-bake:gpuHost: not a fleet node \(known: "):
        declare("gfx1151", {"rocm-bake:gpuHost": "nosuch"})


@pytest.mark.parametrize("stack", ["gfx950", "gfx1250"])
def test_gpu_host_on_an_uncovered_arch_still_says_not_covered(stack):
    commands, exports = declare(stack, {"rocm-bake:gpuHost": "snoc-strix"})
    assert commands == {} and exports["gpu_tested"] is False
    assert exports["gpu_test"] == f"not covered: no fleet node has {stack}; cross-compiled only"


OLD = {"arch": "gfx1151", "digest": "sha256:" + "ab" * 32, "node": "snoc-strix", "test": "true",
       "run_template": "docker run {image} {test}", "host": "snoc-strix", "port": 22, "user": None,
       "lock_path": "/tmp/l", "lock_timeout": 3600.0,
       "image": "r.example/rocm-bake/torch-runtime:gfx1151-rocm10.1.0@sha256:" + "ab" * 32}


@pytest.mark.parametrize(("change", "reruns"), [
    ({}, False),
    ({"digest": "sha256:" + "cd" * 32, "image": OLD["image"].replace("ab" * 32, "cd" * 32)}, True),  # new image
    ({"image": OLD["image"].replace("r.example", "other.example")}, False),  # same digest, another registry
    ({"node": "strix-2"}, True),
    ({"test": "false"}, True),
    ({"run_template": "podman run {image} {test}"}, True),
    ({"port": 2222, "host": "strix.lan", "lock_timeout": 60.0}, False),  # how the node is reached: not the test
    ({"image": "r.example/rocm-bake/torch-runtime:gfx1151-rocm10.1.0"}, True),  # preview of a rebuild: bare tag
])
def test_provider_runs_the_test_again_only_when_what_was_tested_changes(change, reruns):
    from components.gpu_test import GpuTestProvider

    assert GpuTestProvider().diff("gfx1151@snoc-strix", OLD, {**OLD, **change}).changes is reruns


def test_provider_check_refuses_another_arch_image_and_waits_for_a_bare_tag():
    from components.gpu_test import GpuTestProvider

    other = {**OLD, "image": OLD["image"].replace("gfx1151-", "gfx1201-")}
    (failure,) = GpuTestProvider().check({}, other).failures
    assert failure.property == "image" and "tagged for gfx1201, not gfx1151" in failure.reason
    assert GpuTestProvider().check({}, {**OLD, "image": OLD["image"].split("@")[0]}).failures == []

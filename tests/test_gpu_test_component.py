"""The per-stack GPU test resource under Pulumi's mock runtime.

Single-arch stacks are pinned in test_stack_program.py; these cover the
cases around them: fat builds (each arch tested on its own node, an arch
without a node making the whole build not GPU-tested), gpuTest off, and the
gpuHost override.
"""

import sys

import pytest

from components.plan_runtime import UNKNOWN_AFTER_APPLY

from rocm_bake.config import load_stack_config
from rocm_bake.errors import RocmBakeError


def declare(stack, overrides=None):
    from components.plan_runtime import declare_under_mocks

    mocks, exports = declare_under_mocks(stack, lambda: load_stack_config(stack, overrides))
    commands = {r.name: r.inputs for r in mocks.registered if r.typ == "command:local:Command"}
    return commands, exports


def torch_digest(exports):
    return exports["images"]["torch-runtime"].split("@", 1)[1]


def test_fat_build_tests_each_arch_on_its_own_node():
    commands, exports = declare("fat-gfx950-gfx1201", {"rocm-bake:pytorchRocmArch": "gfx1151;gfx1201"})
    assert set(commands) == {"gpu-test-gfx1151", "gpu-test-gfx1201"}
    assert "--arch gfx1151" in commands["gpu-test-gfx1151"]["create"]
    assert "--host snoc-strix" in commands["gpu-test-gfx1151"]["create"]
    assert "--host snoc-navi" in commands["gpu-test-gfx1201"]["create"]
    for inputs in commands.values():
        assert inputs["triggers"] == [torch_digest(exports)]
        assert f"--image {exports['images']['torch-runtime']}" in inputs["create"]  # by digest
    # the commands' own result: only known once they have run (they fail the update unless the test passed)
    assert exports["gpu_tested"] == UNKNOWN_AFTER_APPLY and "gpu_test" not in exports
    for inputs in commands.values():  # through this program's interpreter, not a `rocm-bake` on PATH
        assert inputs["create"].startswith(f"{sys.executable} -m rocm_bake gpu-test ")


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
    assert "--host snoc-strix" in commands["gpu-test-gfx1151"]["create"]
    with pytest.raises(RocmBakeError, match="unknown fleet node 'nosuch'"):
        declare("gfx1151", {"rocm-bake:gpuHost": "nosuch"})


@pytest.mark.parametrize("stack", ["gfx950", "gfx1250"])
def test_gpu_host_on_an_uncovered_arch_still_says_not_covered(stack):
    commands, exports = declare(stack, {"rocm-bake:gpuHost": "snoc-strix"})
    assert commands == {} and exports["gpu_tested"] is False
    assert exports["gpu_test"] == f"not covered: no fleet node has {stack}; cross-compiled only"

"""The foundation CLI, run as a real subprocess: arch show, nodes, plan, arches."""

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def rocm_bake(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "rocm_bake", *args], capture_output=True, text=True, cwd=ROOT, env=env
    )


@functools.cache
def planned_outputs(stack: str) -> subprocess.CompletedProcess:
    """``rocm-bake plan STACK --outputs-json``, run once per stack for the tests that read it: it writes nothing."""
    return rocm_bake("plan", stack, "--outputs-json")


def test_arch_show_json_fields():
    result = rocm_bake("arch", "show", "gfx1151", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data) == ["arch", "is_rdna4", "use_ck_sdpa_gfx12", "sched_coexec", "prebuild_kernels",
                          "rocm_prune_keep", "fleet_nodes", "gpu_testable"]
    assert data["fleet_nodes"] == ["snoc-strix"] and data["is_rdna4"] is False


def test_arch_show_refused_pin_exits_nonzero_naming_arch():
    result = rocm_bake("arch", "show", "gfx1250", "--prebuild-kernels", "2")
    assert result.returncode == 2
    assert "gfx1250" in result.stderr and "no wheel" in result.stderr and result.stdout == ""


def test_arch_show_malformed():
    result = rocm_bake("arch", "show", "sm_90")
    assert result.returncode == 2 and "malformed architecture name 'sm_90'" in result.stderr


@pytest.mark.parametrize(("argv", "line"), [
    (["arch", "show", "sm_90"], "rocm-bake: error: argument arch: malformed architecture name 'sm_90'"),
    (["index", "build", "--arch", "gfx950;gfx951", "--wheels", "w", "--out", "o"],
     "rocm-bake: error: argument --arch: unknown architecture 'gfx951'"),
    (["gpu-test", "--arch", "GFX1151"], "rocm-bake: error: argument --arch: malformed architecture name 'GFX1151'"),
    (["arches", "list", "--arches", "gfx950 gfx950;"], "rocm-bake: error: argument --arches: malformed"),
])
def test_a_bad_arch_argument_is_one_error_line_before_the_command_runs(argv, line):
    """The argument's type parses it: one line naming the argument and the rule, exit 2, no usage dump."""
    result = rocm_bake(*argv)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(line), result.stderr


def test_other_usage_errors_keep_argparse_usage():
    result = rocm_bake("index", "build", "--wheels", "w", "--out", "o")
    assert result.returncode == 2 and result.stderr.startswith("usage: rocm-bake index build")
    assert "the following arguments are required: --arch" in result.stderr


def test_nodes_lists_arches_and_uncovered():
    result = rocm_bake("nodes", "--json")
    data = json.loads(result.stdout)
    assert {n["name"]: n["gpus"] for n in data["nodes"]}["snoc-strix"] == ["gfx1151"]
    assert data["cross_compile_only"] == ["gfx950", "gfx1250"]


def test_plan_json_lists_declared_graph():
    result = rocm_bake("plan", "gfx1250", "--json")
    assert result.returncode == 0, result.stderr
    resources = json.loads(result.stdout)
    assert all(set(r) == {"type", "name", "inputs"} for r in resources)
    images = [r for r in resources if r["type"] == "docker-build:index:Image"]
    assert len(images) == 7
    assert all("__provider" not in json.dumps(r) for r in resources)
    outputs = json.loads(planned_outputs("gfx1250").stdout)
    assert outputs["policy"]["sched_coexec"] is True
    assert outputs["gpu_tested"] is False and outputs["index_sha256"] == "(known after apply)"


def test_plan_fat_build_via_set():
    result = rocm_bake("plan", "gfx950", "--set", "rocm-bake:pytorchRocmArch=gfx950;gfx1201", "--json")
    tags = [r["inputs"]["tags"][0] for r in json.loads(result.stdout) if r["type"] == "docker-build:index:Image"]
    assert all(t.endswith(":gfx950_gfx1201-rocm10.1.0") for t in tags)


def test_plan_bad_config_is_one_clear_line():
    result = rocm_bake("plan", "gfx1151", "--set", "prebuildKernels=2")
    assert result.returncode == 2
    assert "rocm-bake:prebuildKernels" in result.stderr and "Traceback" not in result.stderr


def test_arches_list_honours_env_and_flag():
    env = dict(os.environ, ARCHES="gfx1201 gfx1151")
    assert rocm_bake("arches", "list", env=env).stdout.split() == ["gfx1201", "gfx1151"]
    assert rocm_bake("arches", "list", "--arches", "gfx950").stdout.split() == ["gfx950"]
    bad = rocm_bake("arches", "list", "--arches", "gfx950 gfx95")
    assert bad.returncode == 2 and "gfx95" in bad.stderr


def test_arches_without_cli_is_clear(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), ROCM_BAKE_PULUMI=str(tmp_path / "no-pulumi"))
    result = subprocess.run([sys.executable, "-m", "rocm_bake", "arches", "up"], capture_output=True,
                            text=True, cwd=ROOT, env=env)
    assert result.returncode == 2 and "pulumi CLI not found" in result.stderr


@pytest.fixture
def recording_pulumi(tmp_path):
    """A stand-in `pulumi` executable: records argv, fails for the arch in $FAIL_ARCH."""
    log = tmp_path / "calls.log"
    script = tmp_path / "bin" / "pulumi"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        'case "$*" in *"--stack $FAIL_ARCH "*) exit 7;; esac\n'
    )
    script.chmod(0o755)
    return script.parent, log


def test_arches_up_runs_sequentially_and_stops_at_first_failure(recording_pulumi):
    bindir, log = recording_pulumi
    env = dict(os.environ, ROCM_BAKE_PULUMI=str(bindir / "pulumi"), FAIL_ARCH="gfx1201")
    result = rocm_bake("arches", "up", "--target", "torch", env=env)
    assert result.returncode == 2
    assert "failed for gfx1201; not run: gfx1151, gfx1250" in result.stderr
    calls = log.read_text().splitlines()

    def narrowed(arch: str) -> str:
        # the engine's own targeting: torch's image and everything that depends on it, nothing undeclared
        urns = [f"urn:pulumi:{arch}::rocm-bake::rocm-bake:images:TargetImage::torch-{arch}",
                f"urn:pulumi:{arch}::rocm-bake::rocm-bake:images:TargetImage$docker-build:index:Image::torch-{arch}"]
        # the arch rules judge every pass, as `make up` runs them
        policy = ROOT / "policy"
        return f"up --stack {arch} --non-interactive --policy-pack {policy} --yes --refresh " + \
            " ".join(f"--target {u}" for u in urns) + " --target-dependents"

    assert calls == [narrowed("gfx950"), narrowed("gfx1201")]


def test_arches_preview_all_in_order(recording_pulumi):
    bindir, log = recording_pulumi
    env = dict(os.environ, ROCM_BAKE_PULUMI=str(bindir / "pulumi"), FAIL_ARCH="none")
    assert rocm_bake("arches", "preview", env=env).returncode == 0
    assert [c.split()[2] for c in log.read_text().splitlines()] == ["gfx950", "gfx1201", "gfx1151", "gfx1250"]


def _by_resource(resources):
    """Resources in a stable order, with the mock runtime's object addresses masked (they differ per process)."""
    masked = re.sub(r" at 0x[0-9a-f]+>", ">", json.dumps(resources))
    return sorted(json.loads(masked), key=lambda r: (r["type"], r["name"]))


def test_plan_several_stacks_in_one_process_matches_separate_plans():
    stacks = ["gfx950", "gfx1151", "fat-gfx950-gfx1201"]
    together = rocm_bake("plan", *stacks, "--json")
    assert together.returncode == 0, together.stderr
    resources = json.loads(together.stdout)
    outputs = json.loads(rocm_bake("plan", *stacks, "--outputs-json").stdout)
    assert set(resources) == set(stacks) == set(outputs)  # keyed by stack
    for stack in stacks:
        alone = json.loads(rocm_bake("plan", stack, "--json").stdout)
        assert _by_resource(resources[stack]) == _by_resource(alone)
        assert outputs[stack] == json.loads(planned_outputs(stack).stdout)
    text = rocm_bake("plan", "gfx950", "gfx1250")
    assert "stack gfx950:" in text.stdout and "stack gfx1250:" in text.stdout


def test_plan_checks_every_stack_before_declaring_any():
    result = rocm_bake("plan", "gfx950", "gfx9000")
    assert result.returncode == 2 and result.stdout == ""
    assert "no stack 'gfx9000'" in result.stderr and "Traceback" not in result.stderr


SHIPPED_STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_plan_every_shipped_stack(stack):
    """Demo stacks too: their buildArgs mapping reaches the mock runtime as JSON, as the engine passes it."""
    result = planned_outputs(stack)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert json.loads(result.stdout)["arches"] == stack.removeprefix("demo-").removeprefix("fat-").split("-")

"""gpu-test against a real sshd on loopback: node choice, status, host keys, the lock."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from rocm_bake.archset import Arch
from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu.remote_test import (
    LOCK_TIMEOUT_STATUS,
    NOT_COVERED_STATUS,
    fill_run_template,
    remote_script,
    require_digest,
    run_gpu_test,
    select_node,
)
from rocm_bake.manifests import Fleet, load_fleet
from tests.ssh_fixtures import ssh_node  # noqa: F401  (pytest fixture)

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "127.0.0.1:5000/rocm-bake/torch:gfx1151-rocm10.1.0@sha256:" + "ab" * 32
NAVI_IMAGE = "127.0.0.1:5000/rocm-bake/torch:gfx1201-rocm10.1.0@sha256:" + "cd" * 32


@pytest.fixture
def fleet_file(tmp_path, ssh_node):  # noqa: F811
    """Three 'nodes' on the one sshd, each with its own lock; the run template echoes the image."""
    def node(name, gpus, lock):
        return {"name": name, "host": "127.0.0.1", "port": ssh_node.port, "user": "root", "gpus": gpus,
                "lock_path": str(tmp_path / lock), "run_template": "echo image={image}; {test}"}

    nodes = [node("strix-a", ["gfx1151"], "a.lock"), node("strix-b", ["gfx1151"], "b.lock"),
             node("navi", ["gfx1201"], "n.lock")]
    path = tmp_path / "fleet.yml"
    path.write_text(yaml.safe_dump({"gpu_node": "navi", "nodes": nodes}))
    return path


def gpu_test(fleet_file, ssh_node, *args, known_hosts=None):  # noqa: F811
    argv = [sys.executable, "-m", "rocm_bake", "gpu-test", "--fleet", str(fleet_file),
            "--known-hosts", str(known_hosts or ssh_node.known_hosts), "--identity", str(ssh_node.identity)]
    return subprocess.run(argv + list(args), capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_node_per_arch_from_the_shipped_manifest(monkeypatch):
    monkeypatch.delenv("GPU_HOST", raising=False)
    fleet = load_fleet()
    assert select_node(fleet, Arch("gfx1151")).name == "snoc-strix"
    assert select_node(fleet, Arch("gfx1201")).name == fleet.gpu_node == "snoc-navi"
    assert select_node(fleet, Arch("gfx950")) is None and select_node(fleet, Arch("gfx1250")) is None


def test_node_per_arch_from_a_test_manifest(fleet_file):
    fleet = load_fleet(fleet_file)
    assert select_node(fleet, Arch("gfx1201")).name == "navi"  # the gpu_node, which holds it
    assert select_node(fleet, Arch("gfx1151")).name == "strix-a"  # gpu_node lacks it: first holder
    assert select_node(fleet, Arch("gfx1151"), "strix-b").name == "strix-b"


def test_host_without_the_card_is_refused():
    with pytest.raises(RocmBakeError, match="snoc-navi has gfx1201, not gfx1151; nodes with gfx1151: snoc-strix"):
        select_node(load_fleet(), Arch("gfx1151"), "snoc-navi")
    with pytest.raises(RocmBakeError, match="unknown fleet node 'nosuch'"):
        select_node(load_fleet(), Arch("gfx950"), "nosuch")


def test_host_to_a_node_without_the_card_exits_2_before_connecting(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--host", "navi", "--image", IMAGE, "--test", "true")
    assert result.returncode == 2
    assert "node navi has gfx1201, not gfx1151; nodes with gfx1151: strix-a, strix-b" in result.stderr
    assert "image=" not in result.stdout


@pytest.mark.parametrize("arch", ["gfx950", "gfx1250"])
def test_not_covered_is_its_own_status_never_a_pass(arch):
    result = subprocess.run([sys.executable, "-m", "rocm_bake", "gpu-test", "--arch", arch, "--image", IMAGE],
                            capture_output=True, text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "GPU_HOST": "snoc-strix"})
    assert result.returncode == NOT_COVERED_STATUS == 3
    assert result.stdout == f"rocm-bake: not covered: no fleet node has {arch}; cross-compiled only\n"


def test_not_covered_json(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1250", "--json")
    assert result.returncode == 3
    data = json.loads(result.stdout)
    assert data["covered"] is False and data["node"] is None
    assert data["message"] == "not covered: no fleet node has gfx1250; cross-compiled only"


def test_passing_test_streams_output_and_uses_the_digest(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo gpu-ok")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"image={IMAGE}\ngpu-ok\n"
    assert "test on strix-a passed" in result.stderr


def test_json_keeps_stdout_parseable(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1201", "--image", NAVI_IMAGE, "--test", "echo ok", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["node"] == "navi" and data["status"] == 0 and data["image"] == NAVI_IMAGE
    assert "ok" in result.stderr


def test_lines_arrive_before_the_remote_command_ends(fleet_file, ssh_node):  # noqa: F811
    fleet = load_fleet(fleet_file)
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    result = run_gpu_test(
        fleet, Arch("gfx1151"), IMAGE, "echo first; sleep 2; echo second", known_hosts=ssh_node.known_hosts,
        identity=ssh_node.identity, on_stdout=lambda line: seen.append((time.monotonic() - start, line)),
        on_stderr=lambda line: None,
    )
    assert result.status == 0
    lines = [line for _, line in seen]
    assert lines[-2:] == ["first\n", "second\n"]
    assert seen[-1][0] - seen[-2][0] > 1.5  # "first" was delivered before the sleep finished


def test_failing_test_propagates_status_and_output(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1201", "--image", NAVI_IMAGE,
                      "--test", "echo partial; echo kernel mismatch >&2; exit 42")
    assert result.returncode == 42
    assert "partial" in result.stdout and "kernel mismatch" in result.stderr
    assert "test on navi exited 42" in result.stderr


def test_a_test_exiting_255_is_the_tests_status_not_an_ssh_failure(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1201", "--image", NAVI_IMAGE, "--test", "exit 255")
    assert result.returncode == 255 and "test on navi exited 255" in result.stderr


def test_tag_only_or_wrong_arch_image_is_refused(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image",
                      "127.0.0.1:5000/rocm-bake/torch:gfx1151-rocm10.1.0", "--test", "true")
    assert result.returncode == 2 and "not pinned by digest" in result.stderr and "image=" not in result.stdout
    with pytest.raises(RocmBakeError, match="tagged for gfx1201, not gfx1151"):
        require_digest(NAVI_IMAGE, Arch("gfx1151"))
    with pytest.raises(RocmBakeError, match="digest"):
        require_digest("127.0.0.1:5000/rocm-bake/torch@sha256:short", Arch("gfx1151"))
    assert require_digest("127.0.0.1:5000/rocm-bake/torch@sha256:" + "0" * 64, Arch("gfx1151")).endswith("0" * 64)


def test_default_run_template_is_docker_by_digest():
    fleet = Fleet.model_validate({"gpu_node": "n", "nodes": [{"name": "n", "host": "h", "gpus": ["gfx1151"]}]})
    node = fleet.node("n")
    assert fill_run_template(node.run_template, IMAGE, "python3 -c 'import torch'") == (
        f"docker run --rm --device=/dev/kfd --device=/dev/dri {IMAGE} python3 -c 'import torch'"
    )
    assert "awk '{print $1}'" in fill_run_template("{image} {test}", IMAGE, "awk '{print $1}'")
    with pytest.raises(RocmBakeError, match="no {image}"):
        fill_run_template("docker run {test}", IMAGE, "true")
    script = remote_script(node, IMAGE, "true", 5, Arch("gfx1151"))
    assert "flock -w 5 9" in script and "/tmp/rocm-bake-gpu-test.lock" in script


@pytest.mark.parametrize("which", ["other_known_hosts", "empty_known_hosts"])
def test_unknown_or_changed_host_key_is_refused(fleet_file, ssh_node, tmp_path, which):  # noqa: F811
    marker = tmp_path / "ran"
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", f"touch {marker}",
                      known_hosts=getattr(ssh_node, which))
    assert result.returncode == 2
    assert "host key of strix-a (127.0.0.1:" in result.stderr and "not verified against" in result.stderr
    assert "Host key verification failed" in result.stderr
    assert not marker.exists()


def test_lock_makes_a_second_run_wait_then_time_out_and_host_moves_it(fleet_file, ssh_node, tmp_path):  # noqa: F811
    started = tmp_path / "first-started"
    first_result: list[subprocess.CompletedProcess[str]] = []
    first = threading.Thread(target=lambda: first_result.append(gpu_test(
        fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", f"touch {started}; sleep 6")))
    first.start()
    deadline = time.monotonic() + 15
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists(), "first test never started"
    try:
        busy = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo SECOND-RAN",
                        "--lock-timeout", "1")
        assert busy.returncode == LOCK_TIMEOUT_STATUS == 4
        assert "rocm-bake: waiting for lock on strix-a held by root@" in busy.stderr
        assert "timed out after 1s waiting for lock on strix-a held by root@" in busy.stderr
        assert "the test did not run" in busy.stderr and "--host strix-b also holds gfx1151" in busy.stderr
        assert "SECOND-RAN" not in busy.stdout
        moved = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo moved",
                         "--host", "strix-b")
        assert moved.returncode == 0 and "moved" in moved.stdout and "waiting" not in moved.stderr
        patient = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo after",
                           "--lock-timeout", "30")
        assert patient.returncode == 0, patient.stderr
        assert "waiting for lock on strix-a held by" in patient.stderr and "acquired after" in patient.stderr
        assert patient.stdout.endswith("after\n")
    finally:
        first.join()
    assert first_result[0].returncode == 0
    # Released: the lock file no longer names a holder, and the next run does not wait.
    assert (tmp_path / "a.lock").read_text() == ""
    again = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "true")
    assert again.returncode == 0 and "waiting" not in again.stderr

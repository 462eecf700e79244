"""gpu-test against a real sshd on loopback: node choice, status, host keys, the lock."""

from __future__ import annotations

import json
import subprocess
import sys
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


def test_lines_arrive_before_the_remote_command_ends(fleet_file, ssh_node, tmp_path):  # noqa: F811
    """The remote command waits (up to 30 s) for a file that only our ``on_stdout`` of its first line creates.

    So "second: released" proves the first line reached us while the command
    still ran; a buffered stream would deliver it at the end ("second: never").
    """
    fleet = load_fleet(fleet_file)
    seen: list[str] = []
    released = tmp_path / "first-line-seen"

    def on_stdout(line: str) -> None:
        seen.append(line)
        if line == "first\n":
            released.touch()

    wait = f"i=0; while [ ! -e {released} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"
    result = run_gpu_test(
        fleet, Arch("gfx1151"), IMAGE, f"echo first; {wait}; [ -e {released} ] && echo second: released "
        "|| echo second: never", known_hosts=ssh_node.known_hosts, identity=ssh_node.identity,
        on_stdout=on_stdout, on_stderr=lambda line: None,
    )
    assert result.status == 0
    assert seen[-2:] == ["first\n", "second: released\n"], seen


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


def gpu_test_started(fleet_file, ssh_node, stderr_path: Path, *args) -> subprocess.Popen[str]:  # noqa: F811
    """``gpu-test`` started, not awaited: its stderr goes to ``stderr_path`` as it is written, to be watched."""
    argv = [sys.executable, "-m", "rocm_bake", "gpu-test", "--fleet", str(fleet_file),
            "--known-hosts", str(ssh_node.known_hosts), "--identity", str(ssh_node.identity)]
    with open(stderr_path, "w") as err:
        return subprocess.Popen(argv + list(args), stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)


def wait_for(what: str, ready, seconds: float = 30) -> None:
    """Poll ``ready()`` until it holds; fail naming ``what`` if it never does."""
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline, f"{what} within {seconds:g}s"
        time.sleep(0.05)


def test_lock_makes_a_second_run_wait_then_time_out_and_host_moves_it(fleet_file, ssh_node, tmp_path):  # noqa: F811
    """Each step waits for an event, never for a sleep: the first test holds strix-a until this test releases it.

    (It once slept 6 s and hoped the later runs fitted inside: on a slow
    machine the patient run found the lock free and the wait went untested.)
    """
    started, release = tmp_path / "first-started", tmp_path / "release-first"
    hold = f"touch {started}; while [ ! -e {release} ]; do sleep 0.05; done"
    first = gpu_test_started(fleet_file, ssh_node, tmp_path / "first.err",
                             "--arch", "gfx1151", "--image", IMAGE, "--test", hold)
    patient = None
    try:
        wait_for("the first test starts on strix-a", started.exists)
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
        patient_err = tmp_path / "patient.err"
        patient = gpu_test_started(fleet_file, ssh_node, patient_err, "--arch", "gfx1151", "--image", IMAGE,
                                   "--test", "echo after", "--lock-timeout", "30")
        wait_for("the patient run says it waits for strix-a (live, before the lock is free)",
                 lambda: "waiting for lock on strix-a held by root@" in patient_err.read_text())
        assert patient.poll() is None, "the patient run ended while strix-a was still held"
        release.touch()
        patient_out, _ = patient.communicate(timeout=60)
        assert patient.returncode == 0, patient_err.read_text()
        assert "acquired after" in patient_err.read_text()
        assert patient_out.endswith("after\n")
    finally:
        release.touch()
        first_out, _ = first.communicate(timeout=60)
        if patient is not None and patient.poll() is None:
            patient.kill()
    assert first.returncode == 0, (tmp_path / "first.err").read_text()
    # Released: the lock file no longer names a holder, and the next run does not wait.
    assert (tmp_path / "a.lock").read_text() == ""
    again = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "true")
    assert again.returncode == 0 and "waiting" not in again.stderr

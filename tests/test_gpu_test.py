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

from rocm_bake.errors import RocmBakeError
from rocm_bake.gpu_test import NOT_COVERED_STATUS, run_gpu_test, select_node
from rocm_bake.manifests import load_fleet
from ssh_fixtures import ssh_node  # noqa: F401  (pytest fixture)

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "127.0.0.1:5000/rocm-bake/torch:gfx1151-rocm10.1.0@sha256:" + "ab" * 32


@pytest.fixture
def fleet_file(tmp_path, ssh_node):  # noqa: F811
    """Two 'nodes' on the one sshd, each with its own lock; the test shell echoes the image."""
    nodes = [
        {"name": "strix-a", "host": "127.0.0.1", "port": ssh_node.port, "user": "root", "gpus": ["gfx1151"],
         "lock_path": str(tmp_path / "a.lock"), "run_template": "echo image={image}; {test}"},
        {"name": "strix-b", "host": "127.0.0.1", "port": ssh_node.port, "user": "root", "gpus": ["gfx1151"],
         "lock_path": str(tmp_path / "b.lock"), "run_template": "echo image={image}; {test}"},
        {"name": "navi", "host": "127.0.0.1", "port": ssh_node.port, "user": "root", "gpus": ["gfx1201"],
         "lock_path": str(tmp_path / "n.lock"), "run_template": "echo image={image}; {test}"},
    ]
    path = tmp_path / "fleet.yml"
    path.write_text(yaml.safe_dump({"gpu_node": "strix-a", "nodes": nodes}))
    return path


def gpu_test(fleet_file, ssh_node, *args, identity=True):  # noqa: F811
    argv = [sys.executable, "-m", "rocm_bake", "gpu-test", "--fleet", str(fleet_file),
            "--known-hosts", str(ssh_node.known_hosts)]
    if identity:
        argv += ["--identity", str(ssh_node.identity)]
    return subprocess.run(argv + list(args), capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_node_per_arch_from_the_shipped_manifest():
    fleet = load_fleet()
    assert select_node(fleet, "gfx1151").name == "snoc-strix"
    assert select_node(fleet, "gfx1201").name == fleet.gpu_node
    assert select_node(fleet, "gfx950") is None and select_node(fleet, "gfx1250") is None


def test_host_without_the_card_is_refused():
    with pytest.raises(RocmBakeError, match="snoc-navi has gfx1201, not gfx1151; nodes with gfx1151: snoc-strix"):
        select_node(load_fleet(), "gfx1151", "snoc-navi")


@pytest.mark.parametrize("arch", ["gfx950", "gfx1250"])
def test_not_covered_is_its_own_status_never_a_pass(arch):
    result = subprocess.run([sys.executable, "-m", "rocm_bake", "gpu-test", "--arch", arch, "--image", IMAGE],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == NOT_COVERED_STATUS
    assert f"not covered: no fleet node has {arch}; cross-compiled only" in result.stdout


def test_passing_test_streams_output_and_uses_the_digest(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo gpu-ok", "--json")
    assert result.returncode == 0, result.stderr
    assert f"image={IMAGE}" in result.stdout and "gpu-ok" in result.stdout
    assert json.loads(result.stdout.splitlines()[-1])["node"] == "strix-a"


def test_failing_test_propagates_status_and_output(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1201", "--image", IMAGE,
                      "--test", "echo kernel mismatch >&2; exit 42")
    assert result.returncode == 42
    assert "kernel mismatch" in result.stdout and "navi exited 42" in result.stderr


def test_tag_only_image_is_refused(fleet_file, ssh_node):  # noqa: F811
    result = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", "reg/torch:gfx1151-rocm10.1.0", "--test", "true")
    assert result.returncode == 2 and "not pinned by digest" in result.stderr


def test_unknown_host_key_is_refused(fleet_file, ssh_node, tmp_path):  # noqa: F811
    fleet = load_fleet(fleet_file)
    with pytest.raises(RocmBakeError, match=r"(?s)cannot reach strix-a.*(Host key verification failed|Offending ED25519 key)"):
        run_gpu_test(fleet, "gfx1151", IMAGE, "touch " + str(tmp_path / "ran"),
                     known_hosts=ssh_node.other_known_hosts, identity=ssh_node.identity, emit=lambda _: None)
    assert not (tmp_path / "ran").exists()


def test_lock_makes_a_second_run_wait_then_time_out_and_host_moves_it(fleet_file, ssh_node):  # noqa: F811
    first = threading.Thread(target=gpu_test, args=(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE,
                                                    "--test", "sleep 8"))
    first.start()
    time.sleep(1.5)
    try:
        waited = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo SECOND-RAN",
                          "--lock-timeout", "1")
        assert "waiting for lock" in waited.stdout and "strix-a still busy after 1s" in waited.stdout
        assert waited.returncode == 75 and "SECOND-RAN" not in waited.stdout
        moved = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo moved",
                         "--host", "strix-b")
        assert moved.returncode == 0 and "moved" in moved.stdout and "waiting" not in moved.stdout
        patient = gpu_test(fleet_file, ssh_node, "--arch", "gfx1151", "--image", IMAGE, "--test", "echo after",
                           "--lock-timeout", "30")
        assert patient.returncode == 0 and "waiting for lock" in patient.stdout and "after" in patient.stdout
    finally:
        first.join()

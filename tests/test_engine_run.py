"""A failed ``make up`` / ``make demo`` ends with one line: the first real cause and the full log's path.

The real-engine case: the stack's builder is registered but its
buildkitd is dead, and docker-build says only "context deadline exceeded"
(among grpc tracebacks). The last line must name the builder and its socket.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_bake.engine_run import failure_cause, first_cause
from tests.engine_fixtures import ROOT, TOOLS_BIN, VENV_BIN, copy_project, engine

STACK = "demo-gfx950"

#: Lines as the engine printed them for a dead builder (kept from a real run): progress, grpc noise, diagnostics.
A6B_OUTPUT = """\
 +  docker-build:index:Image triton-wheel-gfx950 creating (20s) error: context deadline exceeded
 +  pulumi:pulumi:Stack rocm-bake-demo-gfx950 creating (20s) error: update failed
 +  pulumi:pulumi:Stack rocm-bake-demo-gfx950 creating (20s) 	debug_error_string = "UNAVAILABLE:resource monitor shut down while waiting on step's done channel"
 +  pulumi:pulumi:Stack rocm-bake-demo-gfx950 creating (20s) pulumi.errors.RunError: Resource monitor has terminated, shutting down
Diagnostics:
  pulumi:pulumi:Stack (rocm-bake-demo-gfx950):
    error: update failed
    KeyboardInterrupt
  docker-build:index:Image (triton-wheel-gfx950):
    error: context deadline exceeded
"""


def test_first_cause_skips_the_engines_wrap_up_and_names_the_resource() -> None:
    assert first_cause(A6B_OUTPUT) == "triton-wheel-gfx950: context deadline exceeded"
    noise_first = ("  pulumi:pulumi:Stack (rocm-bake-gfx950):\n    error: an unhandled error occurred: Program exited "
                   "with non-zero exit code: 1\n    error: the stack config (stack gfx950): rocm-bake:dist: is /\n")
    assert first_cause(noise_first) == "the stack config (stack gfx950): rocm-bake:dist: is /"
    assert first_cause("Resources:\n    3 unchanged\n") is None


def test_a_dead_builder_is_named_in_the_last_line(tmp_path: Path) -> None:
    buildx_config = tmp_path / "buildx"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "GITHUB_"))}
    env.update({"BUILDX_CONFIG": str(buildx_config), "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
                "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24), "PULUMI_SKIP_UPDATE_CHECK": "true",
                "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
                "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi")),
                "PATH": f"{TOOLS_BIN}:{VENV_BIN}:{os.environ.get('PATH', '')}"})
    (tmp_path / "state").mkdir()
    socket_path = tmp_path / "dead" / "buildkitd.sock"  # never started
    builder = f"rocm-bake-dead-{secrets.token_hex(3)}"
    made = subprocess.run([str(engine("buildx")), "create", "--name", builder, "--driver", "remote",
                           f"unix://{socket_path}"], env=env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    project = copy_project(tmp_path / "project")

    def pulumi(*args: str) -> None:
        done = subprocess.run([str(engine("pulumi")), *args, "--non-interactive"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    pulumi("stack", "init", STACK, "--secrets-provider", "passphrase")
    pulumi("config", "set", "rocm-bake:builder", builder, "--stack", STACK)
    log = tmp_path / "logs" / "up.log"
    result = subprocess.run(
        [sys.executable, "-m", "rocm_bake.engine_run", "--log", str(log), "--builder", builder, "--",
         str(engine("pulumi")), "up", "-s", STACK, "--yes", "--skip-preview", "--non-interactive"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rocm-bake: `pulumi up -s demo-gfx950` failed: "), last
    assert f"buildx builder '{builder}' (remote, unix://{socket_path}): its socket {socket_path} does not exist" in last
    assert "context deadline exceeded" in last and last.endswith(f"(full engine log: {log})"), last
    assert "Traceback" not in last and result.stdout in log.read_text()  # the log holds everything shown
    # the program itself named the builder too (a warning on `up`, for a `pulumi up` run by hand)
    assert f"rocm-bake:builder: buildx builder '{builder}'" in result.stdout


def test_make_up_names_the_builder_the_program_would_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--stack``: the stack file's builder, else this checkout's (what make exported), like the program."""
    from rocm_bake.engine_run import configured_builder

    monkeypatch.setenv("ROCM_BAKE_BUILDER", "rocm-bake-checkout-1")
    assert configured_builder("gfx950") == "rocm-bake-checkout-1"
    assert configured_builder("no-such-stack") is None and configured_builder(None) is None


def test_when_every_error_is_the_engines_wrap_up_that_is_what_is_shown() -> None:
    only_noise = ("  pulumi:pulumi:Stack (rocm-bake-demo-gfx950):\n    error: an unhandled error occurred: Program exited "
                  "with non-zero exit code: 1\n    KeyboardInterrupt\n")
    assert first_cause(only_noise) == "an unhandled error occurred: Program exited with non-zero exit code: 1"


def test_a_mandatory_policy_violation_is_the_cause() -> None:
    """The engine prints no error line for a pack's mandatory violation: the summary names the policy."""
    output = """\
Policies:
    ❌ rocm-bake-arch-rules@v0.1.0 (local: /x/policy)
        - [mandatory]  per-arch-cache-refs  (docker-build:index:Image: pytorch-base-gfx950)
          Each arch's registry layer cache is its own (cache:<target>-<CACHE_ARCH>).
          pytorch-base-gfx950 cacheFrom 'a' is not 'b'
Diagnostics:
  pulumi:pulumi:Stack (rocm-bake-demo-gfx950):
    error: an unhandled error occurred: Program exited with non-zero exit code: 1
"""
    assert first_cause(output) == ("pytorch-base-gfx950: policy per-arch-cache-refs: "
                                   "pytorch-base-gfx950 cacheFrom 'a' is not 'b'")


def test_a_url_in_the_cause_keeps_its_host_and_path_but_not_its_query() -> None:
    output = (' +  docker-build:index:Image triton-wheel-gfx1201 creating (9s) error: failed to solve: error writing '
              'layer blob: failed to do request: Put "https://198.18.7.20:5000/v2/rocm-bake/cache/blobs/uploads/5b35'
              '?_state=iuEN2iaBdu%3D%3D&digest=sha256%3A26e5": write tcp 198.18.7.11:45986->198.18.7.20:5000: '
              'write: no route to host\n')
    assert failure_cause(1, output, None) == (
        'triton-wheel-gfx1201: failed to solve: error writing layer blob: failed to do request: Put '
        '"https://198.18.7.20:5000/v2/rocm-bake/cache/blobs/uploads/5b35": write tcp 198.18.7.11:45986->'
        '198.18.7.20:5000: write: no route to host')

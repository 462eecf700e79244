"""Every ``rocm-bake:*`` key, given a bad value, through ``pulumi preview`` on the real engine.

Each case must exit non-zero with ONE error line that names the key, no
``Traceback`` anywhere, and no fragment of the token planted in the value
(every value that can hold a secret holds one here). Config fails before
any resource is declared, so no builder or registry is needed: one project
copy, one stack, preview only (about a second per case).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocm_bake.config import KEYS
from rocm_bake.problems import MIN_RUN
from tests.engine_fixtures import TOOLS_BIN, VENV_BIN, copy_project, engine

STACK = "demo-gfx950"
#: The planted token: any run of MIN_RUN of its characters in any output is a leak.
TOKEN = "ghp_h7PlantedSecretValue0123456789abcdef"

#: key -> (bad value, set with --secret). Every value that can carry the token carries it.
BAD_VALUES: dict[str, tuple[str, bool]] = {
    "pytorchRocmArch": (TOKEN, False),
    "rocmVersion": (TOKEN, False),
    "registry": (f"{TOKEN}/x", False),
    "repository": (f"Bad {TOKEN}", False),
    "builder": (f"{TOKEN} x", False),
    "push": (TOKEN, False),
    "prebuildKernels": (TOKEN, False),
    "cacheArch": (f"{TOKEN} x", False),
    "targets": (TOKEN, False),
    "dist": (f"/etc/{TOKEN}", False),
    "publish": (TOKEN, False),
    "githubRepo": (TOKEN, False),
    "githubApiUrl": (f"http://x:{TOKEN}@127.0.0.1", True),
    "githubUploadsUrl": (f"http://{TOKEN}.example.com", True),
    "githubWebUrl": (f"ftp://{TOKEN}@example.com", True),
    "githubPagesUrl": (f"http://x:{TOKEN}@127.0.0.1", True),  # a token in the URL's userinfo, exactly
    "githubToken": (TOKEN, False),  # a token in plain text is refused
    "gpuHost": (TOKEN, False),
    "gpuTest": (TOKEN, False),
    "dockerfileDir": (f"../{TOKEN}", False),
    "buildArgs": (f'{{"ROCM_IMAGE": "{TOKEN}"', False),
}
#: Values that hold no token but are bad: unknown arch, empty or out-of-range registry, root dist, bad flags.
MORE_BAD: list[tuple[str, str]] = [
    ("pytorchRocmArch", "gfx9999"), ("registry", ""), ("registry", "127.0.0.1:99999"), ("dist", "/"),
    ("prebuildKernels", "7"), ("githubApiUrl", ""), ("targets", "nosuch"), ("publish", "maybe"),
]


def test_every_key_has_a_bad_value() -> None:
    assert set(BAD_VALUES) == set(KEYS)


def fragments(token: str) -> set[str]:
    return {token[i:i + MIN_RUN] for i in range(len(token) - MIN_RUN + 1)}


class Engine:
    def __init__(self, project: Path, env: dict[str, str]) -> None:
        self.project, self.env = project, env

    def pulumi(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(engine("pulumi")), *args, "--non-interactive", "--stack", STACK], cwd=self.project,
                              env=self.env, capture_output=True, text=True, timeout=300)

    def preview_with(self, key: str, value: str, secret: bool = False) -> str:
        """Set one bad value, preview, take it out again; the preview's whole output."""
        flags = ["--secret"] if secret else ["--plaintext"]
        stack_file = self.project / "stacks" / f"Pulumi.{STACK}.yaml"
        before = stack_file.read_text()
        try:
            set_ = self.pulumi("config", "set", *flags, key, value)
            assert set_.returncode == 0, set_.stderr
            result = self.pulumi("preview")
        finally:
            stack_file.write_text(before)
        output = result.stdout + result.stderr
        assert result.returncode != 0, f"preview with {key}={value!r} succeeded:\n{output}"
        return output


@pytest.fixture(scope="module")
def pulumi_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    work = tmp_path_factory.mktemp("config-engine")
    (work / "state").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "GITHUB_"))}
    env.update({
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}", "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24),
        "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi")),
        "PATH": f"{TOOLS_BIN}:{VENV_BIN}:{os.environ.get('PATH', '')}",
    })
    eng = Engine(copy_project(work / "project"), env)
    init = subprocess.run([str(engine("pulumi")), "stack", "init", STACK, "--secrets-provider", "passphrase",
                           "--non-interactive"], cwd=eng.project, env=env, capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    yield eng


def error_messages(output: str) -> set[str]:
    """The distinct ``error:`` texts (the engine prints each twice: in the progress and under Diagnostics)."""
    return {line.split("error: ", 1)[1].strip() for line in output.splitlines() if "error: " in line}


def assert_one_line_naming(output: str, key: str) -> None:
    assert "Traceback" not in output, output
    naming = {m for m in error_messages(output) if key in m}
    assert len(naming) == 1, f"expected one error line naming {key}, got {naming}:\n{output}"
    others = error_messages(output) - naming
    assert others <= {"an unhandled error occurred: Program exited with non-zero exit code: 1"}, others


@pytest.mark.parametrize("key", sorted(BAD_VALUES))
def test_bad_value_is_one_line_naming_the_key_and_leaks_nothing(pulumi_engine: Engine, key: str) -> None:
    value, secret = BAD_VALUES[key]
    output = pulumi_engine.preview_with(f"rocm-bake:{key}", value, secret)
    assert_one_line_naming(output, f"rocm-bake:{key}")
    leaked = sorted(f for f in fragments(TOKEN) if f in output)
    assert not leaked, f"token fragments {leaked} in the output of rocm-bake:{key}:\n{output}"


@pytest.mark.parametrize(("key", "value"), MORE_BAD)
def test_issue_values_are_one_line_naming_the_key(pulumi_engine: Engine, key: str, value: str) -> None:
    assert_one_line_naming(pulumi_engine.preview_with(f"rocm-bake:{key}", value), f"rocm-bake:{key}")


def test_unknown_key_is_refused_with_the_nearest_known_key(pulumi_engine: Engine) -> None:
    """A misspelt key is refused: ignoring it would plan images to the default registry and exit 0."""
    output = pulumi_engine.preview_with("rocm-bake:registy", "127.0.0.1:5001")
    assert_one_line_naming(output, "rocm-bake:registy")
    (message,) = [m for m in error_messages(output) if "registy" in m]
    assert "unknown config key 'rocm-bake:registy'; did you mean rocm-bake:registry?" in message

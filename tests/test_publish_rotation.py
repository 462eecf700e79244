"""On the real engine: after a token rotation, ``refresh`` and ``destroy`` use the current token.

The engine configures a dynamic provider from state on ``refresh`` and
``destroy`` (the token of the last ``up``). The loopback GitHub accepts only
the new token once rotated. The program is the publishing part alone
(``PublishedIndex`` over an index built here), so no builder or registry is
needed: the providers are what is tested.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine_fixtures import TOOLS_BIN, VENV_BIN, engine
from tests.fake_github import FakeGitHub
from tests.publish_fixtures import build_arch_index

ROOT = Path(__file__).resolve().parent.parent
STACK = "rotation"
PROGRAM = '''
import pulumi
from components.publish import PublishedIndex, PublishedIndexArgs
from rocm_bake.archset import ArchSet
from rocm_bake.publish.github import github_endpoints

c = pulumi.Config("rocm-bake")
e = github_endpoints(api_url=c.require("githubApiUrl"), uploads_url=c.require("githubUploadsUrl"),
                     web_url=c.require("githubWebUrl"), pages_url=c.require("githubPagesUrl"))
p = PublishedIndex("publish-gfx950", PublishedIndexArgs(arch=ArchSet("gfx950"), dist=c.require("dist"),
                   repo=c.require("githubRepo"), rocm_version="10.1.0", endpoints=e))
pulumi.export("pages_url", p.pages_url)
'''


class Project:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def pulumi(self, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run([str(engine("pulumi")), *args, "--non-interactive", "--stack", STACK], cwd=self.root,
                                env={**self.env, **(extra or {})}, capture_output=True, text=True, timeout=600)
        return result

    def ok(self, *args: str, extra: dict[str, str] | None = None) -> str:
        result = self.pulumi(*args, extra=extra)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"pulumi {' '.join(args)} failed:\n{output[-4000:]}"
        return output


@pytest.fixture
def published(tmp_path: Path) -> Iterator[tuple[Project, FakeGitHub]]:
    build_arch_index(tmp_path, "gfx950", ["nixl"])
    root = tmp_path / "project"
    root.mkdir()
    (root / "Pulumi.yaml").write_text("name: rocm-bake\nruntime:\n  name: python\n  options:\n    toolchain: pip\n"
                                      f"    virtualenv: {ROOT / '.venv'}\n")
    (root / "__main__.py").write_text(PROGRAM)
    (tmp_path / "state").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "GITHUB_"))}
    env.update({"PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
                "PULUMI_CONFIG_PASSPHRASE": secrets.token_urlsafe(24), "PULUMI_SKIP_UPDATE_CHECK": "true",
                "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
                "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi")),
                "PATH": f"{TOOLS_BIN}:{VENV_BIN}:{os.environ.get('PATH', '')}"})
    project = Project(root, env)
    with FakeGitHub(token="ghp_rotation_OLD_1") as gh:
        init = subprocess.run([str(engine("pulumi")), "stack", "init", STACK, "--non-interactive"], cwd=root, env=env,
                              capture_output=True, text=True, timeout=120)
        assert init.returncode == 0, init.stderr
        for key, value in {"githubApiUrl": gh.api_url, "githubUploadsUrl": gh.uploads_url, "githubWebUrl": gh.web_url,
                           "githubPagesUrl": f"{gh.web_url}/pages/{{owner}}/{{repo}}", "githubRepo": gh.full_name,
                           "dist": str(tmp_path / "dist")}.items():
            project.ok("config", "set", f"rocm-bake:{key}", value)
        project.ok("config", "set", "--secret", "rocm-bake:githubToken", "ghp_rotation_OLD_1")
        project.ok("up", "--yes", "--skip-preview")
        assert gh.state.release_by_tag("wheels-gfx950-rocm10.1.0") is not None
        yield project, gh


def test_refresh_and_destroy_use_the_rotated_config_secret(published: tuple[Project, FakeGitHub]) -> None:
    project, gh = published
    gh.state.token = "ghp_rotation_NEW_2"  # the old token is revoked: the fake accepts only the new one
    project.ok("config", "set", "--secret", "rocm-bake:githubToken", "ghp_rotation_NEW_2")
    before = len(gh.state.log)
    output = project.ok("refresh", "--yes", "--skip-preview")
    assert "401" not in output and len(gh.state.log) > before  # it did read GitHub, with the accepted token
    project.ok("destroy", "--yes", "--skip-preview")
    assert gh.state.release_by_tag("wheels-gfx950-rocm10.1.0") is None  # destroy reached GitHub and deleted


def test_github_token_in_the_environment_wins(published: tuple[Project, FakeGitHub]) -> None:
    project, gh = published
    gh.state.token = "ghp_rotation_ENV_3"  # the config secret still holds OLD: only the environment has this one
    project.ok("refresh", "--yes", "--skip-preview", extra={"GITHUB_TOKEN": "ghp_rotation_ENV_3"})
    failed = project.pulumi("refresh", "--yes", "--skip-preview")  # without it: the config's OLD token, refused
    assert failed.returncode != 0 and "401" in failed.stdout + failed.stderr
    project.ok("destroy", "--yes", "--skip-preview", extra={"GITHUB_TOKEN": "ghp_rotation_ENV_3"})
    assert gh.state.release_by_tag("wheels-gfx950-rocm10.1.0") is None


def test_a_provider_error_is_one_line_naming_the_resource(published: tuple[Project, FakeGitHub]) -> None:
    """A revoked token on refresh: each resource's error is one line with its name and the cause, no traceback."""
    project, gh = published
    gh.state.token = "ghp_rotation_REVOKED_ALL"  # neither the config's token nor any other is accepted now
    failed = project.pulumi("refresh", "--yes", "--skip-preview")
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "Traceback" not in output, output
    errors = [line.strip() for line in output.splitlines() if "401 Bad credentials" in line]
    assert errors and all("the token was rejected" in line for line in errors), output
    assert any("publish-gfx950-release" in line and "error: GitHub GET" in line for line in errors), output
    assert "ghp_rotation_OLD_1" not in output

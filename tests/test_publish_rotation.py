"""On the real engine: token rotation, and replacing a release without losing what users install from.

After a token rotation, ``refresh`` and ``destroy`` use the current token. The engine configures a dynamic provider from state on ``refresh`` and
``destroy`` (the token of the last ``up``). The loopback GitHub accepts only
the new token once rotated. The program is the publishing part alone
(``PublishedIndex`` over an index built here), so no builder or registry is
needed: the providers are what is tested.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine_fixtures import TOOLS_BIN, VENV_BIN, engine
from tests.fake_github import FakeGitHub
from tests.publish_fixtures import build_arch_index

ROOT = Path(__file__).resolve().parent.parent
STACK = "rotation"
TAG = "wheels-gfx950-rocm10.1.0"
PAGES = "data/wheels/gfx950/"
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


def test_github_token_in_the_environment_wins_and_a_rejected_one_is_one_line_naming_the_resource(
        published: tuple[Project, FakeGitHub]) -> None:
    """The environment's token wins over the config's; without it, the config's token is rejected (as a revoked
    one is) and each resource's error is one line with its name and the cause, no traceback, no token."""
    project, gh = published
    gh.state.token = "ghp_rotation_ENV_3"  # the config secret still holds OLD: only the environment has this one
    project.ok("refresh", "--yes", "--skip-preview", extra={"GITHUB_TOKEN": "ghp_rotation_ENV_3"})
    failed = project.pulumi("refresh", "--yes", "--skip-preview")  # without it: the config's OLD token, refused
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "401" in output
    assert "Traceback" not in output, output
    errors = [line.strip() for line in output.splitlines() if "401 Bad credentials" in line]
    assert errors and all("the token was rejected" in line for line in errors), output
    assert any("publish-gfx950-release" in line and "error: GitHub GET" in line for line in errors), output
    assert "ghp_rotation_OLD_1" not in output
    project.ok("destroy", "--yes", "--skip-preview", extra={"GITHUB_TOKEN": "ghp_rotation_ENV_3"})
    assert gh.state.release_by_tag("wheels-gfx950-rocm10.1.0") is None


def wheels_on(gh: FakeGitHub) -> dict[str, bytes]:
    """What users install from on ``gh``: the release's uploaded assets."""
    return {name: a["data"] for name, a in gh.state.release_assets(TAG).items() if a["state"] == "uploaded"}


def pages_on(gh: FakeGitHub) -> dict[str, bytes]:
    return {path: data for path, data in gh.state.branch_files().items() if path.startswith(PAGES)}


def index_files(tmp_path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (tmp_path / "dist" / "index" / "gfx950" / "files").iterdir()}


def point_at(project: Project, gh: FakeGitHub) -> None:
    for key, value in {"githubApiUrl": gh.api_url, "githubUploadsUrl": gh.uploads_url, "githubWebUrl": gh.web_url,
                       "githubPagesUrl": f"{gh.web_url}/pages/{{owner}}/{{repo}}"}.items():
        project.ok("config", "set", f"rocm-bake:{key}", value)


def test_a_mistyped_api_url_deletes_nothing_and_putting_it_back_is_whole(
        published: tuple[Project, FakeGitHub], tmp_path: Path) -> None:
    project, gh = published
    local, pages = index_files(tmp_path), pages_on(gh)
    assert wheels_on(gh) == local and pages
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]  # nothing listens once the socket is closed
    project.ok("config", "set", "rocm-bake:githubApiUrl", f"http://127.0.0.1:{closed}")
    failed = project.pulumi("up", "--yes", "--skip-preview")
    assert failed.returncode != 0, failed.stdout[-3000:]
    assert gh.state.release_by_tag(TAG) is not None, "the live release was deleted before its replacement existed"
    assert wheels_on(gh) == local, "the live release's wheels were deleted before their replacement existed"
    assert pages_on(gh) == pages, "the live index pages changed for a release that does not exist"

    project.ok("config", "set", "rocm-bake:githubApiUrl", gh.api_url)
    project.ok("up", "--yes", "--skip-preview")
    assert wheels_on(gh) == local, "after the config is back, up must leave the release whole, not empty"
    project.ok("preview", "--expect-no-changes")


class Timeline(list):
    """One fake's request log that also appends each answered request to a list shared by several fakes,
    so the order between them is known."""

    def __init__(self, who: str, shared: list[tuple[str, str, str, int]], entries: list) -> None:
        super().__init__(entries)
        self.who, self.shared = who, shared

    def append(self, entry: tuple[str, str, int]) -> None:
        self.shared.append((self.who, *entry))
        super().append(entry)


def test_a_release_moved_to_another_github_is_whole_there_before_the_old_one_goes(
        published: tuple[Project, FakeGitHub], tmp_path: Path) -> None:
    project, old = published
    local, pages = index_files(tmp_path), pages_on(old)
    with FakeGitHub(token=old.state.token) as new:
        order: list[tuple[str, str, str, int]] = []
        old.state.log, new.state.log = Timeline("old", order, old.state.log), Timeline("new", order, new.state.log)
        new.inject("POST", r"/releases/\d+/assets$", 403, times=1000, body={"message": "uploads refused"})
        point_at(project, new)
        failed = project.pulumi("up", "--yes", "--skip-preview")
        assert failed.returncode != 0 and "uploads refused" in failed.stdout + failed.stderr, failed.stdout[-3000:]
        assert wheels_on(old) == local and pages_on(old) == pages, \
            "the old release went before its replacement held every wheel"

        new.state.faults.clear()
        project.ok("up", "--yes", "--skip-preview")
        assert wheels_on(new) == local, "the assets must follow their release to where it was replaced"
        assert pages_on(new).keys() == pages.keys()
        assert old.state.release_by_tag(TAG) is None and not pages_on(old), "the replaced release stays behind"
        gone = next(i for i, (who, method, path, _) in enumerate(order)
                    if who == "old" and method == "DELETE" and "/releases/" in path and "/assets/" not in path)
        whole = max(i for i, (who, method, path, status) in enumerate(order)
                    if who == "new" and status in (200, 201) and (method == "POST" and "/assets?" in path
                                                               or method in ("PATCH", "POST") and "/git/refs" in path))
        assert whole < gone, f"the old release was deleted (request {gone}) before the new one's last upload or " \
                             f"pages commit (request {whole})"
        project.ok("preview", "--expect-no-changes")
        project.ok("destroy", "--yes", "--skip-preview")
        assert new.state.release_by_tag(TAG) is None

"""Publish providers as plain methods against the fake GitHub, and declarations under Pulumi mocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest

from pulumi.dynamic import ConfigureRequest
from pulumi.dynamic.config import Config

from components.publish import (
    GitHubReleaseProvider,
    IndexPublishInputs,
    PagesIndexProvider,
    ReleaseAssetsProvider,
    declare_publish,
)
from rocm_bake.config import stack_config_from_mapping
from rocm_bake.errors import RocmBakeError
from rocm_bake.archset import ArchSet
from rocm_bake.publish.naming import release_tag
from rocm_bake.resource_types import GITHUB_RELEASE, PAGES_INDEX, PUBLISHING, RELEASE_ASSETS
from tests.fake_github import FakeGitHub
from tests.publish_fixtures import build_arch_index, dist, gh  # noqa: F401 - fixtures

ARCH = ArchSet("gfx950")


def props(gh: FakeGitHub, dist: Path, **extra: Any) -> dict[str, Any]:
    e = gh.endpoints()
    arch = extra.get("arch", ARCH)
    return {"arch": arch, "dist": str(dist), "repo": gh.full_name, "rocm_version": "10.1.0",
            "tag": release_tag(ArchSet(arch)), "api_url": e.api_url, "uploads_url": e.uploads_url, "web_url": e.web_url,
            "pages_url": e.pages_url, "index_sha256": "x", **extra}


def inputs(gh: FakeGitHub, dist: Path, **extra: Any) -> IndexPublishInputs:
    return IndexPublishInputs.from_props(props(gh, dist, **extra))


def configured(provider_type: type, gh: FakeGitHub, monkeypatch: pytest.MonkeyPatch | None = None):
    """A provider as the engine makes it: token from the stack's secret config in ``configure``."""
    provider = provider_type()
    provider.configure(ConfigureRequest(Config({"rocm-bake:githubToken": gh.state.token}, "rocm-bake")))
    return provider


def test_release_assets_create_diff_refresh_repair_delete(gh: FakeGitHub, dist: Path) -> None:
    provider = configured(ReleaseAssetsProvider, gh)
    p = props(gh, dist)
    gh.state.releases[99] = {"id": 99, "tag_name": release_tag(ARCH), "name": "n", "draft": False}  # made by the CLI
    created = provider.create(p)
    assert created.outs["asset_count"] == 8 and created.outs["release_id"] == 99
    assert len(gh.state.release_assets(release_tag(ARCH))) == 8

    assert provider.diff(created.id, created.outs, p).changes is False  # preview: nothing to do
    assert provider.diff(created.id, created.outs, {**p, "repo": "other/repo"}).replaces == ["repo"]

    # someone deletes an asset by hand: refresh sees it, preview shows a change, up repairs it
    victim = next(a for a in gh.state.assets.values() if a["name"].startswith("torch-"))
    del gh.state.assets[victim["id"]]
    refreshed = provider.read(created.id, created.outs).outs
    assert refreshed["asset_count"] == 7
    assert provider.diff(created.id, refreshed, p).changes is True
    updated = provider.update(created.id, refreshed, p)
    assert victim["name"] in gh.state.release_assets(release_tag(ARCH))
    assert provider.diff(created.id, provider.read(created.id, updated.outs).outs, p).changes is False

    provider.delete(created.id, updated.outs)
    assert gh.state.release_assets(release_tag(ARCH)) == {}


def test_release_is_adopted_refreshed_and_deleted(gh: FakeGitHub, dist: Path) -> None:
    """One owner: a release the CLI made is adopted (no 422); refresh sees a hand deletion; delete removes it."""
    from components.publish import GitHubReleaseProvider

    gh.state.releases[77] = {"id": 77, "tag_name": release_tag(ARCH), "name": "n", "draft": False}
    provider = configured(GitHubReleaseProvider, gh)
    p = props(gh, dist)
    created = provider.create(p)
    assert created.outs["release_id"] == 77 and len(gh.state.releases) == 1
    assert provider.diff(created.id, created.outs, p).changes is False
    del gh.state.releases[77]
    refreshed = provider.read(created.id, created.outs).outs
    assert refreshed["release_id"] is None
    assert provider.diff(created.id, refreshed, p).changes is True
    again = provider.update(created.id, refreshed, p).outs
    assert gh.state.release_by_tag(release_tag(ARCH))["id"] == again["release_id"]
    provider.delete(created.id, again)
    assert gh.state.release_by_tag(release_tag(ARCH)) is None


@pytest.mark.parametrize("provider_type", [GitHubReleaseProvider, ReleaseAssetsProvider, PagesIndexProvider])
def test_a_moved_release_is_replaced_create_first_and_the_same_one_by_another_url_in_place(
        provider_type: type, gh: FakeGitHub, dist: Path) -> None:
    """Create-first: a new target that fails leaves the live release; another URL of the same GitHub reaches the
    same release, which a replace would delete at its end after adopting it: updated in place instead."""
    provider = configured(provider_type, gh)
    p = props(gh, dist)
    created = configured(ReleaseAssetsProvider, gh).create(p)
    moved = provider.diff(created.id, created.outs, {**p, "repo": "other/repo"})
    assert moved.replaces == ["repo"] and moved.delete_before_replace is False
    alias = {**p, "api_url": gh.api_url.replace("127.0.0.1", "localhost")}
    same = provider.diff(created.id, created.outs, alias)
    assert same.changes is True and not same.replaces, "the same release by another URL must not be replaced"


@pytest.mark.parametrize("provider_type", [GitHubReleaseProvider, ReleaseAssetsProvider, PagesIndexProvider])
def test_a_renamed_repository_is_the_same_release_updated_in_place(
        provider_type: type, gh: FakeGitHub, dist: Path) -> None:
    """GitHub answers a renamed repository's old name with a redirect to the repository by id: the stack's
    ``githubRepo`` moved to the new name still reaches the live release, which a replace would delete at its end."""
    provider = configured(provider_type, gh)
    p = props(gh, dist)
    created = configured(ReleaseAssetsProvider, gh).create(p)
    release = gh.state.release_by_tag(p["tag"])
    former = gh.full_name
    gh.rename("octo/rocm-wheels")
    renamed = provider.diff(created.id, created.outs, {**p, "repo": "octo/rocm-wheels"})
    assert gh.state.requests("GET", f"/repos/{former}/releases/tags/"), "the old name was never asked"
    assert renamed.changes is True and not renamed.replaces, \
        f"the renamed repository's release must be updated in place, not replaced: {renamed.replaces}"
    assert gh.state.release_by_tag(p["tag"]) == release


def test_assets_follow_their_release_when_it_is_made_again(gh: FakeGitHub, dist: Path) -> None:
    provider = configured(ReleaseAssetsProvider, gh)
    p = props(gh, dist)
    created = provider.create(p)
    assert provider.diff(created.id, created.outs, {**p, "release_id": created.outs["release_id"]}).changes is False
    again = provider.diff(created.id, created.outs, {**p, "release_id": created.outs["release_id"] + 1})
    assert again.changes is True and not again.replaces, "a release made again must get its assets"


def test_release_assets_drift_by_replaced_bytes(gh: FakeGitHub, dist: Path) -> None:
    provider = configured(ReleaseAssetsProvider, gh)
    p = props(gh, dist)
    created = provider.create(p)  # creates the release itself when absent (CLI path)
    asset = next(a for a in gh.state.assets.values() if a["name"].endswith(".metadata"))
    asset["digest"] = "sha256:" + "0" * 64  # same name and size, other content
    assert provider.diff(created.id, provider.read(created.id, created.outs).outs, p).changes is True


def test_pages_index_create_diff_refresh_repair_delete(gh: FakeGitHub, tmp_path: Path) -> None:
    build_arch_index(tmp_path, "gfx1201", ["nixl"])
    build_arch_index(tmp_path, ARCH, ["torch", "triton"])
    dist = tmp_path / "dist"
    other = configured(PagesIndexProvider, gh).create(props(gh, dist, arch="gfx1201"))
    provider = configured(PagesIndexProvider, gh)
    p = props(gh, dist)
    created = provider.create(p)
    assert created.outs["commit"] == gh.state.refs["refs/heads/gh-pages"]
    assert provider.diff(created.id, created.outs, p).changes is False

    # a page edited by hand on gh-pages
    head = gh.state.refs["refs/heads/gh-pages"]
    files = gh.state.flatten(gh.state.commit_info(head)["tree"])
    path = f"data/wheels/{ARCH}/torch/index.html"
    files[path] = ("100644", gh.state.put("blob", b"<html>defaced</html>"))
    gh.state.refs["refs/heads/gh-pages"] = gh.state.make_commit(gh.state.write_tree(files), [head], "hand edit")
    refreshed = provider.read(created.id, created.outs).outs
    assert provider.diff(created.id, refreshed, p).changes is True
    provider.update(created.id, refreshed, p)
    assert gh.state.branch_files()[path] != b"<html>defaced</html>"

    provider.delete(created.id, created.outs)
    left = gh.state.branch_files()
    assert not any(k.startswith(f"data/wheels/{ARCH}/") for k in left)
    assert set(other.outs["files"]) <= set(left)  # the other arch's folder is untouched


# ------------------------------------------------------------------ mocks


#: The id the mocked engine gives every release it "creates".
MOCK_RELEASE_ID = 4242


class Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        self.resources.append(args)
        made = {"release_id": MOCK_RELEASE_ID} if args.name.endswith("-release") else {}
        return f"{args.name}-id", {**args.inputs, **made}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        return {}, []


def declared(config: dict[str, str], monkeypatch: pytest.MonkeyPatch, stack: str = ARCH) -> tuple[list, dict]:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project="rocm-bake", stack=stack, preview=False)
    seen: dict[str, Any] = {}

    @pulumi.runtime.test
    def program():
        token = config.get("rocm-bake:githubToken")
        exports = declare_publish(stack_config_from_mapping(stack, config, "test"),
                                  pulumi.Output.secret(token) if token else None, index_sha256="sha")
        outs = {k: v for k, v in exports.items() if isinstance(v, pulumi.Output)}
        seen.update({k: v for k, v in exports.items() if not isinstance(v, pulumi.Output)})
        if not outs:
            return None
        keys = list(outs)
        return pulumi.Output.all(*outs.values()).apply(lambda vals: seen.update(dict(zip(keys, vals))))

    program()
    return mocks.resources, seen


def test_publish_false_declares_no_github_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    resources, exports = declared({}, monkeypatch)
    assert resources == [] and "publish is false" in exports["publish"]


def test_publish_true_declares_release_assets_and_pages_for_that_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    resources, exports = declared({"rocm-bake:publish": "true", "rocm-bake:githubToken": "ghp_secret_x",
                                   "rocm-bake:githubRepo": "octo/rocm-bake"}, monkeypatch)
    by_type = {}
    for r in resources:
        by_type.setdefault(r.typ, []).append(r)
    assert set(by_type) == {"rocm-bake:publish:PublishedIndex", *PUBLISHING}
    dynamic = {r.name: r.inputs for r in resources if r.typ in PUBLISHING}
    assert {r.name: r.typ for r in resources if r.typ in PUBLISHING} == {
        "publish-gfx950-release": GITHUB_RELEASE.token, "publish-gfx950-assets": RELEASE_ASSETS.token,
        "publish-gfx950-pages": PAGES_INDEX.token}
    release = dynamic["publish-gfx950-release"]
    assert release["tag"] == "wheels-gfx950-rocm10.1.0" and release["repo"] == "octo/rocm-bake"
    assert all(inputs["arch"] == ARCH for inputs in dynamic.values())
    assert exports["release_tag"] == "wheels-gfx950-rocm10.1.0"
    # the tag is named once, by the component, and every child takes it; the index digest goes by its name
    assert {name: inputs["tag"] for name, inputs in dynamic.items()} == dict.fromkeys(dynamic, release["tag"])
    assert dynamic["publish-gfx950-assets"]["index_sha256"] == dynamic["publish-gfx950-pages"]["index_sha256"] == "sha"
    assert dynamic["publish-gfx950-assets"]["release_id"] == MOCK_RELEASE_ID, \
        "the assets take the release's id, so they follow it when it is made again"
    assert not [name for name, inputs in dynamic.items() if "depends_on_digest" in inputs]


def test_token_is_no_resource_input_and_not_in_the_pickled_provider(gh: FakeGitHub,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Providers are pickled into state: the token must live only in the provider process, read at run time."""
    import dill

    resources, _ = declared({"rocm-bake:publish": "true", "rocm-bake:githubToken": "ghp_secret_x",
                             "rocm-bake:githubRepo": "octo/rocm-bake"}, monkeypatch)
    for r in resources:
        if r.typ in PUBLISHING:
            assert "token" not in r.inputs
            assert b"ghp_secret_x" not in dill.dumps(r.inputs.get("__provider", ""))
    assert not [r for r in resources if "ghp_secret_x" in str(r.inputs)]  # in no resource's inputs at all

    def bearer(provider: ReleaseAssetsProvider) -> str:
        with provider.client(inputs(gh, Path("dist"))) as client:
            return client._http.headers["Authorization"]

    assert bearer(configured(ReleaseAssetsProvider, gh)) == f"Bearer {gh.state.token}"
    monkeypatch.setenv("GITHUB_TOKEN", "from-env")  # a rotated token in the environment is what runs
    assert bearer(ReleaseAssetsProvider()) == "Bearer from-env"
    monkeypatch.delenv("GITHUB_TOKEN")
    with pytest.raises(RocmBakeError, match="no GitHub token"):
        ReleaseAssetsProvider().client(inputs(gh, Path("dist")))


def test_publish_true_without_token_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RocmBakeError, match="no GitHub token.*githubToken"):
        declared({"rocm-bake:publish": "true", "rocm-bake:githubRepo": "octo/rocm-bake"}, monkeypatch)


def test_fat_build_publishes_its_own_release(monkeypatch: pytest.MonkeyPatch) -> None:
    resources, exports = declared({"rocm-bake:publish": "true", "rocm-bake:githubToken": "t",
                                   "rocm-bake:githubRepo": "octo/rocm-bake",
                                   "rocm-bake:pytorchRocmArch": "gfx950;gfx1201"}, monkeypatch, stack="fat")
    (release,) = [r for r in resources if r.name == "publish-gfx950-gfx1201-release"]
    assert release.inputs["tag"] == "wheels-gfx950-gfx1201-rocm10.1.0"
    assert exports["release_tag"] == "wheels-gfx950-gfx1201-rocm10.1.0"


def test_a_token_in_the_environment_wins_over_the_configured_one(gh: FakeGitHub, dist: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Rotated in GITHUB_TOKEN, the old config secret (what state remembers) is not what is sent."""
    provider = ReleaseAssetsProvider()
    provider.configure(ConfigureRequest(Config({"rocm-bake:githubToken": "ghp_old_token"}, "rocm-bake")))
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_new_token")
    with provider.client(inputs(gh, dist)) as client:
        assert client._http.headers["Authorization"] == "Bearer ghp_new_token"
    monkeypatch.delenv("GITHUB_TOKEN")
    with provider.client(inputs(gh, dist)) as client:
        assert client._http.headers["Authorization"] == "Bearer ghp_old_token"


def test_a_rejected_token_says_which_one_was_sent(gh: FakeGitHub, dist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale GITHUB_TOKEN wins over a valid rocm-bake:githubToken: the 401 says the environment's was sent."""
    provider = configured(ReleaseAssetsProvider, gh)  # the config holds the valid token
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_stale_environment_token")
    with pytest.raises(RocmBakeError, match=r"401 .*the token sent was GITHUB_TOKEN from the environment, which wins "
                                            r"over rocm-bake:githubToken; unset it") as caught:
        provider.create(props(gh, dist))
    assert "ghp_stale" not in str(caught.value)
    monkeypatch.delenv("GITHUB_TOKEN")
    gh.state.token = "ghp_rotated_elsewhere"  # now the config's token is the stale one
    with pytest.raises(RocmBakeError, match=r"401 .*the token sent was rocm-bake:githubToken$"):
        provider.create(props(gh, dist))


def test_pages_url_is_honoured_by_the_provider_and_its_landing_page(gh: FakeGitHub, dist: Path) -> None:
    """The pages_url input reaches the endpoints, the index_url output and the landing page's pip/uv lines."""
    site = f"{gh.web_url}/pages/{{owner}}/{{repo}}"
    p = props(gh, dist, pages_url=site)
    provider = configured(PagesIndexProvider, gh)
    created = provider.create(p)
    base = f"{gh.web_url}/pages/{gh.full_name}/data/wheels"
    assert created.outs["index_url"] == f"{base}/{ARCH}/"
    assert created.outs["pages_url"] == site  # the input stays the template: refresh reads the same site
    page = gh.state.branch_files()["data/wheels/index.html"].decode()
    assert f"pip install --index-url {base}/{ARCH}/" in page and f"uv pip install --index {base}/{ARCH}/" in page
    assert "github.io" not in page
    assert provider.diff(created.id, provider.read(created.id, created.outs).outs, p).changes is False


def test_pages_url_config_is_declared_not_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configured pages_url reaches PagesIndex as declared (not None in place of the input)."""
    resources, exports = declared({"rocm-bake:publish": "true", "rocm-bake:githubToken": "t",
                                   "rocm-bake:githubRepo": "octo/rocm-bake",
                                   "rocm-bake:githubPagesUrl": "https://pages.example/{owner}/{repo}"}, monkeypatch)
    (pages,) = [r for r in resources if r.name == "publish-gfx950-pages"]
    assert pages.inputs["pages_url"] == "https://pages.example/{owner}/{repo}"
    assert exports["github_repo"] == "octo/rocm-bake (rocm-bake:githubRepo)"


def test_publishing_takes_the_repo_from_a_github_origin_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from rocm_bake.publish import origin

    monkeypatch.setattr(origin, "origin_github_repo", lambda *_: "fork-owner/rocm-bake")
    _, exports = declared({"rocm-bake:publish": "true", "rocm-bake:githubToken": "t"}, monkeypatch)
    assert exports["github_repo"] == f"fork-owner/rocm-bake ({origin.FROM_ORIGIN})"
    monkeypatch.setattr(origin, "origin_github_repo", lambda *_: None)
    with pytest.raises(RocmBakeError, match="rocm-bake:githubRepo: required when rocm-bake:publish is true"):
        declared({"rocm-bake:publish": "true", "rocm-bake:githubToken": "t"}, monkeypatch)


@pytest.mark.parametrize(("url", "repo"), [
    ("https://github.com/me/rocm-bake.git", "me/rocm-bake"), ("git@github.com:me/rocm-bake.git", "me/rocm-bake"),
    ("ssh://git@github.com/me/rb", "me/rb"), ("https://x:ghp_tok@github.com/me/rb", "me/rb"),
    ("https://gitlab.com/me/rb.git", None), ("/work/main", None), ("https://github.com.evil/me/rb", None),
])
def test_github_repo_of_a_remote_url(url: str, repo: str | None) -> None:
    from rocm_bake.publish.origin import github_repo_of

    assert github_repo_of(url) == repo


def test_publish_cli_has_no_default_repository(gh: FakeGitHub, dist: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from rocm_bake.cli import main
    from rocm_bake.publish import origin

    e = gh.endpoints()
    argv = ["publish", "--arch", ARCH, "--dist", str(dist), "--dry-run", "--api-url", e.api_url,
            "--uploads-url", e.uploads_url, "--web-url", e.web_url, "--pages-url", e.pages_url]
    monkeypatch.setenv("GITHUB_TOKEN", gh.state.token)
    monkeypatch.setattr(origin, "origin_github_repo", lambda *_: None)
    assert main(argv) == 2
    assert "--repo: required: this checkout's origin remote is not on GitHub" in capsys.readouterr().err
    monkeypatch.setattr(origin, "origin_github_repo", lambda *_: gh.full_name)
    assert main(argv) == 0
    assert f"repository: {gh.full_name}, taken from the origin remote (set --repo" in capsys.readouterr().out

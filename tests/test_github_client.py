"""GitHubClient against the loopback fake: waits, retries, errors, pagination, git hashing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rocm_bake.errors import RocmBakeError
from rocm_bake.publish.github import GitHubHTTPError
from rocm_bake.publish.release import git_blob_sha
from tests.fake_github import FakeGitHub
from tests.publish_fixtures import Sleeps, gh, make_client  # noqa: F401 - fixture

TAG_PATH = r"/releases/tags/"


def test_primary_rate_limit_waits_until_reset_then_succeeds(gh: FakeGitHub) -> None:
    gh.inject_primary_rate_limit("GET", TAG_PATH, reset_in=30)
    sleeps = Sleeps()
    client = make_client(gh, sleeps=sleeps)
    assert client.get_release_by_tag("wheels-gfx950-rocm10.1.0") is None
    assert len(sleeps) == 1 and 28 <= sleeps[0] <= 32, sleeps
    assert [s for _m, p, s in gh.state.log if TAG_PATH in p] == [403, 404]


def test_secondary_rate_limit_honours_retry_after(gh: FakeGitHub) -> None:
    gh.inject_secondary_rate_limit("POST", r"/releases$", retry_after=7)
    sleeps = Sleeps()
    release = make_client(gh, sleeps=sleeps).create_release("t1", "n", "b")
    assert sleeps == [7.0]
    assert gh.state.releases[release.id]["tag_name"] == "t1"


def test_rate_limit_longer_than_max_wait_is_a_clear_error(gh: FakeGitHub) -> None:
    gh.inject_primary_rate_limit("GET", TAG_PATH, reset_in=7200)
    sleeps = Sleeps()
    with pytest.raises(RocmBakeError, match="rate limited for .* more than the 600 s"):
        make_client(gh, sleeps=sleeps, max_wait=600).get_release_by_tag("x")
    assert sleeps == []


def test_plain_403_is_not_retried(gh: FakeGitHub) -> None:
    gh.inject("POST", r"/releases$", 403, body={"message": "Resource not accessible by integration"})
    sleeps = Sleeps()
    with pytest.raises(GitHubHTTPError, match="contents:write") as info:
        make_client(gh, sleeps=sleeps).create_release("t", "n", "b")
    assert info.value.status == 403 and sleeps == []


def test_5xx_retried_with_backoff_then_succeeds(gh: FakeGitHub) -> None:
    gh.inject("GET", TAG_PATH, 502, times=2)
    sleeps = Sleeps()
    make_client(gh, sleeps=sleeps, backoff=0.5).get_release_by_tag("x")
    assert sleeps == [0.5, 1.0]


def test_5xx_gives_a_clear_error_after_max_attempts(gh: FakeGitHub) -> None:
    gh.inject("GET", TAG_PATH, 503, times=100)
    sleeps = Sleeps()
    with pytest.raises(RocmBakeError, match=r"HTTP 503 after 4 attempts"):
        make_client(gh, sleeps=sleeps, max_attempts=4).get_release_by_tag("x")
    assert sleeps == [1.0, 2.0, 4.0]
    assert len(gh.state.requests("GET", "/releases/tags/")) == 4


def test_bad_token_is_401_and_never_echoed(gh: FakeGitHub) -> None:
    client = make_client(gh, token="ghp_wrong_secret_value")
    with pytest.raises(GitHubHTTPError) as info:
        client.get_release_by_tag("x")
    assert info.value.status == 401 and "rejected" in str(info.value)
    assert "ghp_wrong_secret_value" not in str(info.value) + repr(client)


def test_no_token_reads_but_cannot_write(gh: FakeGitHub) -> None:
    client = make_client(gh, token=None)
    assert client.get_release_by_tag("x") is None
    with pytest.raises(GitHubHTTPError, match="no token was given"):
        client.create_release("t", "n", "b")
    assert gh.state.releases == {}


def test_assets_are_listed_across_pages(gh: FakeGitHub, tmp_path: Path) -> None:
    client = make_client(gh)
    release = client.create_release("t", "n", "b")
    f = tmp_path / "a.bin"
    f.write_bytes(b"x")
    handler_asset = {"release_id": release.id, "state": "uploaded", "size": 1, "data": b"x", "label": ""}
    for i in range(105):  # seeded directly: 105 uploads would only slow the test
        gh.state.assets[10_000 + i] = {**handler_asset, "id": 10_000 + i, "name": f"a{i}.bin"}
    names = [a.name for a in client.list_assets(release.id)]
    assert names == [f"a{i}.bin" for i in range(105)]
    assert len(gh.state.requests("GET", f"/releases/{release.id}/assets")) == 2


def test_upload_sends_length_and_duplicate_is_422_already_exists(gh: FakeGitHub, tmp_path: Path) -> None:
    client = make_client(gh)
    release = client.create_release("t", "n", "b")
    f = tmp_path / "pkg-1.0-py3-none-any.whl"
    f.write_bytes(b"wheel bytes" * 1000)
    asset = client.upload_asset(release.id, f.name, f)
    assert asset.size == f.stat().st_size and asset.state == "uploaded"
    assert gh.state.assets[asset.id]["data"] == f.read_bytes()
    import hashlib

    assert asset.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()
    with pytest.raises(GitHubHTTPError) as info:
        client.upload_asset(release.id, f.name, f)
    assert info.value.status == 422 and info.value.codes == ["already_exists"]


def test_git_data_objects_hash_exactly_as_real_git(gh: FakeGitHub, tmp_path: Path) -> None:
    """Blob, tree and nested paths: the fake's ids equal what git itself computes."""
    client = make_client(gh)
    files = {"data/wheels/gfx950/index.html": b"<html>a</html>\n", "data/wheels/gfx950/torch/index.html": b"t\n",
             "data/wheels/gfx1201/index.html": b"b\n", "data/wheels.txt": b"sorting edge\n", "x": b"y\n"}
    entries = []
    for path, data in files.items():
        sha = client.create_blob(data)
        assert sha == git_blob_sha(data)
        entries.append({"path": path, "mode": "100644", "type": "blob", "sha": sha})
    tree = client.create_tree(None, entries)

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    real = subprocess.run(["git", "-C", str(repo), "write-tree"], check=True, capture_output=True, text=True)
    assert tree == real.stdout.strip()

    listed = {e.path: e.sha for e in client.get_tree(tree) if e.type == "blob"}
    assert listed == {p: git_blob_sha(d) for p, d in files.items()}


def test_ref_update_is_fast_forward_only(gh: FakeGitHub) -> None:
    client = make_client(gh)
    tree = client.create_tree(None, [{"path": "a", "mode": "100644", "type": "blob", "sha": client.create_blob(b"a")}])
    first = client.create_commit("one", tree, [])
    client.set_branch("gh-pages", first, exists=False)
    unrelated = client.create_commit("other", tree, [])
    with pytest.raises(GitHubHTTPError, match="not a fast forward"):
        client.set_branch("gh-pages", unrelated, exists=True)
    second = client.create_commit("two", tree, [first])
    client.set_branch("gh-pages", second, exists=True)
    assert client.get_branch_head("gh-pages") == second

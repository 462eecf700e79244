"""GitHubClient against the loopback fake: waits, retries, errors, pagination, git hashing."""

from __future__ import annotations

import dataclasses
import email.utils
import io
import re
import subprocess
import time
from pathlib import Path

import pytest

from rocm_bake.errors import RocmBakeError
from rocm_bake.publish.github import GitHubHTTPError
from rocm_bake.publish.hashing import git_blob_sha
from tests.fake_github import FakeGitHub
from tests.publish_fixtures import gh, make_client, no_waits  # noqa: F401 - fixtures

TAG_PATH = r"/releases/tags/"


def lines(notes: io.StringIO) -> list[str]:
    return notes.getvalue().splitlines()


def waited(line: str) -> float:
    return float(re.search(r": waiting ([0-9.]+) s \(attempt \d+ of \d+\)$", line)[1])


def test_primary_rate_limit_waits_until_reset_then_succeeds(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject_primary_rate_limit("GET", TAG_PATH, reset_in=30)
    client = make_client(gh)
    assert client.get_release_by_tag("wheels-gfx950-rocm10.1.0") is None
    [line] = lines(no_waits)
    assert "rate limit (primary, resets in" in line and line.endswith("(attempt 2 of 5)"), line
    assert 29 <= waited(line) <= 33 and client.counters.waits == [pytest.approx(waited(line), abs=0.5)]
    assert [s for _m, p, s in gh.state.log if TAG_PATH in p] == [403, 404]


def test_secondary_rate_limit_honours_retry_after(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject_secondary_rate_limit("POST", r"/releases$", retry_after=7)
    client = make_client(gh)
    release = client.create_release("t1", "n", "b")
    [line] = lines(no_waits)
    assert "rate limit (secondary, retry-after 7): waiting" in line and 7 <= waited(line) <= 8  # jittered up to 1 s
    assert gh.state.releases[release.id]["tag_name"] == "t1"


def test_secondary_rate_limit_retry_after_as_an_http_date(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject_secondary_rate_limit("GET", TAG_PATH, retry_after=email.utils.formatdate(time.time() + 45, usegmt=True))
    make_client(gh).get_release_by_tag("x")
    [line] = lines(no_waits)
    assert 42 <= waited(line) <= 47, line  # the date, not the one-minute default nor the backoff


def test_secondary_rate_limit_without_headers_waits_a_minute(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject("GET", TAG_PATH, 403, body={"message": "You have exceeded a secondary rate limit."})
    make_client(gh).get_release_by_tag("x")
    [line] = lines(no_waits)
    assert "rate limit (secondary)" in line and 60 <= waited(line) <= 61


def test_rate_limit_longer_than_max_wait_is_a_clear_error(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject_primary_rate_limit("GET", TAG_PATH, reset_in=7200)
    client = make_client(gh, max_wait=600)
    with pytest.raises(RocmBakeError, match=r"rate limit \(primary, resets in 7\d+ s\): the server asks for a 7\d+ s "
                                            r"wait, more than the \d+ s left of the 600 s this run waits; try again"):
        client.get_release_by_tag("x")
    assert client.counters.waits == [] and lines(no_waits) == [] and client.counters.requests == 1


def test_plain_403_is_not_retried(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject("POST", r"/releases$", 403, body={"message": "Resource not accessible by integration"})
    with pytest.raises(GitHubHTTPError, match="contents:write") as info:
        make_client(gh).create_release("t", "n", "b")
    assert info.value.status == 403 and lines(no_waits) == []


def test_5xx_retried_with_backoff_then_succeeds(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject("GET", TAG_PATH, 502, times=2)
    make_client(gh).get_release_by_tag("x")
    assert [re.search(r": (HTTP \d+): waiting", line)[1] for line in lines(no_waits)] == ["HTTP 502", "HTTP 502"]
    assert [line.rsplit("(", 1)[1] for line in lines(no_waits)] == ["attempt 2 of 5)", "attempt 3 of 5)"]


def test_a_503_with_retry_after_waits_as_told(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject("GET", TAG_PATH, 503, headers={"retry-after": "12"})
    make_client(gh).get_release_by_tag("x")
    [line] = lines(no_waits)
    assert ": HTTP 503: waiting" in line and 12 <= waited(line) <= 13, line


def test_connection_resets_are_retried(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject_reset("GET", TAG_PATH, times=2)
    assert make_client(gh).get_release_by_tag("x") is None
    assert [s for _m, p, s in gh.state.log if TAG_PATH in p] == [0, 0, 404]
    assert len(lines(no_waits)) == 2 and all(re.search(r"(RemoteProtocolError|ReadError|WriteError)", line)
                                             for line in lines(no_waits)), lines(no_waits)


def test_5xx_gives_a_clear_error_after_max_attempts(gh: FakeGitHub, no_waits: io.StringIO) -> None:
    gh.inject("GET", TAG_PATH, 503, times=100)
    with pytest.raises(RocmBakeError, match=r"GitHub GET http://127.0.0.1:\d+/repos/octo/rocm-bake/releases/tags/x: "
                                            r"gave up after 4 attempts in [0-9.]+ s: HTTP 503; GitHub may be degraded"):
        make_client(gh, max_attempts=4).get_release_by_tag("x")
    assert len(lines(no_waits)) == 3
    assert len(gh.state.requests("GET", "/releases/tags/")) == 4


def test_backoff_is_jittered_and_really_waited(gh: FakeGitHub) -> None:
    """Outside testing mode the backoff is slept, each wait between the base and the base plus jitter."""
    gh.inject("GET", TAG_PATH, 500, times=3)
    client = make_client(gh, backoff=0.05)
    client.retry = dataclasses.replace(client.retry, wait_jitter_s=0.1)
    started = time.monotonic()
    client.get_release_by_tag("x")
    elapsed = time.monotonic() - started
    waits, bases = client.counters.waits, [0.05, 0.1, 0.2]  # exponential: initial x 2**(n-1)
    assert len(waits) == 3 and all(b <= w <= b + 0.1 for w, b in zip(waits, bases)), waits
    assert any(w > b for w, b in zip(waits, bases)) and elapsed >= sum(waits) * 0.9


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


def test_a_write_to_a_renamed_repository_names_its_new_name_and_the_setting_and_is_not_followed(gh: FakeGitHub) -> None:
    client = make_client(gh)
    former = gh.full_name
    gh.rename("octo/rocm-wheels")
    assert client.get_release_by_tag("v-none") is None, "a read of the old name follows GitHub's redirect"
    with pytest.raises(GitHubHTTPError) as raised:
        client.create_release("v1", "v1", "")
    assert str(raised.value).endswith(f": 307: the repository {former} was renamed to octo/rocm-wheels on GitHub, "
                                      "and a write never follows the old name: set rocm-bake:githubRepo to "
                                      "octo/rocm-wheels")
    assert gh.state.releases == {}


def test_a_write_redirected_where_github_cannot_name_the_repository_says_so_without_a_name(gh: FakeGitHub) -> None:
    client = make_client(gh)
    former = gh.full_name
    gh.rename("octo/rocm-wheels")
    gh.inject("GET", r"^/repositories/\d+$", 404, body={"message": "Not Found"})
    with pytest.raises(GitHubHTTPError) as raised:
        client.create_release("v1", "v1", "")
    assert str(raised.value).endswith(f": 307: GitHub redirects the repository {former} elsewhere (renamed, or "
                                      "moved to another owner), and a write never follows the old name: set "
                                      "rocm-bake:githubRepo to its new name")
    assert gh.state.releases == {}

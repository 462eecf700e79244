"""Publishing one arch's index to the loopback GitHub: idempotence, faults, limits, and a real pip install."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_bake import progress
from rocm_bake.archset import ArchSet
from rocm_bake.cli import main
from rocm_bake.errors import RocmBakeError
from rocm_bake.publish.hashing import git_blob_sha
from rocm_bake.publish.naming import release_tag
from rocm_bake.publish.publisher import Publisher, publish
from rocm_bake.retry import seconds
from tests.fake_github import FakeGitHub
from tests.index_fixtures import NATIVE_TAG, ROCM, GIT, make_wheel, device_files
from tests.publish_fixtures import build_arch_index, dist, gh, make_client, no_waits  # noqa: F401 - fixtures
from tests.readonly_fixtures import run_read_only

ARCH = ArchSet("gfx950")
TAG = release_tag(ARCH)
TORCH = f"torch-2.15.0a0+{GIT}.{ROCM}-{NATIVE_TAG}.whl"


def run(gh: FakeGitHub, dist: Path, arch: str = ARCH, dry_run: bool = False, **kw):
    return Publisher(make_client(gh, **kw), ArchSet(arch), dist).run(dry_run=dry_run)


def local_files(dist: Path, arch: str = ARCH) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (dist / "index" / arch / "files").iterdir()}


def assert_release_matches(gh: FakeGitHub, dist: Path, arch: str = ARCH) -> None:
    assets = gh.state.release_assets(release_tag(ArchSet(arch)))
    assert {n: a["data"] for n, a in assets.items()} == local_files(dist, arch)
    assert all(a["state"] == "uploaded" for a in assets.values())


def writes(gh: FakeGitHub) -> list[tuple[str, str, int]]:
    return [r for r in gh.state.log if r[0] in ("POST", "PATCH", "DELETE")]


def rebuild_torch(tmp: Path, arch: str = ARCH, payload: bytes = b"rebuilt") -> None:
    """Same torch filename, different bytes: what a new build of the same version looks like."""
    wheels = tmp / "wheels" / arch
    (wheels / TORCH).unlink()
    make_wheel(wheels, "torch", f"2.15.0a0+{GIT}.{ROCM}", [f"triton==3.6.0+{GIT}.{ROCM}"],
               {**device_files("torch", arch), "torch/_arch.py": f"BUILT_FOR = {arch!r}\n".encode(),
                "torch/extra.bin": payload}, tag=NATIVE_TAG, requires_python=">=3.10")
    from rocm_bake.index.build import build_index

    build_index(ArchSet(arch), wheels, tmp / "dist")


# ------------------------------------------------------------------ idempotence


def test_first_publish_creates_release_uploads_and_one_commit(gh: FakeGitHub, dist: Path) -> None:
    result = run(gh, dist)
    assert_release_matches(gh, dist)
    assert result.uploads == len(local_files(dist)) == 8 and result.commits == 1 and result.deletes == 0
    assert gh.state.release_by_tag(TAG)["draft"] is False
    pages = gh.state.branch_files()
    assert sorted(pages) == sorted([f"data/wheels/{ARCH}/{p}" for p in
                                    ["index.html", "index.json", "nixl/index.html", "rocm-torch/index.html",
                                     "torch/index.html", "triton/index.html", "requirements.txt", "pylock.toml"]]
                                  + ["data/wheels/index.html", "data/wheels/index.json"])
    assert gh.state.commit_count() == 1
    torch_page = pages[f"data/wheels/{ARCH}/torch/index.html"].decode()
    sha = hashlib.sha256(local_files(dist)[TORCH]).hexdigest()
    assert f'href="{gh.web_url}/octo/rocm-bake/releases/download/{TAG}/{TORCH.replace("+", "%2B")}#sha256={sha}"' in torch_page
    # the locks go beside the pages: requirements.txt as built, pylock.toml pointing at the release's wheels
    assert pages[f"data/wheels/{ARCH}/requirements.txt"] == (dist / "index" / ARCH / "requirements.txt").read_bytes()
    pylock = pages[f"data/wheels/{ARCH}/pylock.toml"].decode()
    assert f'url = "{gh.web_url}/octo/rocm-bake/releases/download/{TAG}/{TORCH.replace("+", "%2B")}"' in pylock
    assert 'path = "files/' not in pylock
    assert result.pages_files == {p: git_blob_sha(d) for p, d in pages.items() if p.startswith(f"data/wheels/{ARCH}/")}


def test_second_identical_publish_changes_nothing(gh: FakeGitHub, dist: Path) -> None:
    run(gh, dist)
    head = gh.state.refs["refs/heads/gh-pages"]
    gh.state.log.clear()
    result = run(gh, dist)
    assert (result.uploads, result.deletes, result.commits) == (0, 0, 0)
    assert writes(gh) == []
    assert gh.state.refs["refs/heads/gh-pages"] == head
    assert result.plan.count("keep") == 8


def test_changed_wheel_replaces_just_that_asset(gh: FakeGitHub, dist: Path, tmp_path: Path) -> None:
    run(gh, dist)
    before = {n: a["id"] for n, a in gh.state.release_assets(TAG).items()}
    rebuild_torch(tmp_path)
    result = run(gh, dist)
    assert [(a.name, a.action) for a in result.plan.assets if a.action != "keep"] == [(TORCH, "replace")]
    assert (result.uploads, result.deletes, result.commits) == (1, 1, 1)
    after = {n: a["id"] for n, a in gh.state.release_assets(TAG).items()}
    assert {n for n in after if after[n] != before[n]} == {TORCH}
    assert_release_matches(gh, dist)
    # the torch page, and the folder's index.json (the landing page's size and date for this index)
    assert result.plan.pages.changed == [f"data/wheels/{ARCH}/index.json", f"data/wheels/{ARCH}/torch/index.html"]
    assert gh.state.commit_count() == 2


def test_removed_wheel_deletes_its_assets(gh: FakeGitHub, tmp_path: Path) -> None:
    build_arch_index(tmp_path, ARCH, ["torch", "triton", "nixl"])
    dist = tmp_path / "dist"
    run(gh, dist)
    (tmp_path / "wheels" / ARCH / "nixl-0.7.0-py3-none-any.whl").unlink()
    from rocm_bake.index.build import build_index

    build_index(ArchSet(ARCH), tmp_path / "wheels" / ARCH, dist)
    result = run(gh, dist)
    deleted = sorted(a.name for a in result.plan.assets if a.action == "delete")
    assert "nixl-0.7.0-py3-none-any.whl" in deleted and "nixl-0.7.0-py3-none-any.whl.metadata" in deleted
    assert_release_matches(gh, dist)
    assert f"data/wheels/{ARCH}/nixl/index.html" not in gh.state.branch_files()
    assert result.commits == 1


def test_two_arches_publish_side_by_side(gh: FakeGitHub, tmp_path: Path) -> None:
    build_arch_index(tmp_path, "gfx950", ["torch", "triton"])
    build_arch_index(tmp_path, "gfx1201", ["torch", "triton"])
    dist = tmp_path / "dist"
    run(gh, dist, "gfx950")
    run(gh, dist, "gfx1201")
    a, b = gh.state.release_assets(release_tag(ArchSet("gfx950"))), gh.state.release_assets(release_tag(ArchSet("gfx1201")))
    assert TORCH in a and TORCH in b and a[TORCH]["digest"] != b[TORCH]["digest"]
    assert_release_matches(gh, dist, "gfx950")
    assert_release_matches(gh, dist, "gfx1201")
    gfx950_pages = {p: d for p, d in gh.state.branch_files().items() if p.startswith("data/wheels/gfx950/")}
    rebuild_torch(tmp_path, "gfx1201")
    result = run(gh, dist, "gfx1201")
    assert result.uploads == 1 and result.commits == 1
    assert gh.state.release_assets(release_tag(ArchSet("gfx950"))) == a  # untouched
    assert {p: d for p, d in gh.state.branch_files().items() if p.startswith("data/wheels/gfx950/")} == gfx950_pages


# ---------------------------------------------------------------------- faults


def test_duplicate_422_from_a_concurrent_identical_upload_is_not_an_error(gh: FakeGitHub, dist: Path) -> None:
    client = make_client(gh)
    publisher = Publisher(client, ARCH, dist)
    plan, release = publisher.plan()
    assert release is None
    release = client.create_release(TAG, "n", "b")
    other = make_client(gh)
    other.upload_asset(release.id, TORCH, dist / "index" / ARCH / "files" / TORCH)  # lands between plan and apply
    publisher.apply_assets(plan.model_copy(update={"release_exists": False}), release)
    assert_release_matches(gh, dist)
    assert any(s == 422 for _m, p, s in gh.state.log if "name=torch" in p)


def test_duplicate_422_with_different_bytes_is_replaced(gh: FakeGitHub, dist: Path, tmp_path: Path) -> None:
    client = make_client(gh)
    publisher = Publisher(client, ARCH, dist)
    plan, _ = publisher.plan()
    release = client.create_release(TAG, "n", "b")
    wrong = tmp_path / "wrong"
    wrong.write_bytes(b"not the wheel")
    client.upload_asset(release.id, TORCH, wrong)
    publisher.apply_assets(plan, release)
    assert_release_matches(gh, dist)


def test_rate_limits_during_publish_are_waited_out(gh: FakeGitHub, dist: Path, no_waits: io.StringIO) -> None:
    gh.inject_secondary_rate_limit("POST", r"/assets$", retry_after=9)
    gh.inject_primary_rate_limit("POST", r"/git/blobs", reset_in=40)
    client = make_client(gh)
    Publisher(client, ARCH, dist).run()
    waits = client.counters.waits
    assert len(waits) == 2 and any(9 <= w <= 10 for w in waits) and any(39 <= w <= 43 for w in waits), waits
    shown = no_waits.getvalue()
    # the line shows the wait chosen (9 s asked, plus up to 1 s of jitter: "9.4 s", or "10.0 s" from 9.95 s on)
    secondary = next(w for w in waits if 9 <= w <= 10)
    assert f"rate limit (secondary, retry-after 9): waiting {seconds(secondary)} " in shown, shown
    assert "rate limit (primary, resets in" in shown, shown
    assert_release_matches(gh, dist)
    assert gh.state.commit_count() == 1


def test_upload_502_mid_body_leaves_starter_which_is_cleaned_and_retried(gh: FakeGitHub, dist: Path,
                                                                         no_waits: io.StringIO) -> None:
    gh.inject("POST", r"/assets$", 502, times=2, partial_upload=True)
    run(gh, dist)
    assert_release_matches(gh, dist)
    retries = [line for line in no_waits.getvalue().splitlines() if ": waiting " in line]
    assert len(retries) == 2 and all(line.startswith("upload of ") and "502" in line for line in retries), retries


def test_upload_connection_reset_is_retried(gh: FakeGitHub, dist: Path, no_waits: io.StringIO) -> None:
    gh.inject_reset("POST", r"/assets$", times=2)
    result = run(gh, dist)
    assert_release_matches(gh, dist)
    assert result.uploads == 8 and len(gh.state.requests("POST", "/assets")) == 10
    assert no_waits.getvalue().count("(attempt 2 of 5)") == 1 and no_waits.getvalue().count("(attempt 3 of 5)") == 1


def test_interrupted_publish_is_completed_by_the_next_run(gh: FakeGitHub, dist: Path, no_waits: io.StringIO) -> None:
    run(gh, dist)  # published once; then every asset vanishes and each re-upload dies mid-body ...
    gh.state.assets.clear()
    gh.inject("POST", r"/assets$", 502, times=100, partial_upload=True)
    with pytest.raises(RocmBakeError, match=r"upload of .*: gave up after 3 attempts in [0-9.]+ s: .*502.*; "
                                            r"run publish again to finish"):
        run(gh, dist, max_attempts=3)
    assert gh.state.assets == {}  # each failed attempt's starter was deleted
    gh.state.faults.clear()
    # ... and the next one finishes it without a new commit (the pages never changed).
    result = run(gh, dist)
    assert_release_matches(gh, dist)
    assert result.commits == 0 and result.uploads == 8


def test_persistent_5xx_on_git_api_is_a_clear_error_then_recovers(gh: FakeGitHub, dist: Path,
                                                                  no_waits: io.StringIO) -> None:
    gh.inject("POST", r"/git/blobs", 500, times=100)
    with pytest.raises(RocmBakeError, match=r"GitHub POST .*/git/blobs: gave up after 5 attempts in [0-9.]+ s: HTTP 500"):
        run(gh, dist)
    assert no_waits.getvalue().count("HTTP 500: waiting") == 4
    assert "refs/heads/gh-pages" not in gh.state.refs  # readers never see half an index
    gh.state.faults.clear()
    result = run(gh, dist)
    assert result.uploads == 0 and result.commits == 1
    assert gh.state.commit_count() == 1


# ---------------------------------------------------------------- refusals


def test_file_over_2gib_refused_before_any_request(gh: FakeGitHub, dist: Path) -> None:
    big = dist / "index" / ARCH / "files" / "big-1.0-py3-none-any.whl"
    with open(big, "wb") as handle:
        handle.truncate(2 * 1024**3)  # sparse: costs nothing on disk
    with pytest.raises(RocmBakeError, match=r"big-1.0-py3-none-any.whl \(2147483648 bytes\).*under 2 GiB"):
        run(gh, dist)
    assert gh.state.log == []


def test_names_github_would_merge_are_refused(gh: FakeGitHub, dist: Path) -> None:
    files = dist / "index" / ARCH / "files"
    (files / "NIXL-0.7.0-py3-none-any.whl").write_bytes((files / "nixl-0.7.0-py3-none-any.whl").read_bytes())
    with pytest.raises(RocmBakeError, match="two assets with the same name"):
        run(gh, dist)
    assert gh.state.log == []


def test_stale_index_refused(gh: FakeGitHub, dist: Path) -> None:
    page = dist / "index" / ARCH / "torch" / "index.html"
    page.write_bytes(page.read_bytes().replace(b"sha256=", b"sha256=0", 1))
    with pytest.raises(RocmBakeError, match="stale or edited index"):
        run(gh, dist)
    assert gh.state.log == []


def test_missing_index_is_a_clear_error(gh: FakeGitHub, tmp_path: Path) -> None:
    with pytest.raises(RocmBakeError, match="run `rocm-bake index build --arch gfx950` first"):
        run(gh, tmp_path)


def test_bad_token_is_a_clear_error_and_changes_nothing(gh: FakeGitHub, dist: Path) -> None:
    with pytest.raises(RocmBakeError, match="401 Bad credentials: the token was rejected"):
        run(gh, dist, token="ghp_nope")
    assert gh.state.releases == {} and gh.state.assets == {} and "refs/heads/gh-pages" not in gh.state.refs


def test_token_absent_is_a_clear_error(gh: FakeGitHub, dist: Path) -> None:
    with pytest.raises(RocmBakeError, match="set GITHUB_TOKEN"):
        publish(ARCH, dist, gh.full_name, None, endpoints=gh.endpoints())
    assert gh.state.log == []


def test_dry_run_changes_nothing(gh: FakeGitHub, dist: Path, tmp_path: Path) -> None:
    run(gh, dist)
    rebuild_torch(tmp_path)
    assets = {n: dict(a) for n, a in gh.state.release_assets(TAG).items()}
    head = gh.state.refs["refs/heads/gh-pages"]
    gh.state.log.clear()
    result = publish(ARCH, dist, gh.full_name, None, endpoints=gh.endpoints(), dry_run=True)  # anonymous reads
    assert result.dry_run and [(a.name, a.action) for a in result.plan.assets if a.action != "keep"] == [(TORCH, "replace")]
    # the torch page, and the folder's index.json (the landing page's size and date for this index)
    assert result.plan.pages.changed == [f"data/wheels/{ARCH}/index.json", f"data/wheels/{ARCH}/torch/index.html"]
    assert writes(gh) == [] and gh.state.refs["refs/heads/gh-pages"] == head
    assert {n: dict(a) for n, a in gh.state.release_assets(TAG).items()} == assets


# --------------------------------------------------------------------- CLI


def _cli(args: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch) -> tuple[int, str, str]:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_publish_dry_run_then_real(gh: FakeGitHub, dist: Path, capsys, monkeypatch) -> None:
    e = gh.endpoints()
    base = ["publish", "--arch", ARCH, "--dist", str(dist), "--repo", gh.full_name, "--api-url", e.api_url,
            "--uploads-url", e.uploads_url, "--web-url", e.web_url, "--pages-url", e.pages_url]
    code, out, err = _cli(base, {}, capsys, monkeypatch)
    assert code == 2 and "set GITHUB_TOKEN" in err
    code, out, _ = _cli(base + ["--dry-run"], {}, capsys, monkeypatch)
    assert code == 0 and "dry run: nothing changed" in out and "8 upload" in out and gh.state.releases == {}
    code, out, _ = _cli(base + ["--json"], {"GITHUB_TOKEN": gh.state.token}, capsys, monkeypatch)
    assert not progress.is_quiet(), "--json must not leave progress silenced for later commands"
    body = json.loads(out)
    assert code == 0 and body["uploads"] == 8 and body["commits"] == 1
    assert gh.state.token not in out
    code, out, _ = _cli(base, {"GITHUB_TOKEN": gh.state.token}, capsys, monkeypatch)
    assert code == 0 and "0 uploaded, 0 deleted, gh-pages commit none (unchanged)" in out


def test_cli_a_bad_arch_is_one_parser_line_before_any_request(gh: FakeGitHub, dist: Path, capsys) -> None:
    """--arch is parsed by argparse into an ArchSet: a bad one exits 2 naming the arch, and GitHub hears nothing."""
    argv = ["publish", "--arch", "gfx950;gfx951", "--dist", str(dist), "--repo", gh.full_name,
            "--api-url", gh.endpoints().api_url, "--dry-run"]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert len(err.splitlines()) == 1 and err.startswith(
        "rocm-bake: error: argument --arch: unknown architecture 'gfx951': known are gfx908"), err
    assert gh.state.log == []


def test_cli_publish_progress_lines_and_quiet(gh: FakeGitHub, dist: Path) -> None:
    """stderr not a terminal: one line per upload and one for the gh-pages commit; --quiet and --json: none."""
    e = gh.endpoints()
    base = [sys.executable, "-m", "rocm_bake", "publish", "--arch", ARCH, "--dist", str(dist), "--repo", gh.full_name,
            "--api-url", e.api_url, "--uploads-url", e.uploads_url, "--web-url", e.web_url, "--pages-url", e.pages_url]
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()} | {"GITHUB_TOKEN": gh.state.token}
    first = subprocess.run(base, capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    uploads = [line for line in lines if line.startswith("upload ")]
    assert len(uploads) == 8 and all(re.search(r": [0-9.]+ (B|KB|MB) in [0-9.]+ s \(.*/s\)$", u) for u in uploads)
    assert [line for line in lines if line.startswith("gh-pages commit: ")], lines
    gh.state.assets.clear()  # something to do again, silently
    for flag in ("--quiet", "--json"):
        again = subprocess.run(base + [flag], capture_output=True, text=True, timeout=120, env=env)
        assert again.returncode == 0 and again.stderr == "", again.stderr


def test_dist_that_is_a_file_or_read_only(gh: FakeGitHub, dist: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    e = gh.endpoints()
    urls = ["--repo", gh.full_name, "--api-url", e.api_url, "--uploads-url", e.uploads_url, "--web-url", e.web_url,
            "--pages-url", e.pages_url]
    refused = subprocess.run([sys.executable, "-m", "rocm_bake", "publish", "--arch", ARCH, "--dist", str(afile), *urls],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "GITHUB_TOKEN": "t"})
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"rocm-bake: error: --dist {afile}: is not a directory"), refused.stderr
    # publishing only reads DIST: a read-only one publishes (the hash cache just is not kept)
    published = run_read_only(dist, ["publish", "--arch", ARCH, "--dist", str(dist), *urls],
                              env={"GITHUB_TOKEN": gh.state.token})
    assert published.returncode == 0, published.stderr
    assert "hash cache not saved" in published.stderr and "Traceback" not in published.stderr
    assert_release_matches(gh, dist)


# -------------------------------------------------------------- end to end


def test_pip_installs_from_published_pages_and_release_downloads(gh: FakeGitHub, tmp_path: Path) -> None:
    build_arch_index(tmp_path, ARCH)
    result = run(gh, tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    gh.state.log.clear()
    # no pip config at all: this machine's global constraints and extra indexes must not take part
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIP_")}, "PIP_CONFIG_FILE": os.devnull}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--isolated", "--no-cache-dir",
         "--disable-pip-version-check", "--index-url", result.plan.pages_url, f"rocm-torch[device-{ARCH}]"],
        capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check = subprocess.run([str(py), "-I", "-c", "import torch._arch, amd_aiter._arch, vllm, nixl_rocm;"
                            "print(torch._arch.BUILT_FOR, amd_aiter._arch.BUILT_FOR)"],
                           capture_output=True, text=True, check=True)
    assert check.stdout.split() == [ARCH, ARCH]
    downloads = {unquote_name(p) for m, p, s in gh.state.log if m == "GET" and "/releases/download/" in p and s == 302}
    assert TORCH in downloads and any(n.startswith("rocm_torch-") for n in downloads)
    # every wheel came through the release (the pages host served only HTML)
    assert all(p.endswith("/") or p.endswith(".html") for m, p, _s in gh.state.log if "/pages/" in p)

    # pip checks each offsite asset against the page's #sha256=: same-size tampered bytes are refused
    asset = gh.state.release_assets(TAG)[TORCH]
    data = bytearray(asset["data"])
    data[-30] ^= 0xFF
    asset["data"] = bytes(data)
    venv2 = tmp_path / "venv2"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv2)], check=True)
    bad = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv2 / "bin" / "python"), "install", "--isolated",
         "--no-cache-dir", "--index-url", result.plan.pages_url, f"rocm-torch[device-{ARCH}]"],
        capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path,
    )
    assert bad.returncode != 0 and "HASHES" in bad.stdout + bad.stderr, bad.stdout + bad.stderr


def unquote_name(path: str) -> str:
    from urllib.parse import unquote

    return unquote(re.sub(r".*/releases/download/[^/]+/", "", path))


def test_a_broken_metadata_file_is_refused_before_anything_is_published(gh: FakeGitHub, dist: Path) -> None:
    """The .metadata a resolver reads is validated when publishing, as METADATA is when building."""
    files = dist / "index" / ARCH / "files"
    meta = next(files.glob("torch-*.whl.metadata"))
    meta.write_bytes(meta.read_bytes().replace(b"Name: torch", b"Name: torch!!"))
    with pytest.raises(RocmBakeError, match=r"\.metadata.*[Nn]ame"):
        run(gh, dist)
    assert gh.state.releases == {} and writes(gh) == []


def test_cli_publish_to_a_renamed_repository_is_one_line_naming_the_new_name_and_writes_nothing(
        gh: FakeGitHub, dist: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    """GitHub redirects an old name; reads follow it, writes do not: the line says what the repository is called
    now and which setting to change, and nothing is written under the old name."""
    run(gh, dist)
    rebuild_torch(tmp_path)  # a change to publish, so the run gets as far as a write
    former = gh.full_name
    gh.rename("octo/rocm-wheels")
    head, assets = gh.state.refs["refs/heads/gh-pages"], {n: dict(a) for n, a in gh.state.release_assets(TAG).items()}
    gh.state.log.clear()
    e = gh.endpoints()
    code, _, err = _cli(["publish", "--arch", ARCH, "--dist", str(dist), "--repo", former, "--api-url", e.api_url,
                         "--uploads-url", e.uploads_url, "--web-url", e.web_url, "--pages-url", e.pages_url],
                        {"GITHUB_TOKEN": gh.state.token}, capsys, monkeypatch)
    last = err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("rocm-bake: error: GitHub ") and last.endswith(
        f": 307: the repository {former} was renamed to octo/rocm-wheels on GitHub, and a write never follows the "
        "old name: set --repo to octo/rocm-wheels"), err
    assert "Traceback" not in err and gh.state.token not in err
    assert [r for r in writes(gh) if r[2] != 307] == [], "something was written under the old name"
    assert gh.state.refs["refs/heads/gh-pages"] == head
    assert {n: dict(a) for n, a in gh.state.release_assets(TAG).items()} == assets

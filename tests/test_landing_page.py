"""The landing page: regenerated from what is on gh-pages in the publish commit itself, checked in a real browser.

Two indexes are published one after the other against the loopback GitHub
(a single-arch one, then a fat one): the page lists both, each row read back
from its folder's ``index.json`` on the branch; removing a folder removes its
row in the same commit. Headless Chromium (Debian's) renders the page at a
phone's width; the rendered table is checked against the published indexes
and a screenshot is saved under the test's temp dir.
"""

from __future__ import annotations

import html.parser
import shutil
import subprocess
from pathlib import Path

import pytest

from rocm_bake.cli import main
from rocm_bake.publish.landing import LANDING_PATH
from rocm_bake.publish.release import publish
from tests.fake_github import FakeGitHub

from index_fixtures import arch_wheel_set
from rocm_bake.index import build_index

FAT = "gfx950;gfx1201"
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def gh():
    with FakeGitHub(owner="octo", repo="rocm-bake", token="ghp_landing") as fake:
        yield fake


def build(dist: Path, arch: str) -> None:
    from rocm_bake.index.target import IndexTarget

    wheels = dist / "wheels" / IndexTarget.parse(arch).dir_name
    arch_wheel_set(wheels, arch)
    build_index(arch, wheels, dist)


class Rows(html.parser.HTMLParser):
    """The index rows of a page: {row id: text of its cells}."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._row: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and found.get("class") == "index":
            self._row = found.get("id")
            self.rows[self._row or ""] = []
        elif tag == "td" and self._row is not None:
            self.rows[self._row].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self.rows[self._row]:
            self.rows[self._row][-1] += data


def rows_of(page: str) -> dict[str, list[str]]:
    parser = Rows()
    parser.feed(page)
    return parser.rows


def test_publishing_two_indexes_lists_both_read_back_from_the_branch(gh: FakeGitHub, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    build(dist, "gfx950")
    build(dist, FAT)
    publish("gfx950", dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())
    first = rows_of(gh.state.branch_files()[LANDING_PATH].decode())
    assert list(first) == ["gfx950"]
    commits = gh.state.commit_count()
    publish(FAT, dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())
    assert gh.state.commit_count() == commits + 1  # the fat folder and the page in one commit
    files = gh.state.branch_files()
    page = files[LANDING_PATH].decode()
    rows = rows_of(page)
    assert list(rows) == ["gfx950", "gfx950-gfx1201"]
    assert rows["gfx950-gfx1201"][0].startswith("gfx950, gfx1201")
    assert f'"rocm-torch[device-gfx950-gfx1201]"' in page.replace("&quot;", '"')
    assert "--extra-index-url https://pypi.org/simple" in page and "--default-index https://pypi.org/simple" in page
    assert "rocm-bake which-index" in page and "<script" not in page
    for folder in ("gfx950", "gfx950-gfx1201"):
        assert f"data/wheels/{folder}/index.json" in files
    # a second publish with nothing changed makes no commit
    publish(FAT, dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())
    assert gh.state.commit_count() == commits + 1


def test_the_page_never_lists_a_folder_that_is_not_there(gh: FakeGitHub, tmp_path: Path) -> None:
    """Rows come from the branch: a folder removed (by PagesIndex delete) takes its row with it, same commit."""
    from rocm_bake.publish import GitHubClient, commit_pages, release_tag

    dist = tmp_path / "dist"
    build(dist, "gfx950")
    build(dist, FAT)
    publish("gfx950", dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())
    publish(FAT, dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())
    with GitHubClient(gh.full_name, gh.state.token, gh.endpoints()) as client:
        commit_pages(client, "gfx950", release_tag("gfx950"), {})
    files = gh.state.branch_files()
    assert not any(p.startswith("data/wheels/gfx950/") for p in files)
    assert list(rows_of(files[LANDING_PATH].decode())) == ["gfx950-gfx1201"]


def test_index_page_builds_it_locally_from_dist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = tmp_path / "dist"
    build(dist, "gfx950")
    build(dist, FAT)
    assert main(["index", "page", str(dist), "--out", str(tmp_path / "site"), "--base-url", "http://127.0.0.1:8081/index"]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    rows = rows_of(page)
    assert list(rows) == ["gfx950", "gfx950-gfx1201"]
    assert rows["gfx950"][2] == str(len(list((dist / "index" / "gfx950" / "files").glob("*.whl"))))
    assert "--index-url http://127.0.0.1:8081/index/gfx950-gfx1201/" in page
    assert main(["index", "page", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2


def test_the_page_renders_in_a_real_browser_at_phone_width(gh: FakeGitHub, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium")
    dist = tmp_path / "dist"
    build(dist, "gfx950")
    build(dist, FAT)
    publish("gfx950", dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())
    publish(FAT, dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())
    page = tmp_path / "index.html"
    page.write_bytes(gh.state.branch_files()[LANDING_PATH])
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = rows_of(dom.stdout)
    assert list(rendered) == ["gfx950", "gfx950-gfx1201"]  # the table as the browser built it
    shot = tmp_path / "landing-phone.png"
    taken = subprocess.run([CHROMIUM, *flags, "--window-size=412,915", f"--screenshot={shot}", page.as_uri()],
                           capture_output=True, text=True, timeout=120)
    assert taken.returncode == 0 and shot.stat().st_size > 10_000, taken.stderr[-2000:]
    shutil.copy(shot, Path("/tmp/landing-phone.png")) if Path("/tmp").is_dir() else None

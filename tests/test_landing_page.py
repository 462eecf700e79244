"""The landing page: regenerated from what is on gh-pages in the publish commit itself, checked in a real browser.

Three indexes are published one after the other against the loopback GitHub
(gfx950, gfx1201, then the fat gfx950;gfx1201): after each, the page lists
exactly the folders on the branch, each row read back from its folder's
``index.json`` and checked against the local index it came from. Removing a
folder removes its row in the same commit; a folder that is not an index is
never listed. Headless Chromium (Debian's) loads the page from the fake
Pages host, the rendered table is checked against the published indexes, and
a phone-sized screenshot is saved under the test's temp dir.
"""

from __future__ import annotations

import html
import html.parser
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.cli import main
from rocm_bake.index import build_index
from rocm_bake.install_line import CHECK_HINT, install_lines
from rocm_bake.publish import landing
from rocm_bake.publish.landing import LANDING_PATH, LISTING_PATH
from rocm_bake.publish.publisher import publish
from tests import services
from tests.fake_github import FakeGitHub

from tests.index_fixtures import arch_wheel_set

FAT = "gfx950;gfx1201"
ORDER = ["gfx950", "gfx1201", "gfx950-gfx1201"]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def gh():
    with FakeGitHub(owner="octo", repo="rocm-bake", token="ghp_landing") as fake:
        yield fake


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    out = tmp_path / "dist"
    for arch in ("gfx950", "gfx1201", FAT):
        build(out, arch)
    return out


def build(dist: Path, arch: str, names: list[str] | None = None) -> None:
    parsed = ArchSet(arch)
    wheels = dist / "wheels" / parsed.dir_name
    arch_wheel_set(wheels, arch, names)
    build_index(parsed, wheels, dist)


def put(gh: FakeGitHub, arch: str, dist: Path) -> None:
    publish(ArchSet(arch), dist, gh.full_name, gh.state.token, endpoints=gh.endpoints())


class Rows(html.parser.HTMLParser):
    """The index rows of a page: {row id: [text of each cell]}, and each row's links."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self.links: dict[str, list[str]] = {}
        self._row: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and found.get("class") == "index":
            self._row = found.get("id") or ""
            self.rows[self._row], self.links[self._row] = [], []
        elif tag == "td" and self._row is not None:
            self.rows[self._row].append("")
        elif tag == "a" and self._row is not None:
            self.links[self._row].append(found.get("href") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self.rows[self._row]:
            self.rows[self._row][-1] += data


def parse(page: str) -> Rows:
    parser = Rows()
    parser.feed(page)
    return parser


def rows_of(page: str) -> dict[str, list[str]]:
    return parse(page).rows


def local_wheels(dist: Path, dir_name: str) -> list[Path]:
    return sorted((dist / "index" / dir_name / "files").glob("*.whl"))


def check_rows_match_what_is_published(page: str, files: dict[str, bytes], dist: Path, gh: FakeGitHub,
                                       only: set[str] | None = None) -> None:
    """Every row against its folder on the branch and the local index it was published from."""
    found = parse(page)
    folders = sorted({p.split("/")[2] for p in files if p.endswith("/index.html") and p.count("/") == 3
                      and ArchSet.from_dir_name(p.split("/")[2])})
    assert sorted(found.rows) == folders
    listing = {i["dir_name"]: i for i in json.loads(files[LISTING_PATH])["indexes"]}
    assert sorted(listing) == folders
    base = gh.endpoints().pages_base(gh.full_name) + "data/wheels"
    for name, cells in found.rows.items():
        if only is not None and name not in only:
            continue
        arches, rocm, count, size, when, release, install = cells
        target = ArchSet(name)
        summary = json.loads(files[f"data/wheels/{name}/index.json"])
        wheels = local_wheels(dist, name)
        assert arches.startswith(", ".join(target.arches))
        assert rocm == summary["rocm_version"] == "10.1.0"
        assert int(count) == summary["wheel_count"] == len(wheels)
        assert summary["total_bytes"] == sum(w.stat().st_size for w in wheels)
        assert size == landing._size(summary["total_bytes"])
        assert when == listing[name]["published"]
        tag = f"wheels-{name}-rocm10.1.0"
        assert release == tag and found.links[name] == [f"{gh.web_url}/octo/rocm-bake/releases/tag/{tag}"]
        version = summary["metapackage_version"]
        assert version and "+h" in version and any(w.name == f"rocm_torch-{version}-py3-none-any.whl" for w in wheels)
        pinned = install_lines(base, name, version)
        assert pinned.pip == (f"pip install --index-url {base}/{name}/ --extra-index-url https://pypi.org/simple "
                              f"'rocm-torch[{target.extra}]=={version}'")
        hows = ["hash-locked (preferred)"] if summary["lock"] else []
        lines = [pinned.locked] if summary["lock"] else []
        expected = "".join(f"{h}{line}" for h, line in zip([*hows, "pip", "uv"], [*lines, pinned.pip, pinned.uv]))
        assert install == expected + CHECK_HINT


def test_publishing_three_indexes_one_after_another_lists_each_read_back_from_the_branch(
        gh: FakeGitHub, dist: Path) -> None:
    for done, arch in enumerate(("gfx950", "gfx1201", FAT), start=1):
        commits = gh.state.commit_count()
        put(gh, arch, dist)
        assert gh.state.commit_count() == commits + 1  # the folder, its index.json and the page: one commit
        files = gh.state.branch_files()
        page = files[LANDING_PATH].decode()
        assert list(rows_of(page)) == ORDER[:done]  # single arches first, then the fat build
        check_rows_match_what_is_published(page, files, dist, gh)
    assert "rocm-bake which-index --index-base " + gh.endpoints().pages_base(gh.full_name) + "data/wheels" in page
    assert "<script" not in page and 'name="viewport"' in page
    # publishing again with nothing changed makes no commit, for any of them
    commits = gh.state.commit_count()
    for arch in ("gfx950", "gfx1201", FAT):
        put(gh, arch, dist)
    assert gh.state.commit_count() == commits


def test_last_published_is_when_the_folder_last_changed(gh: FakeGitHub, dist: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-fetch (same bytes, new mtimes) changes nothing; a changed wheel set re-dates only its own row."""
    clock = iter(["2026-01-01 10:00 UTC", "2026-01-02 10:00 UTC", "2026-01-03 10:00 UTC", "2026-01-04 10:00 UTC"])
    monkeypatch.setattr(landing, "now_utc", lambda: next(clock))

    def dates() -> dict[str, str]:
        files = gh.state.branch_files()
        return {name: cells[4] for name, cells in rows_of(files[LANDING_PATH].decode()).items()}

    put(gh, "gfx950", dist)
    put(gh, "gfx1201", dist)
    assert dates() == {"gfx950": "2026-01-01 10:00 UTC", "gfx1201": "2026-01-02 10:00 UTC"}
    commits = gh.state.commit_count()
    for wheel in (dist / "wheels" / "gfx950").iterdir():  # what a fresh CI runner's fetch looks like
        os.utime(wheel, (1_900_000_000, 1_900_000_000))
    build_index(ArchSet("gfx950"), dist / "wheels" / "gfx950", dist)
    put(gh, "gfx950", dist)
    assert gh.state.commit_count() == commits and dates()["gfx950"] == "2026-01-01 10:00 UTC"
    (dist / "wheels" / "gfx950" / local_wheels(dist, "gfx950")[0].name).unlink()  # a wheel set that changed
    build_index(ArchSet("gfx950"), dist / "wheels" / "gfx950", dist)
    put(gh, "gfx950", dist)
    assert dates() == {"gfx950": "2026-01-03 10:00 UTC", "gfx1201": "2026-01-02 10:00 UTC"}
    check_rows_match_what_is_published(gh.state.branch_files()[LANDING_PATH].decode(), gh.state.branch_files(),
                                       dist, gh)


def commit_by_hand(gh: FakeGitHub, files: dict[str, bytes | None]) -> None:
    """Someone else's commit on gh-pages (None deletes a path)."""
    from rocm_bake.publish.github import GitHubClient

    with GitHubClient(gh.full_name, gh.state.token, gh.endpoints()) as client:
        head = client.get_branch_head("gh-pages")
        tree = client.get_commit_tree(head)
        entries = [{"path": p, "mode": "100644", "type": "blob", "sha": client.create_blob(d) if d is not None else None}
                   for p, d in files.items()]
        client.set_branch("gh-pages", client.create_commit("by hand", client.create_tree(tree, entries), [head]),
                          exists=True)


def test_the_page_never_lists_a_folder_that_is_not_there(gh: FakeGitHub, dist: Path) -> None:
    """Rows come from the folders on the branch, in the commit that changes them."""
    from rocm_bake.publish.apply import commit_pages
    from rocm_bake.publish.github import GitHubClient
    from rocm_bake.publish.naming import release_tag

    put(gh, "gfx950", dist)
    put(gh, FAT, dist)
    # removing a folder (what PagesIndex's delete does) takes its row with it, in the same commit
    commits = gh.state.commit_count()
    with GitHubClient(gh.full_name, gh.state.token, gh.endpoints()) as client:
        commit_pages(client, ArchSet("gfx950"), release_tag(ArchSet("gfx950")), {})
    files = gh.state.branch_files()
    assert gh.state.commit_count() == commits + 1
    assert not any(p.startswith("data/wheels/gfx950/") for p in files)
    assert list(rows_of(files[LANDING_PATH].decode())) == ["gfx950-gfx1201"]
    assert [i["dir_name"] for i in json.loads(files[LISTING_PATH])["indexes"]] == ["gfx950-gfx1201"]
    # by hand: a summary with no index beside it, a summary claiming another folder, an index of ours with
    # no summary, and a folder that is no index name at all
    stray = json.loads(files["data/wheels/gfx950-gfx1201/index.json"])
    commit_by_hand(gh, {
        "data/wheels/gfx1151/index.json": json.dumps({**stray, "dir_name": "gfx1151"}).encode(),
        "data/wheels/gfx1201/index.html": b"<html></html>",
        "data/wheels/gfx1201/index.json": json.dumps({**stray, "dir_name": "gfx950"}).encode(),
        "data/wheels/gfx1250/index.html": b"<html></html>",
        "data/wheels/assets/index.html": b"<html></html>",
    })
    put(gh, "gfx950", dist)
    files = gh.state.branch_files()
    rows = rows_of(files[LANDING_PATH].decode())
    assert list(rows) == ["gfx950", "gfx1201", "gfx1250", "gfx950-gfx1201"]
    assert rows["gfx1201"][2] == "not recorded" and rows["gfx1201"][0].startswith("gfx1201")  # not gfx950's facts
    assert rows["gfx1250"][1:5] == ["not recorded"] * 4
    check_rows_match_what_is_published(files[LANDING_PATH].decode(), files, dist, gh,
                                       only={"gfx950", "gfx950-gfx1201"})


def test_index_page_builds_it_locally_from_dist(dist: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert main(["index", "page", str(dist), "--out", str(site), "--base-url", "http://127.0.0.1:8081/index"]) == 0
    page = (site / "index.html").read_text()
    rows = rows_of(page)
    assert list(rows) == ORDER
    for name, cells in rows.items():
        assert cells[2] == str(len(local_wheels(dist, name)))
        assert cells[3] == landing._size(sum(w.stat().st_size for w in local_wheels(dist, name)))
    assert "<th>Built</th>" in page
    assert '--index-url http://127.0.0.1:8081/index/gfx950-gfx1201/ ' in page
    assert "rocm-bake which-index --index-base http://127.0.0.1:8081/index" in page
    assert main(["index", "page", str(tmp_path / "empty"), "--out", str(tmp_path / "x")]) == 2


def test_the_no_install_one_liner_prints_each_gpus_name(tmp_path: Path) -> None:
    """The page's awk line, run on a fake KFD tree (CPU node, gfx950, gfx90a, gfx1201), names what which-index sees."""
    from rocm_bake.gpu.detect import detect_gpus

    nodes = tmp_path / "sys/class/kfd/kfd/topology/nodes"
    for node, version in enumerate([0, 90500, 90010, 120001]):
        (nodes / str(node)).mkdir(parents=True)
        (nodes / str(node) / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\ndomain 0\n")
    page = landing.render_landing([], "https://octo.github.io/rocm-bake/data/wheels").decode()
    assert html.unescape(landing.KFD_ONE_LINER) in html.unescape(page)
    line = landing.KFD_ONE_LINER.replace("/sys/class/kfd", str(tmp_path / "sys/class/kfd"))
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [g.gfx for g in detect_gpus(tmp_path, lambda: None).gpus] == [
        "gfx950", "gfx90a", "gfx1201"]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.services
def test_the_page_renders_in_a_real_browser_at_phone_width(gh: FakeGitHub, dist: Path, tmp_path: Path) -> None:
    services.require("chromium")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make apt` installs Debian's chromium")
    for arch in ("gfx950", "gfx1201", FAT):
        put(gh, arch, dist)
    url = gh.endpoints().pages_base(gh.full_name) + "data/wheels/"  # served by the fake Pages host
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = parse(dom.stdout)
    assert list(rendered.rows) == ORDER  # the table as the browser built it
    check_rows_match_what_is_published(dom.stdout, gh.state.branch_files(), dist, gh)
    shot = tmp_path / "landing-phone.png"
    taken = subprocess.run([CHROMIUM, *flags, "--window-size=412,915", f"--screenshot={shot}", url],
                           capture_output=True, text=True, timeout=120)
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert png_size(shot) == (412, 915) and shot.stat().st_size > 10_000


def test_a_summary_naming_no_known_arch_read_back_from_the_branch_is_not_ours() -> None:
    """Anyone with push access writes gh-pages: a summary's arches are validated as it is read, once."""
    good = landing.summarize(ArchSet("gfx950;gfx1201"), "10.1.0", [])
    assert landing.parse_summary(good.to_bytes()) == good and good.arches == ["gfx950", "gfx1201"]
    for arches in (["<img src=x onerror=alert(1)>"], ["gfx951"], "gfx950"):
        hostile = {**json.loads(good.to_bytes()), "arches": arches}
        assert landing.parse_summary(json.dumps(hostile).encode()) is None, arches

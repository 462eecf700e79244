"""Every producer of an install line writes it through ``rocm_bake.install_line``: pinned, hint after.

A line that installs ``rocm-torch`` from an index must pin it exactly to the
index's metapackage version (a local ``+h…`` segment PyPI refuses), or be
the hash-locked line; an unpinned one can be taken over by a higher version
uploaded to PyPI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocm_bake.archset import ArchSet
from rocm_bake.cli import main
from rocm_bake.index.build import build_index
from rocm_bake.install_line import (
    BASE_PLACEHOLDER,
    CHECK_HINT,
    LOCK_FILE,
    install_lines,
    lines_for,
    locked_line,
)
from tests.index_fixtures import arch_wheel_set
from tests.kfd_fixtures import sysfs

ROOT = Path(__file__).resolve().parents[1]
PINNED = re.compile(r"'rocm-torch\[device-[a-z0-9-]+\]==[0-9][^'+]*\+h[0-9a-f]{12}'")


def install_commands(text: str) -> list[str]:
    """Every ``pip install`` / ``uv pip install`` command in ``text``, backslash continuations joined."""
    joined = re.sub(r" *\\\n\s*", " ", text)
    return [m.group(0).strip() for m in re.finditer(r"(?:uv )?pip install [^\n`<]*(?:<your index base>[^\n`<]*)*",
                                                    joined)]


def assert_pinned(text: str, where: str, hint: bool = True) -> list[str]:
    """Each install command that names the metapackage or a lock is pinned or hash-locked; the hint follows."""
    found = [c for c in install_commands(text) if "rocm-torch" in c or LOCK_FILE in c]
    assert found, f"{where}: no install line at all:\n{text}"
    for command in found:
        locked = "--require-hashes" in command and command.endswith(f"/{LOCK_FILE}")
        assert locked or PINNED.search(command), f"{where}: unpinned install line: {command}"
    if not hint:
        return found
    last = text.rindex(found[-1].split()[-1])
    assert CHECK_HINT.lower() in text[last:].lower(), f"{where}: no check hint after the lines"
    return found


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("lines") / "dist"
    arch_wheel_set(dist / "wheels" / "gfx950", "gfx950", ["torch", "triton"])
    build_index(ArchSet("gfx950"), dist / "wheels" / "gfx950", dist)
    return dist


def version_of(dist: Path) -> str:
    (wheel,) = (dist / "index" / "gfx950" / "files").glob("rocm_torch-*.whl")
    return wheel.name.split("-")[1]


def test_the_writer_pins_and_refuses_an_unpinned_line() -> None:
    lines = install_lines("https://x.example/w", "gfx950", "2.15.0a0+h0123456789ab")
    assert lines.pip.endswith("'rocm-torch[device-gfx950]==2.15.0a0+h0123456789ab'")
    assert lines.uv.startswith("uv pip install --index https://x.example/w/gfx950/ --default-index ")
    assert lines.locked == locked_line("https://x.example/w", "gfx950")
    with pytest.raises(ValueError, match="version is required"):
        install_lines("https://x.example/w", "gfx950", "")
    assert lines_for("https://x.example/w", "gfx950", None) == [lines.locked]
    assert lines_for("https://x.example/w", "gfx950", None, locked=False) == []


def test_index_build_and_index_lines_print_the_pinned_lines(dist: Path, capsys: pytest.CaptureFixture[str]) -> None:
    version = version_of(dist)
    assert main(["index", "build", "--arch", "gfx950", "--wheels", str(dist / "wheels" / "gfx950"),
                 "--out", str(dist), "--quiet"]) == 0
    built = capsys.readouterr().out
    assert main(["index", "lines", str(dist), "--arch", "gfx950", "--base", "http://127.0.0.1:8081/index"]) == 0
    served = capsys.readouterr().out
    for text, where in ((built, "index build"), (served, "index lines")):
        found = assert_pinned(text, where)
        assert any(f"=={version}'" in c for c in found), f"{where}: not this index's version {version}"
    assert install_lines("http://127.0.0.1:8081/index", "gfx950", version).uv in served
    assert main(["index", "lines", str(dist), "--arch", "gfx1201"]) == 2


def test_which_index_pins_a_local_index_and_locks_a_remote_one(dist: Path) -> None:
    from rocm_bake.gpu.which import render, run_which_index

    host = sysfs(dist.parent / "host", [0, 90500])
    local = run_which_index(host, (dist / "index").as_uri(), lambda: None)
    found = assert_pinned(render(local), "which-index (local)")
    assert any(f"=={version_of(dist)}'" in c for c in found)
    remote = render(run_which_index(host, "https://team.example/wheels", lambda: None))
    assert assert_pinned(remote, "which-index (remote)") == [locked_line("https://team.example/wheels", "gfx950")]
    placeholder = render(run_which_index(host, None, lambda: None))
    assert BASE_PLACEHOLDER in assert_pinned(placeholder, "which-index (no base)")[0] or "github.io" in placeholder


def test_landing_page_and_publish_summary_pin(dist: Path, tmp_path: Path) -> None:
    import html

    from rocm_bake.commands.publish import published_lines

    assert main(["index", "page", str(dist), "--out", str(tmp_path / "site")]) == 0
    page = html.unescape((tmp_path / "site" / "index.html").read_text())
    assert_pinned(re.sub(r"</?(code|span|small)[^>]*>", "\n", page), "landing page")
    assert_pinned("\n".join(published_lines(dist, ArchSet("gfx950"), "https://o.github.io/r/")), "publish")


def test_the_makefile_spells_no_install_line() -> None:
    for path in [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]:
        text = path.read_text()
        assert not [c for c in install_commands(text) if "rocm-torch" in c or LOCK_FILE in c], path
    assert "rocm-bake index lines $(DIST) --arch $(DEMO_ARCH)" in (ROOT / "mk" / "pulumi.mk").read_text()


def test_the_readme_lines_are_what_the_writer_writes() -> None:
    found = assert_pinned((ROOT / "README.md").read_text(), "README")
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text()
        if any("rocm-torch" in c or LOCK_FILE in c for c in install_commands(text)):
            found += assert_pinned(text, str(page.relative_to(ROOT)), hint=False)
    assert any("requirements.txt" in c and "file://$PWD/dist/index/gfx950/" in c for c in found)  # the demo's
    for command in found:
        url = re.search(r"--index(?:-url)? (\S+)/([a-z0-9-]+)/ ", command)
        assert url, command
        version = re.search(r"==([^']+)'", command)
        written = lines_for(url.group(1), url.group(2), version.group(1) if version else None)
        assert command in written, f"README line is not what rocm_bake.install_line writes:\n{command}\n{written}"


def test_the_readme_says_why_and_what_to_do_about_the_name() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "which PyPI refuses to host" in text and "`--require-hashes` also refuses a same-version copy" in text
    assert "register it there as a placeholder" in text and "rename the metapackage to a name it owns" in text

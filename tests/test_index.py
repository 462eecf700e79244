"""``build_index`` on real wheels: layout, PEP 503/658/714 pages, metapackage, atomicity, cache."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from rocm_bake.archset import ArchSet
from rocm_bake import cli, progress
from rocm_bake.index import rules as rules_mod
from rocm_bake.index import stamp
from rocm_bake.errors import RocmBakeError
from rocm_bake.index.build import build_index
from rocm_bake.index.models import cache_path
from rocm_bake.index.check import clean_env, serve, uv_binary

from tests.index_fixtures import ARCH_SET, GIT, NATIVE_TAG, ROCM, arch_wheel_set, device_files, make_wheel

ANCHOR = re.compile(r'<a href="([^"]+)"([^>]*)>([^<]+)</a>')


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def gfx950(tmp_path: Path) -> Path:
    wheels = tmp_path / "dist" / "wheels" / "gfx950"
    arch_wheel_set(wheels, "gfx950")
    return wheels


def test_layout_links_and_metadata(gfx950: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    before = tree(gfx950)
    result = build_index(ArchSet("gfx950"), gfx950, dist)
    root = dist / "index" / "gfx950"
    assert result.index_dir == str(root) and result.arch == "gfx950"
    assert result.wheel_count == len(ARCH_SET) + 1
    assert tree(gfx950) == before  # the input is never written

    root_page = (root / "index.html").read_text()
    projects = [href for href, _, _ in ANCHOR.findall(root_page)]
    assert projects == ["amd-aiter/", "nixl/", "nixl-rocm/", "rocm-torch/", "torch/", "torchvision/",
                        "triton/", "triton-kernels/", "vllm/"]  # normalized names, sorted
    seen = set()
    for project in projects:
        for href, attrs, text in ANCHOR.findall((root / project / "index.html").read_text()):
            url, _, fragment = href.partition("#")
            assert url.startswith("../files/")
            target = (root / project / url.replace("%2B", "+")).resolve()
            assert target.name == text and target.is_file()
            assert fragment == f"sha256={sha(target)}"
            meta = target.with_name(target.name + ".metadata")
            assert f'data-dist-info-metadata="sha256={sha(meta)}"' in attrs
            assert f'data-core-metadata="sha256={sha(meta)}"' in attrs
            seen.add(text)
            if text.startswith("rocm_torch"):
                continue
            assert 'data-requires-python="&gt;=3.10"' in attrs
            with zipfile.ZipFile(target) as zf:
                inner = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
                assert zf.read(inner[0]) == meta.read_bytes()  # PEP 658: the METADATA verbatim
            source = gfx950 / text
            assert os.stat(source).st_ino != os.stat(target).st_ino  # copied, never linked (bytes fixed once hashed)
            assert source.read_bytes() == target.read_bytes()
    assert seen == {f.filename for f in result.files}
    assert {f.filename: f.sha256 for f in result.files} == {
        f.filename: sha(root / "files" / f.filename) for f in result.files
    }


def test_metapackage_pins_only_this_arch_and_is_reproducible(gfx950: Path, tmp_path: Path) -> None:
    one = build_index(ArchSet("gfx950"), gfx950, tmp_path / "one")
    two = build_index(ArchSet("gfx950"), gfx950, tmp_path / "two")
    assert one.metapackage == two.metapackage and one.index_sha256 == two.index_sha256
    a = tmp_path / "one" / "index" / "gfx950" / "files" / one.metapackage
    b = tmp_path / "two" / "index" / "gfx950" / "files" / two.metapackage
    assert a.read_bytes() == b.read_bytes()
    name, version, _, tags = parse_wheel_filename(one.metapackage)
    assert name == "rocm-torch" and {str(t) for t in tags} == {"py3-none-any"}
    assert str(version).startswith("2.15.0a0+h")  # torch's public version + content hash
    with zipfile.ZipFile(a) as zf:
        names = zf.namelist()
        assert names == sorted(names)
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        metadata = zf.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert re.findall(r"^Provides-Extra: (.*)$", metadata, re.M) == ["device-gfx950"]
    pins = re.findall(r'^Requires-Dist: (\S+)==(\S+); extra == "device-gfx950"$', metadata, re.M)
    expected = sorted((n.replace("_", "-"), v) for n, v, _, _ in ARCH_SET)
    assert sorted(pins) == expected
    assert metadata.count("Requires-Dist") == len(ARCH_SET)


def test_metapackage_version_follows_its_pins(tmp_path: Path) -> None:
    a = tmp_path / "a"
    arch_wheel_set(a, "gfx950", names=["torch", "triton"])
    first = build_index(ArchSet("gfx950"), a, tmp_path / "d1").metapackage
    for old in a.glob("triton-*"):
        old.unlink()
    make_wheel(a, "triton", f"3.6.1+{GIT}.{ROCM}", extra_files=device_files("triton", "gfx950"), tag=NATIVE_TAG)
    second = build_index(ArchSet("gfx950"), a, tmp_path / "d2").metapackage
    assert first != second and second.startswith("rocm_torch-2.15.0a0+h")


def test_two_arches_share_dist_without_overwriting(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    for arch in ("gfx950", "gfx1201"):
        arch_wheel_set(dist / "wheels" / arch, arch)
    r950 = build_index(ArchSet("gfx950"), dist / "wheels" / "gfx950", dist)
    snapshot = tree(dist / "index" / "gfx950")
    r1201 = build_index(ArchSet("gfx1201"), dist / "wheels" / "gfx1201", dist)
    assert tree(dist / "index" / "gfx950") == snapshot
    torch = f"torch-2.15.0a0+{GIT}.{ROCM}-{NATIVE_TAG}.whl"
    f950 = {f.filename: f.sha256 for f in r950.files}
    f1201 = {f.filename: f.sha256 for f in r1201.files}
    assert torch in f950 and torch in f1201 and f950[torch] != f1201[torch]  # same name, other bytes
    assert f950["nixl-0.7.0-py3-none-any.whl"] == f1201["nixl-0.7.0-py3-none-any.whl"]
    assert r950.metapackage != r1201.metapackage
    meta1201 = (dist / "index" / "gfx1201" / "files" / f"{r1201.metapackage}.metadata").read_text()
    assert "device-gfx1201" in meta1201 and "device-gfx950" not in meta1201


def test_wheel_url_points_hrefs_offsite(gfx950: Path, tmp_path: Path) -> None:
    url = "https://github.com/sbates130272/rocm-bake/releases/download/wheels-gfx950"
    result = build_index(ArchSet("gfx950"), gfx950, tmp_path / "dist", wheel_url=url + "/")
    page = (tmp_path / "dist" / "index" / "gfx950" / "torch" / "index.html").read_text()
    (href, _, _), = ANCHOR.findall(page)
    torch = next(f for f in result.files if f.filename.startswith("torch-"))
    assert href == f"{url}/torch-2.15.0a0%2B{GIT}.{ROCM}-{NATIVE_TAG}.whl#sha256={torch.sha256}"
    # the metadata still sits beside the wheels in files/, to be uploaded with them
    assert (tmp_path / "dist" / "index" / "gfx950" / "files" / f"{torch.filename}.metadata").is_file()
    relative = build_index(ArchSet("gfx950"), gfx950, tmp_path / "dist")
    assert relative.index_sha256 != result.index_sha256
    for bad in ("ftp://host/x", "https://host/x?tag=1", "releases/download"):
        with pytest.raises(RocmBakeError, match="--wheel-url"):
            build_index(ArchSet("gfx950"), gfx950, tmp_path / "dist", wheel_url=bad)


def _refuse_and_keep(wheels: Path, dist: Path, match: str) -> BaseException:
    root = dist / "index" / "gfx950"
    before = tree(root) if root.exists() else None
    with pytest.raises(RocmBakeError, match=match) as err:
        build_index(ArchSet("gfx950"), wheels, dist)
    after = tree(root) if root.exists() else None
    assert after == before
    assert not list((dist / "index").glob(".tmp-*")) if (dist / "index").exists() else True
    return err.value


def test_bad_input_writes_nothing_and_keeps_the_previous_index(gfx950: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # before any index exists: nothing at all is created
    bad = tmp_path / "bad"
    arch_wheel_set(bad, "gfx950", names=["torch"])
    make_wheel(bad, "torchvision", f"0.30.0+{ROCM}.gfx950", tag=NATIVE_TAG)
    _refuse_and_keep(bad, dist, "rule no-arch-in-version")
    assert not (dist / "index" / "gfx950").exists()

    good = build_index(ArchSet("gfx950"), gfx950, dist)
    # another arch's device code, e.g. fetched through :latest
    arch_wheel_set(tmp_path / "other", "gfx1201", names=["torch"])
    os.replace(next((tmp_path / "other").glob("torch-*")), next(gfx950.glob("torch-*")))
    err = _refuse_and_keep(gfx950, dist, "device code is for gfx1201, not gfx950")
    assert "torch-2.15.0a0" in str(err)
    # two versions of one project
    second = tmp_path / "second"
    arch_wheel_set(second, "gfx950", names=["torch", "nixl"])
    make_wheel(second, "nixl", "0.8.0")
    _refuse_and_keep(second, dist, "rule one-version-per-project: nixl appears as 0.7.0, 0.8.0")
    # several violations are reported together
    multi = tmp_path / "multi"
    make_wheel(multi, "torch", "2.15.0", tag=NATIVE_TAG)
    make_wheel(multi, "vllm", "0.12.0+rocm10.1.0", tag=NATIVE_TAG)
    err = _refuse_and_keep(multi, dist, "2 wheels refused for the gfx950 index")
    assert "rule git-rocm-local" in str(err) and "rule vllm-local" in str(err)
    assert tree(dist / "index" / "gfx950")["index.html"].decode().count("<a ") == good.wheel_count


def test_metadata_must_match_the_filename(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    make_wheel(wheels, "nixl", "0.6.0", filename="nixl-0.7.0-py3-none-any.whl")
    with pytest.raises(RocmBakeError, match="rule metadata-matches-filename: METADATA says nixl 0.6.0"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    (wheels / "junk-1.0-py3-none-any.whl").unlink(missing_ok=True)
    (wheels / "nixl-0.7.0-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(RocmBakeError, match="rule wheel-archive"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")


def test_missing_empty_and_foreign(tmp_path: Path) -> None:
    with pytest.raises(RocmBakeError, match="does not exist"):
        build_index(ArchSet("gfx950"), tmp_path / "nope", tmp_path / "dist")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".rocm-bake-fetch.json").write_text("{}")
    with pytest.raises(RocmBakeError, match="holds no .whl files"):
        build_index(ArchSet("gfx950"), tmp_path / "empty", tmp_path / "dist")
    with pytest.raises(RocmBakeError, match="unknown architecture"):
        build_index(ArchSet("gfx951"), tmp_path / "empty", tmp_path / "dist")
    wheels = tmp_path / "w"
    make_wheel(wheels, "nixl", "0.7.0")
    foreign = tmp_path / "dist" / "index" / "gfx950"
    foreign.mkdir(parents=True)
    (foreign / "mine.txt").write_text("keep")
    with pytest.raises(RocmBakeError, match="not an index rocm-bake wrote"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    assert (foreign / "mine.txt").read_text() == "keep"


def test_warm_rebuild_rehashes_nothing_and_changes_are_seen(
    gfx950: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "dist"
    nixl = make_wheel(gfx950, "nixl", "0.7.0", extra_files={"nixl/extra.py": b"X = 2\n"})
    cold = build_index(ArchSet("gfx950"), gfx950, dist)
    total = sum(p.stat().st_size for p in gfx950.glob("*.whl"))
    assert cold.hashed_bytes == total
    assert cache_path(dist, ArchSet("gfx950")).is_file()

    def no_scan(path: Path) -> None:
        raise AssertionError(f"{path.name} re-scanned on a warm rebuild")

    with monkeypatch.context() as m:
        m.setattr(rules_mod.offload, "wheel_targets", no_scan)
        warm = build_index(ArchSet("gfx950"), gfx950, dist)
    assert warm.hashed_bytes == 0 and warm.index_sha256 == cold.index_sha256
    assert warm.unchanged and not cold.unchanged  # the tree already matched: nothing rewritten
    # a damaged tree is rewritten even though no input changed
    page = dist / "index" / "gfx950" / "torch" / "index.html"
    good_page = page.read_bytes()
    page.write_bytes(b"<html>stale</html>")
    (dist / "index" / "gfx950" / "files" / "stray.whl").write_bytes(b"x")
    repaired = build_index(ArchSet("gfx950"), gfx950, dist)
    assert not repaired.unchanged and repaired.hashed_bytes == 0 and page.read_bytes() == good_page
    assert not (dist / "index" / "gfx950" / "files" / "stray.whl").exists()

    # same size, same mtime, new bytes in a new file (fetch renames into place): re-hashed
    st = nixl.stat()
    original = nixl.read_bytes()
    for n in range(3, 200):  # new content that happens to compress to the same size
        fresh = make_wheel(tmp_path / "y", "nixl", "0.7.0", extra_files={"nixl/extra.py": b"X = %d\n" % n})
        replacement = fresh.read_bytes()
        if len(replacement) == len(original):
            break
    assert len(replacement) == len(original) and replacement != original
    os.utime(fresh, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(fresh, nixl)
    assert (nixl.stat().st_size, nixl.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    changed = build_index(ArchSet("gfx950"), gfx950, dist)
    assert changed.hashed_bytes == len(replacement)
    assert {f.filename: f.sha256 for f in changed.files}[nixl.name] == hashlib.sha256(replacement).hexdigest()
    assert changed.index_sha256 != cold.index_sha256

    # touched only: re-hashed, same digest
    os.utime(nixl, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    touched = build_index(ArchSet("gfx950"), gfx950, dist)
    assert touched.hashed_bytes == len(replacement) and touched.index_sha256 == changed.index_sha256

    # a corrupt cache is an empty cache, not an error (the stamp dropped, so the build runs for real)
    cache_path(dist, ArchSet("gfx950")).write_text("{not json")
    stamp.stamp_path(dist, "gfx950").unlink()
    assert build_index(ArchSet("gfx950"), gfx950, dist).hashed_bytes == total


def test_served_index_resolves_from_metadata_alone(gfx950: Path, tmp_path: Path) -> None:
    """PEP 658 for real: both resolvers read ``.metadata``; uv's resolve-only run fetches no wheel.

    pip reads the ``.metadata`` files too, but pip < 25.3 still downloads every
    wheel after resolving, even with ``--dry-run`` (pypa/pip#12603, fixed
    by pypa/pip#13482), so the no-bodies assertion is made with uv.
    """
    dist = tmp_path / "dist"
    result = build_index(ArchSet("gfx950"), gfx950, dist)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    report = tmp_path / "report.json"
    python = str(venv / "bin" / "python")
    with serve(dist) as served:
        index_url = f"{served.url}/index/gfx950/"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "--python", python, "install", "--isolated", "--dry-run",
             "--report", str(report), "--no-cache-dir", "--index-url", index_url, "rocm-torch[device-gfx950]"],
            capture_output=True, text=True, env=clean_env(), cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        pip_requests = served.requests()
        served.reset()
        proc = subprocess.run(
            [uv_binary(), "pip", "install", "--dry-run", "--no-config", "--no-cache", "--python", python,
             "--index-url", index_url, "rocm-torch[device-gfx950]"],
            capture_output=True, text=True, env=clean_env(), cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        uv_requests = served.requests()
    resolved = {i["metadata"]["name"] for i in json.loads(report.read_text())["install"]}
    assert len(resolved) == result.wheel_count
    expected_meta = {f"/index/gfx950/files/{f.filename}.metadata" for f in result.files}
    assert {r.path for r in pip_requests if r.path.endswith(".metadata")} == expected_meta
    assert {r.path for r in uv_requests if r.path.endswith(".metadata")} == expected_meta
    assert [r.path for r in uv_requests if r.path.endswith(".whl")] == []
    assert f"Would install {result.wheel_count} packages" in proc.stderr + proc.stdout


def test_cli_build(gfx950: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = tmp_path / "dist"
    assert cli.main(["index", "build", "--arch", "gfx950", "--wheels", str(gfx950), "--out", str(dist), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["wheel_count"] == len(ARCH_SET) + 1 and out["index_dir"] == str(dist / "index" / "gfx950")
    assert cli.main(["index", "build", "--arch", "gfx950", "--wheels", str(gfx950), "--out", str(dist)]) == 0
    assert out["index_sha256"] in capsys.readouterr().out
    code = cli.main(["index", "build", "--arch", "gfx1201", "--wheels", str(gfx950), "--out", str(dist)])
    assert code == 2
    assert "not gfx1201" in capsys.readouterr().err
    assert not (dist / "index" / "gfx1201").exists()


def test_progress_per_wheel_hashed_and_silenced_by_json_and_quiet(
    gfx950: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hashing shows one line per wheel with its bytes (stderr is not a terminal here); --json/--quiet silence it."""
    dist = tmp_path / "dist"
    argv = ["index", "build", "--arch", "gfx950", "--wheels", str(gfx950), "--out", str(dist)]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    for wheel in gfx950.glob("*.whl"):
        shown = progress.human_bytes(wheel.stat().st_size)
        assert re.search(rf"^hash {re.escape(wheel.name)}: {shown} in [\d.]+ s", err, re.M), err
    for flag in ("--quiet", "--json"):
        stamp.stamp_path(dist, "gfx950").unlink()
        cache_path(dist, ArchSet("gfx950")).unlink()
        assert cli.main([*argv, flag]) == 0
        assert capsys.readouterr().err == ""


def test_cli_warm_build_imports_nothing_heavy(gfx950: Path, tmp_path: Path) -> None:
    """A warm ``index build`` is answered from the stamp: the command imports no pydantic, packaging or zipfile
    (the install lines it prints come from the standard-library-only ``rocm_bake.install_line``).

    Measured from the parser onwards (what start-up imports is the CLI's concern, not this command's).
    """
    dist = tmp_path / "dist"
    argv = ["index", "build", "--arch", "gfx950", "--wheels", str(gfx950), "--out", str(dist)]
    assert cli.main(argv) == 0
    script = (
        "import sys; from rocm_bake import cli; args = cli.build_parser().parse_args(sys.argv[1:]); "
        "before = set(sys.modules); code = args.func(args); "
        "new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in "
        "('pydantic', 'packaging', 'zipfile', 'pulumi', 'httpx', 'rich', 'rocm_bake') and "
        "m not in ('rocm_bake.index.stamp', 'rocm_bake.install_line')); "  # install_line: standard library only
        "print(code, ','.join(new) or '-')"
    )
    proc = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    code, heavy = proc.stdout.strip().splitlines()[-1].split()
    assert code == "0" and "unchanged" in proc.stdout
    assert heavy == "-", f"a warm index build imported {heavy}"

"""Hostile wheels: zip bombs in METADATA, members that escape the install root, metadata a resolver rejects."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.metadata import Metadata

from rocm_bake.archset import ArchSet
from rocm_bake import cli
from rocm_bake.errors import RocmBakeError
from rocm_bake.index import parse_core_metadata
from rocm_bake.index.build import build_index
from rocm_bake.index.models import cache_path

from tests.index_fixtures import GIT, NATIVE_TAG, ROCM, arch_wheel_set, bomb_wheel, make_wheel, torch_like_metadata

ROOT = Path(__file__).resolve().parent.parent
TORCH_VERSION = f"2.15.0a0+{GIT}.{ROCM}"


def nothing_written(dist: Path) -> None:
    assert not os.path.lexists(dist / "index" / "gfx950")
    assert not (dist / "index" / ".trees").exists()
    assert not cache_path(dist, ArchSet("gfx950")).exists()


def cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("rocm-bake: error: ") and "Traceback" not in err
    return err


# --------------------------------------------------------------- zip bomb


class CountingRead:
    """Counts bytes the index reads out of any zip member (a wrapper on ZipExtFile.read)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_member: dict[str, int] = {}
        real = zipfile.ZipExtFile.read
        counter = self

        def read(handle: zipfile.ZipExtFile, n: int = -1) -> bytes:
            data = real(handle, n)
            counter.by_member[handle.name] = counter.by_member.get(handle.name, 0) + len(data)
            return data

        monkeypatch.setattr(zipfile.ZipExtFile, "read", read)


def test_a_metadata_bomb_is_refused_on_its_declared_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    wheels = tmp_path / "w"
    bomb = bomb_wheel(wheels, "nixl", "0.7.0", mib=64)
    assert bomb.stat().st_size < 200_000
    counter = CountingRead(monkeypatch)
    dist = tmp_path / "dist"
    err = cli_error(["index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out", str(dist)], capsys)
    assert "nixl-0.7.0-py3-none-any.whl" in err and "rule member-size" in err
    assert "nixl-0.7.0.dist-info/METADATA inflates to 67,108,9" in err and "16 MiB cap" in err
    assert counter.by_member.get("nixl-0.7.0.dist-info/METADATA", 0) == 0  # refused before inflating a byte
    nothing_written(dist)


def test_a_metadata_that_lies_about_its_size_stops_at_the_cap(tmp_path: Path) -> None:
    """A central directory that declares 1 KB for 32 MiB: reading stops at the declared size, then fails."""
    wheels = tmp_path / "w"
    path = bomb_wheel(wheels, "nixl", "0.7.0", mib=32)
    data = bytearray(path.read_bytes())
    real = (32 << 20) + len(b"Metadata-Version: 2.1\nName: nixl\nVersion: 0.7.0\nSummary: ")
    needle = real.to_bytes(4, "little")
    assert data.count(needle) == 2  # local header and central directory
    data[:] = data.replace(needle, (1024).to_bytes(4, "little"))
    path.write_bytes(bytes(data))
    with pytest.raises(RocmBakeError, match="nixl-0.7.0-py3-none-any.whl .*rule wheel-archive"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    nothing_written(tmp_path / "dist")


def test_a_1_5_gb_metadata_bomb_fails_fast_in_bounded_memory(tmp_path: Path) -> None:
    """The case as reported: a 1.5 MB wheel, METADATA inflating to 1.5 GB, through the CLI in its own process."""
    wheels = tmp_path / "w"
    bomb = bomb_wheel(wheels, "nixl", "0.7.0", mib=1536)
    assert bomb.stat().st_size < 2_000_000
    assert zipfile.ZipFile(bomb).getinfo("nixl-0.7.0.dist-info/METADATA").file_size > 1_500_000_000
    dist = tmp_path / "dist"
    script = textwrap.dedent("""
        import resource, sys
        from rocm_bake import cli
        code = cli.main(sys.argv[1:])
        print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
    """)
    proc = subprocess.run([sys.executable, "-c", script, "index", "build", "--arch", "gfx950", "--wheels",
                           str(wheels), "--out", str(dist)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    *lines, last = proc.stderr.strip().splitlines()
    code, max_rss_kb = map(int, last.split())
    assert code == 2 and "Traceback" not in proc.stderr
    assert "16 MiB cap" in "\n".join(lines) and "nixl-0.7.0-py3-none-any.whl" in "\n".join(lines)
    assert max_rss_kb < 256 * 1024, f"peak RSS {max_rss_kb} KB"
    nothing_written(dist)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # (the parent never read it either)


# ------------------------------------------------------- escaping members


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("../../../../tmp/evil.pth", "a '..' component"),
        ("nixl/../../evil.pth", "a '..' component"),
        ("nixl-0.7.0.data/purelib/../../../evil.pth", "a '..' component"),
        ("/etc/evil.pth", "an absolute path"),
        ("C:/Windows/evil.pth", "a drive letter"),
        ("C:evil.pth", "a drive letter"),
        ("nixl\\..\\..\\evil.pth", "a backslash"),
    ],
)
def test_members_that_escape_the_install_root_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], member: str, reason: str
) -> None:
    wheels = tmp_path / "w"
    arch_wheel_set(wheels, "gfx950", names=["torch", "triton"])
    make_wheel(wheels, "nixl", "0.7.0", extra_files={member: b"import os; os.system('echo owned')\n"})
    dist = tmp_path / "dist"
    err = cli_error(["index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out", str(dist)], capsys)
    assert "nixl-0.7.0-py3-none-any.whl" in err and "rule safe-members" in err
    assert repr(member) in err and reason in err
    nothing_written(dist)


# ------------------------------------------------------------- metadata


@pytest.mark.parametrize("metadata_version", ["2.1", "2.2", "2.4"])
def test_torch_like_metadata_is_accepted_and_served_verbatim(tmp_path: Path, metadata_version: str) -> None:
    """torch's quirks (License-File and Dynamic under 2.1, long description, markers, extras) pass."""
    data = torch_like_metadata(TORCH_VERSION, metadata_version)
    if metadata_version == "2.1":
        with pytest.raises(ExceptionGroup):  # strict validation does flag it: the quirk is real
            Metadata.from_email(data, validate=True)
    wheels = tmp_path / "w"
    arch_wheel_set(wheels, "gfx950", names=["triton"])
    make_wheel(wheels, "torch", TORCH_VERSION, tag=NATIVE_TAG, metadata=data)
    result = build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    torch = next(f.filename for f in result.files if f.filename.startswith("torch-"))
    files = tmp_path / "dist" / "index" / "gfx950" / "files"
    assert (files / f"{torch}.metadata").read_bytes() == data
    page = (tmp_path / "dist" / "index" / "gfx950" / "torch" / "index.html").read_text()
    assert 'data-requires-python="&gt;=3.10"' in page
    meta = parse_core_metadata((files / f"{torch}.metadata").read_bytes(), torch)  # what publishing reads
    assert meta.name == "torch" and str(meta.version) == TORCH_VERSION and meta.raw == data
    assert len(meta.metadata.requires_dist) == 13 and meta.requires_python == ">=3.10"


@pytest.mark.parametrize(
    ("header", "value", "field"),
    [
        ("Name", "tørch", "Name: 'tørch' is invalid"),
        ("Name", "torch_", "Name: 'torch_' is invalid"),
        ("Version", "2.15-beta!", "Version: '2.15-beta!' is invalid"),
        ("Requires-Dist", "numpy>=1;;", "Requires-Dist: 'numpy>=1;;' is invalid"),
        ("Requires-Dist", 'numpy; extra = "x"', "Requires-Dist"),
        ("Requires-Python", ">=3.x", "Requires-Python: '>=3.x' is invalid"),
    ],
)
def test_metadata_a_resolver_rejects_fails_naming_wheel_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], header: str, value: str, field: str
) -> None:
    lines = {"Metadata-Version": "2.1", "Name": "nixl", "Version": "0.7.0"}
    body = "".join(f"{k}: {v}\n" for k, v in lines.items() if k != header) + f"{header}: {value}\n"
    if header in ("Name", "Version"):
        body = "".join(f"{k}: {value if k == header else v}\n" for k, v in lines.items())
    wheels = tmp_path / "w"
    make_wheel(wheels, "nixl", "0.7.0", metadata=body.encode())
    dist = tmp_path / "dist"
    err = cli_error(["index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out", str(dist)], capsys)
    assert "nixl-0.7.0-py3-none-any.whl (index gfx950): rule core-metadata: METADATA " in err
    assert field in err and "pip and uv would reject" in err
    nothing_written(dist)


def test_a_repeated_or_undecodable_name_is_named(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    make_wheel(wheels, "nixl", "0.7.0", metadata=b"Metadata-Version: 2.1\nName: nixl\nName: other\nVersion: 0.7.0\n")
    with pytest.raises(RocmBakeError, match="METADATA Name: 'name' is repeated or is not valid UTF-8"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")
    make_wheel(wheels, "nixl", "0.7.0", metadata=b"Metadata-Version: 2.1\nName: \xff\xfenixl\nVersion: 0.7.0\n")
    with pytest.raises(RocmBakeError, match="METADATA Name"):
        build_index(ArchSet("gfx950"), wheels, tmp_path / "dist")


def test_the_json_result_is_one_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = tmp_path / "w"
    make_wheel(wheels, "nixl", "0.7.0")
    assert cli.main(["index", "build", "--arch", "gfx950", "--wheels", str(wheels), "--out",
                     str(tmp_path / "d"), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["wheel_count"] == 2 and captured.err == ""

"""Code-object check on real gcc-built ELF .so files with objcopy-added bundles.

Most cases run twice: with the ``.so`` deflated (the member is read once,
front to back) and stored (read in place); both readings must agree.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import random
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.index_fixtures import NATIVE_TAG, amdgpu_code_object, make_wheel
from tests.offload_fixtures import bundle, ccob, device_wheel, hip_ids, section_offsets, shared_object
from rocm_bake.archset import Arch
from rocm_bake import offload, progress
from rocm_bake.cli import main
from rocm_bake.commands.wheel import describe
from rocm_bake.errors import RocmBakeError
from rocm_bake.offload import check_wheel_for_arch, parse_bundle_id, wheel_targets
from rocm_bake.offload import formats as offload_formats
from rocm_bake.offload.targets import processor_of_mach
from rocm_bake.offload import source as offload_source
from rocm_bake.offload import wheel as offload_wheel

#: The demo image's stand-in for a ROCm build (standard library only: it runs inside the image build).
DEMO_BUILD = Path(__file__).resolve().parents[1] / "dockerfiles" / "demo" / "context" / "demo_build.py"

STORAGE = pytest.mark.parametrize("stored", [False, True], ids=["deflated", "stored"])


def pad(blob: bytes, align: int = 4096) -> bytes:
    return blob + bytes((-len(blob)) % align)


def test_fixture_is_a_real_elf_with_hip_fatbin(tmp_path: Path) -> None:
    so = shared_object(tmp_path, "probe", bundle(hip_ids("gfx950")))
    out = subprocess.run(["readelf", "-S", "-W", str(so)], capture_output=True, text=True, check=True)
    assert ".hip_fatbin" in out.stdout


@STORAGE
def test_one_arch(tmp_path: Path, stored: bool) -> None:
    wheel = device_wheel(tmp_path, "torch", bundle(hip_ids("gfx950")), stored=stored)
    report = wheel_targets(wheel)
    assert report.targets == ["gfx950"]
    assert (report.pure, report.device_code, report.unknown) == (False, True, False)
    assert check_wheel_for_arch(wheel, Arch("gfx950")).targets == ["gfx950"]
    with pytest.raises(RocmBakeError) as err:
        check_wheel_for_arch(wheel, Arch("gfx1201"))
    message = str(err.value)
    assert wheel.name in message and "gfx950" in message and "gfx1201" in message


@STORAGE
def test_two_arches_fat_build_passes_both_and_refuses_a_third(tmp_path: Path, stored: bool) -> None:
    wheel = device_wheel(tmp_path, "torch", bundle(hip_ids("gfx950", "gfx1201")), stored=stored)
    assert wheel_targets(wheel).targets == ["gfx1201", "gfx950"]
    check_wheel_for_arch(wheel, Arch("gfx950"))
    check_wheel_for_arch(wheel, Arch("gfx1201"))
    with pytest.raises(RocmBakeError, match="gfx1201, gfx950, not gfx1151"):
        check_wheel_for_arch(wheel, Arch("gfx1151"))


def test_target_id_features_are_stripped_for_matching_and_kept_in_notes(tmp_path: Path) -> None:
    wheel = device_wheel(tmp_path, "amd_aiter", bundle(hip_ids("gfx90a:xnack+", "gfx942:sramecc+:xnack-")))
    report = wheel_targets(wheel)
    assert report.targets == ["gfx90a", "gfx942"]
    assert any("gfx90a with features xnack+" in n for n in report.notes)
    assert any("gfx942 with features sramecc+:xnack-" in n for n in report.notes)
    check_wheel_for_arch(wheel, Arch("gfx90a"))


def test_plain_so_and_pure_python_wheels_pass(tmp_path: Path) -> None:
    plain = device_wheel(tmp_path, "nixl", None)
    report = wheel_targets(plain)
    assert (report.targets, report.pure, report.device_code) == ([], False, False)
    check_wheel_for_arch(plain, Arch("gfx1201"))
    pure = make_wheel(tmp_path / "w", "triton_kernels", "1.0", extra_files={"triton_kernels/__init__.py": b"x = 1\n"})
    report = wheel_targets(pure)
    assert (report.targets, report.pure, report.device_code) == ([], True, False)
    check_wheel_for_arch(pure, Arch("gfx950"))


@STORAGE
def test_several_bundles_back_to_back_in_one_section(tmp_path: Path, stored: bool) -> None:
    first = bundle(hip_ids("gfx1201"))
    second = bundle(hip_ids("gfx1201"))
    wheel = device_wheel(tmp_path, "torch", pad(first) + second + ccob(bundle(hip_ids("gfx1201"))), stored=stored)
    report = wheel_targets(wheel)
    assert [s.kind for s in report.sources] == ["bundle", "bundle", "compressed-bundle"]
    assert report.targets == ["gfx1201"]
    # a foreign bundle hidden behind the first is still found
    mixed = device_wheel(tmp_path / "m", "torch", pad(first) + bundle(hip_ids("gfx950")), stored=stored)
    assert wheel_targets(mixed).targets == ["gfx1201", "gfx950"]


@STORAGE
@pytest.mark.parametrize("method", ["zlib", "zstd"])
@pytest.mark.parametrize("version", [1, 2, 3])
def test_compressed_bundles_of_every_version_and_method(tmp_path: Path, version: int, method: str, stored: bool) -> None:
    """v1 has no size field: its end is found by inflating its stream, so a bundle after it still counts."""
    fatbin = pad(ccob(bundle(hip_ids("gfx1151")), method, version)) + bundle(hip_ids("gfx950"))
    wheel = device_wheel(tmp_path, "torch", fatbin, stored=stored)
    report = wheel_targets(wheel)
    assert report.targets == ["gfx1151", "gfx950"] and not report.unknown
    assert report.sources[0].note.startswith(f"CCOB v{version} {method}")
    with pytest.raises(RocmBakeError, match="gfx1151, gfx950, not gfx1201"):
        check_wheel_for_arch(wheel, Arch("gfx1201"))


@STORAGE
def test_unknown_compression_method_is_unknown_not_guessed(tmp_path: Path, stored: bool) -> None:
    blob = bytearray(ccob(bundle(hip_ids("gfx950")), "zlib", 3))
    blob[6:8] = struct.pack("<H", 9)
    wheel = device_wheel(tmp_path, "torch", bytes(blob), stored=stored)
    report = wheel_targets(wheel)
    assert report.unknown and "method 9" in " ".join(report.unreadable)
    assert "compressed" in describe(report)
    with pytest.raises(RocmBakeError) as err:
        check_wheel_for_arch(wheel, Arch("gfx950"))
    assert "cannot verify" in str(err.value) and wheel.name in str(err.value)
    assert check_wheel_for_arch(wheel, Arch("gfx950"), allow_unknown=True).unknown


def test_unknown_ccob_version_is_unknown(tmp_path: Path) -> None:
    blob = bytearray(ccob(bundle(hip_ids("gfx950")), "zlib", 3))
    blob[4:6] = struct.pack("<H", 7)
    report = wheel_targets(device_wheel(tmp_path, "torch", bytes(blob)))
    assert report.unknown and "CCOB magic with version 7" in " ".join(report.unreadable)
    assert [s.kind for s in report.sources] == ["unreadable"] and "compressed" not in describe(report)


def test_known_targets_plus_unknown_still_needs_opt_in(tmp_path: Path) -> None:
    unknown = bytearray(ccob(bundle(hip_ids("gfx1201")), "zstd", 3))
    unknown[6:8] = struct.pack("<H", 5)
    wheel = device_wheel(tmp_path, "torch", pad(bundle(hip_ids("gfx950"))) + bytes(unknown))
    with pytest.raises(RocmBakeError, match="cannot verify"):
        check_wheel_for_arch(wheel, Arch("gfx950"))
    assert check_wheel_for_arch(wheel, Arch("gfx950"), allow_unknown=True).targets == ["gfx950"]


@STORAGE
@pytest.mark.parametrize(
    "mangle, problem",
    [
        (lambda b: b[:-100], "truncated"),
        (lambda b: b[:40], "truncated"),
        (lambda b: b[:24] + struct.pack("<Q", 10**9) + b[32:], "claims 1000000000 entries"),
        (lambda b: b[:48] + struct.pack("<Q", 0) + b[56:], "id length 0"),
    ],
    ids=["payload-cut", "table-cut", "entry-count", "id-length"],
)
def test_corrupt_bundle_is_a_clear_error(tmp_path: Path, mangle, problem: str, stored: bool) -> None:
    wheel = device_wheel(tmp_path, "torch", mangle(bundle(hip_ids("gfx950"))), stored=stored)
    with pytest.raises(RocmBakeError) as err:
        wheel_targets(wheel)
    message = str(err.value)
    assert problem in message and wheel.name in message and "torch/_C.so" in message
    assert ".hip_fatbin" in message


@STORAGE
def test_truncated_compressed_bundle_is_a_clear_error(tmp_path: Path, stored: bool) -> None:
    blob = ccob(bundle(hip_ids("gfx950"), payload_extra=os.urandom(20000)), "zlib", 3)
    wheel = device_wheel(tmp_path, "torch", blob[: len(blob) // 2], stored=stored)
    with pytest.raises(RocmBakeError, match="truncated"):
        wheel_targets(wheel)
    # a header that fits but zlib data that is not: named as corrupt
    garbage = b"CCOB" + struct.pack("<HHQQQ", 3, 0, 32 + 1024, 4096, 0) + bytes(range(256)) * 4
    bad = device_wheel(tmp_path / "g", "torch", garbage, stored=stored)
    with pytest.raises(RocmBakeError, match="CCOB v3 zlib: compressed data is corrupt"):
        wheel_targets(bad)


def test_standalone_amdgpu_code_objects_count(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path, "amd_aiter", "0.1",
        extra_files={"aiter/hsa/gfx942/k.co": amdgpu_code_object("gfx942"), "aiter/__init__.py": b""}, tag=NATIVE_TAG,
    )
    assert wheel_targets(wheel).targets == ["gfx942"]
    with pytest.raises(RocmBakeError, match="gfx942, not gfx950"):
        check_wheel_for_arch(wheel, Arch("gfx950"))


def test_demo_build_numbers_each_arch_as_the_product_reads_it() -> None:
    """The demo image's build cannot import rocm_bake, so its EF_AMDGPU_MACH table is a copy: it must
    agree with the product's, or the demo's code objects would be read as another arch (or none)."""
    spec = importlib.util.spec_from_file_location("demo_build", DEMO_BUILD)
    assert spec is not None and spec.loader is not None
    demo_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo_build)
    read_as = {arch: processor_of_mach(mach) for arch, mach in demo_build.MACH.items()}
    assert read_as == {arch: arch for arch in demo_build.MACH}, \
        f"{DEMO_BUILD} numbers arches unlike rocm_bake/offload/targets.py: {read_as}"
    for arch in demo_build.MACH:
        e_flags = struct.unpack_from("<I", demo_build.code_object(arch), 48)[0]
        assert processor_of_mach(e_flags) == arch, f"demo code object for {arch}: e_flags {e_flags:#x}"


def test_generic_target_covers_its_members() -> None:
    assert offload.covers("gfx9-4-generic", "gfx950")
    assert offload.covers("gfx11-generic", "gfx1151")
    assert not offload.covers("gfx11-generic", "gfx1201")
    assert not offload.covers("gfx1200", "gfx1201")


def test_non_wheels(tmp_path: Path) -> None:
    not_zip = tmp_path / "broken-1.0-py3-none-any.whl"
    not_zip.write_bytes(b"not a zip")
    with pytest.raises(RocmBakeError, match="not a zip"):
        wheel_targets(not_zip)
    with pytest.raises(RocmBakeError, match="not found"):
        wheel_targets(tmp_path / "missing.whl")


def test_cli_wheel_arches_json_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fat = device_wheel(tmp_path / "a", "torch", bundle(hip_ids("gfx950", "gfx1201")))
    pure = make_wheel(tmp_path / "b", "nixl", "1.0", extra_files={"nixl/__init__.py": b""})
    assert main(["wheel", "arches", "--json", str(fat), str(pure)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["wheel"], d["targets"], d["pure"], d["unknown"]) for d in data] == [
        (fat.name, ["gfx1201", "gfx950"], False, False), (pure.name, [], True, False),
    ]
    assert main(["wheel", "arches", str(fat)]) == 0
    assert "gfx1201, gfx950" in capsys.readouterr().out
    assert main(["wheel", "check", "--arch", "gfx950", str(fat), str(pure)]) == 0
    only = device_wheel(tmp_path / "c", "torch", bundle(hip_ids("gfx1201")))
    assert main(["wheel", "check", "--arch", "gfx950", str(only), str(pure)]) == 2
    err = capsys.readouterr().err
    assert "1 wheel(s) refused for gfx950" in err and only.name in err


def test_elf_without_section_headers_is_unknown(tmp_path: Path) -> None:
    so = bytearray(shared_object(tmp_path, "stripped", None).read_bytes())
    so[0x28:0x30] = bytes(8)  # e_shoff = 0, as sstrip leaves it
    so[0x3C:0x40] = bytes(4)  # e_shnum = e_shstrndx = 0
    wheel = make_wheel(tmp_path / "w", "lib", "1.0", extra_files={"lib/_C.so": bytes(so)}, tag=NATIVE_TAG)
    report = wheel_targets(wheel)
    assert report.unknown and "without section headers" in " ".join(report.unreadable)
    assert "compressed" not in describe(report)
    with pytest.raises(RocmBakeError, match="cannot verify"):
        check_wheel_for_arch(wheel, Arch("gfx950"))


# ------------------------------------------------ one forward pass, bounded


class CountingReader:
    """Wraps a member's reader: counts every byte read and fails any seek or tell."""

    def __init__(self, inner) -> None:
        self.inner, self.reads, self.total = inner, 0, 0
        self.asked: list[int] = []

    def read(self, n: int = -1) -> bytes:
        assert n is not None and n >= 0, "an unbounded read would hold the whole member in memory"
        data = self.inner.read(n)
        self.asked.append(n)
        self.reads += 1
        self.total += len(data)
        return data

    def seek(self, *args) -> int:
        raise AssertionError(f"seek{args} on a compressed member: a backward seek restarts inflation")

    def tell(self) -> int:
        raise AssertionError("tell() on a compressed member")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.inner.close()


def _rich_fatbin() -> tuple[bytes, list[str]]:
    """Bundles of every kind, big payloads holding chance magics, unaligned and aligned."""
    rng = random.Random(7)
    noise = rng.randbytes(150_000)
    decoys = b"CCOB" + b"__CLANG_OFFLOAD_BUNDLE__" + bundle(hip_ids("gfx1100")) + b".hip_fatbin\0"
    parts = [
        pad(bundle(hip_ids("gfx950"), payload_extra=noise + decoys + noise)),
        pad(ccob(bundle(hip_ids("gfx1201"), payload_extra=noise + decoys), "zlib", 3)),
        ccob(bundle(hip_ids("gfx1151"), payload_extra=noise), "zstd", 2),   # unaligned next
        ccob(bundle(hip_ids("gfx942"), payload_extra=decoys + noise), "zlib", 1),
        pad(bundle(hip_ids("gfx90a:xnack+"))),
        ccob(bundle(hip_ids("gfx1250"), payload_extra=noise + decoys), "zstd", 1),
        pad(ccob(bundle(hip_ids("gfx9-4-generic")), "zstd", 3)),
    ]
    return b"".join(parts), ["gfx1151", "gfx1201", "gfx1250", "gfx942", "gfx950", "gfx9-4-generic", "gfx90a"]


def test_compressed_member_is_read_once_front_to_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counting wrapper proves it: no seek at all, and every byte read exactly once."""
    fatbin, targets = _rich_fatbin()
    wheel = device_wheel(tmp_path, "torch", fatbin)
    readers: list[CountingReader] = []

    def counting(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> CountingReader:
        readers.append(CountingReader(archive.open(info)))
        return readers[-1]

    monkeypatch.setattr(offload_wheel, "_open_member", counting)
    monkeypatch.setattr(zipfile.ZipExtFile, "seek", CountingReader.seek)
    monkeypatch.setattr(offload_source, "CHUNK", 8192)  # many chunk boundaries in a small file
    report = wheel_targets(wheel)
    assert sorted(report.targets) == sorted(targets) and not report.unknown
    so_size = zipfile.ZipFile(wheel).getinfo("torch/_C.so").file_size
    so_reader = next(r for r in readers if r.total > 4)
    assert so_reader.total == so_size, "each byte of the member is read once, no more, no less"
    assert so_reader.reads > so_size // 8192 // 2


def test_compressed_member_is_asked_for_whole_chunks_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """zipfile copies its unconsumed input on every read, so the scan asks for one size only, CHUNK."""
    fatbin, targets = _rich_fatbin()
    wheel = device_wheel(tmp_path, "torch", fatbin)
    readers: list[CountingReader] = []

    def counting(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> CountingReader:
        readers.append(CountingReader(archive.open(info)))
        return readers[-1]

    monkeypatch.setattr(offload_wheel, "_open_member", counting)
    monkeypatch.setattr(offload_source, "CHUNK", 8192)
    assert sorted(wheel_targets(wheel).targets) == sorted(targets)
    so_reader = next(r for r in readers if r.total > 4)
    # the 4-byte ELF probe, then whole chunks, then the 1-byte check for bytes past the declared size
    assert so_reader.asked[0] == 4 and so_reader.asked[-1] == 1, so_reader.asked
    assert set(so_reader.asked[1:-1]) == {8192}, sorted(set(so_reader.asked))


@pytest.mark.parametrize("chunk", [64, 97, 1000, 4096, 65536])
def test_chunk_boundaries_do_not_change_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    fatbin, _ = _rich_fatbin()
    deflated = device_wheel(tmp_path / "d", "torch", fatbin)
    stored = device_wheel(tmp_path / "s", "torch", fatbin, stored=True)
    expected = [(s.offset, s.kind, s.targets) for s in wheel_targets(stored).sources]
    monkeypatch.setattr(offload_source, "CHUNK", chunk)
    assert [(s.offset, s.kind, s.targets) for s in wheel_targets(deflated).sources] == expected


def test_stored_member_reads_only_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored member is read in place: a small fraction of its bytes for big bundles."""
    big = os.urandom(1 << 20)
    fatbin = b"".join(pad(bundle(hip_ids(t), payload_extra=big)) for t in ("gfx950", "gfx1201", "gfx942"))
    wheel = device_wheel(tmp_path, "torch", fatbin, stored=True)
    counted = []
    real_pread = os.pread

    def pread(fd: int, length: int, offset: int) -> bytes:
        data = real_pread(fd, length, offset)
        counted.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", pread)
    monkeypatch.setattr(zipfile.ZipExtFile, "read", lambda *a: pytest.fail("a stored member went through zipfile"))
    assert wheel_targets(wheel).targets == ["gfx1201", "gfx942", "gfx950"]
    assert 0 < sum(counted) < len(fatbin) // 20, f"read {sum(counted)} of {len(fatbin)} bytes"


def test_ccob_header_inflation_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the inner header is inflated: not the megabytes of code behind it."""
    inner = bundle(hip_ids("gfx1201"), payload_extra=b"\0" * (8 << 20))
    wheel = device_wheel(tmp_path, "torch", ccob(inner, "zstd", 3) + ccob(inner, "zlib", 2))
    produced: list[int] = []
    real = offload_formats.inflater

    def counting(method: int):
        decoder = real(method)
        feed = decoder.feed

        def counted(data: bytes, max_out: int) -> bytes:
            out = feed(data, max_out)
            produced.append(len(out))
            return out

        decoder.feed = counted  # type: ignore[method-assign]
        return decoder

    monkeypatch.setattr(offload_formats, "inflater", counting)
    from rocm_bake.offload import scan as offload_scan
    monkeypatch.setattr(offload_scan, "inflater", counting)
    assert wheel_targets(wheel).targets == ["gfx1201"]
    assert 0 < sum(produced) < 64 << 10, f"inflated {sum(produced)} bytes for two headers"


@STORAGE
def test_what_a_scan_remembers_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: bool) -> None:
    """A member with more bundles (or entries) than the bounds is refused, not held in memory."""
    from rocm_bake.offload import scan as offload_scan

    fatbin = b"".join(pad(bundle(hip_ids("gfx950"))) for _ in range(3))
    wheel = device_wheel(tmp_path, "torch", fatbin, stored=stored)
    assert wheel_targets(wheel).targets == ["gfx950"]
    monkeypatch.setattr(offload_scan, "MAX_CANDIDATES", 2)
    with pytest.raises(RocmBakeError, match="more than 2 offload bundle magics .* refused as corrupt or hostile"):
        wheel_targets(wheel)
    monkeypatch.setattr(offload_scan, "MAX_CANDIDATES", 100)
    monkeypatch.setattr(offload_scan, "MAX_ENTRIES_TOTAL", 5)
    with pytest.raises(RocmBakeError, match="5 bundle entries"):
        wheel_targets(wheel)


# ------------------------------------------------------- chance magics


CHANCE_C = (
    'const char rocm_bake_decoy[] = "__CLANG_OFFLOAD_BUNDLE__ and CCOB and .hip_fatbin";\n'
    "int rocm_bake_fixture(int x) { return x * 3 + 1; }\n"
)


@STORAGE
def test_magics_outside_hip_fatbin_or_inside_payloads_are_not_reported(tmp_path: Path, stored: bool) -> None:
    """A string in .rodata, a whole bundle in another section, bundles inside a payload: none count."""
    hidden = bundle(hip_ids("gfx1151")) + ccob(bundle(hip_ids("gfx1100")))
    fatbin = bundle(hip_ids("gfx950"), payload_extra=hidden)
    wheel = device_wheel(
        tmp_path, "torch", fatbin, stored=stored, c_source=CHANCE_C,
        extra_sections={".decoy": pad(bundle(hip_ids("gfx1201"))) + ccob(bundle(hip_ids("gfx90a")))},
    )
    report = wheel_targets(wheel)
    assert report.targets == ["gfx950"] and not report.unknown
    assert [s.section for s in report.sources] == [".hip_fatbin"]


def test_bundle_like_data_before_hip_fatbin_never_makes_a_valid_wheel_unknown(tmp_path: Path) -> None:
    """A bundle-like header before .hip_fatbin that claims bytes inside it hides the section from the one
    streaming pass; the section is walked again from its known offset, never guessed, never "unknown"."""
    decoy = bytearray(bundle(hip_ids("gfx1201")))
    device_entry = 32 + 24 + len(hip_ids("gfx1201")[0])
    device_offset = struct.unpack_from("<Q", decoy, device_entry)[0]
    claimed = len(decoy) + 300 - device_offset  # the decoy's extent runs 300 bytes past its end
    struct.pack_into("<Q", decoy, device_entry + 8, claimed)
    so = shared_object(tmp_path / "b", "_C", bundle(hip_ids("gfx950")), {".decoy": bytes(decoy)})
    offsets = section_offsets(so)
    decoy_end = offsets[".decoy"][0] + device_offset + claimed
    assert offsets[".decoy"][0] < offsets[".hip_fatbin"][0] < decoy_end < so.stat().st_size
    streamed = make_wheel(tmp_path / "d", "torch", "1.0", extra_files={"torch/_C.so": so.read_bytes()},
                          tag=NATIVE_TAG)
    report = wheel_targets(streamed)
    assert report.targets == ["gfx950"] and not report.unknown and not report.unreadable
    assert [s.section for s in report.sources] == [".hip_fatbin"]
    stored = make_wheel(tmp_path / "s", "torch", "1.0", extra_files={"torch/_C.so": so.read_bytes()},
                        tag=NATIVE_TAG, compression=zipfile.ZIP_STORED)
    assert wheel_targets(stored).targets == ["gfx950"]


# ------------------------------------------------ ids, garbage


@pytest.mark.parametrize(
    "bundle_id, processor, features",
    [
        ("hipv4-amdgcn-amd-amdhsa--gfx950", "gfx950", []),
        ("hip-amdgcn-amd-amdhsa-gfx906", "gfx906", []),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", "gfx90a", ["xnack+"]),
        ("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", "gfx942", ["sramecc+", "xnack-"]),
        ("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic", "gfx9-4-generic", []),
        ("hipv4-amdgcn-amd-amdhsa--gfx11-generic", "gfx11-generic", []),
        ("host-x86_64-unknown-linux-gnu", None, []),
        ("host-x86_64-unknown-linux", None, []),
    ],
)
def test_bundle_id_grammar_accepts(bundle_id: str, processor: str | None, features: list[str]) -> None:
    parsed = parse_bundle_id(bundle_id)
    assert (parsed.processor, list(parsed.features), parsed.foreign) == (processor, features, None)


@pytest.mark.parametrize(
    "bundle_id",
    [
        "hipv4-amdgcn-amd-amdhsa--../../x",
        "hipv4-amdgcn-amd-amdhsa--gfx950/../../etc",
        "hipv4-amdgcn-amd-amdhsa--gfx 950",
        "hipv4-amdgcn-amd-amdhsa--",
        "hipv4-amdgcn-amd-amdhsa--banana",
        "hipv4-amdgcn-amd-amdhsa--gfx950:xnack",
        "hipv4-amdgcn-amd-amdhsa--GFX950",
        "-amdgcn-amd-amdhsa--gfx950",
        "hipv4",
    ],
)
def test_bundle_id_grammar_refuses(bundle_id: str) -> None:
    with pytest.raises(ValueError, match="malformed offload bundle id"):
        parse_bundle_id(bundle_id)


@STORAGE
def test_path_like_bundle_id_is_an_error_not_a_target(
    tmp_path: Path, stored: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = device_wheel(tmp_path, "torch", bundle([hip_ids()[0], "hipv4-amdgcn-amd-amdhsa--../../x"]), stored=stored)
    with pytest.raises(RocmBakeError) as err:
        wheel_targets(wheel)
    message = str(err.value)
    assert wheel.name in message and "torch/_C.so" in message and "at offset 0x" in message
    assert "'hipv4-amdgcn-amd-amdhsa--../../x'" in message and "malformed offload bundle id" in message
    assert main(["wheel", "arches", str(wheel)]) == 2
    captured = capsys.readouterr()
    assert "../../" not in captured.out and "Traceback" not in captured.err
    assert captured.err.startswith("rocm-bake: error: ") and "malformed offload bundle id" in captured.err


def test_non_amd_target_is_an_unknown_target_clearly_labelled(tmp_path: Path) -> None:
    ids = [hip_ids()[0], "cuda-nvptx64-nvidia-cuda--sm_80", "hipv4-spirv64-amd-amdhsa--amdgcnspirv"]
    wheel = device_wheel(tmp_path, "torch", bundle(ids))
    report = wheel_targets(wheel)
    assert report.targets == [] and report.unknown
    text = " ".join(report.unreadable)
    assert "'cuda-nvptx64-nvidia-cuda--sm_80'" in text and "not an AMDGPU (amdgcn) gfx target" in text
    assert "amdgcnspirv" in text
    with pytest.raises(RocmBakeError, match="cannot verify"):
        check_wheel_for_arch(wheel, Arch("gfx950"))


@STORAGE
def test_garbage_hip_fatbin_is_unreadable_not_compressed(
    tmp_path: Path, stored: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = device_wheel(tmp_path, "torch", os.urandom(20000).replace(b"CCOB", b"XXXX"), stored=stored)
    report = wheel_targets(wheel)
    assert report.unknown and [s.kind for s in report.sources] == ["unreadable"]
    assert "holds 20000 bytes but no offload bundle" in report.unreadable[0]
    line = describe(report)
    assert "unreadable" in line and "compressed" not in line
    assert main(["wheel", "arches", str(wheel)]) == 0
    out = capsys.readouterr().out
    assert "unreadable" in out and "compressed" not in out
    assert main(["wheel", "arches", "--json", str(wheel)]) == 0
    data = json.loads(capsys.readouterr().out)[0]
    assert data["unknown"] and "compressed" not in json.dumps(data)


# -------------------------------------------------------------- progress


def test_big_member_scan_shows_progress_and_json_silences_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = device_wheel(tmp_path, "torch", bundle(hip_ids("gfx950"), payload_extra=os.urandom(200_000)))
    monkeypatch.setattr(offload_wheel, "PROGRESS_MIN_BYTES", 100_000)
    stream = io.StringIO()
    progress.set_stream(stream)
    try:
        assert main(["wheel", "arches", str(wheel)]) == 0
        lines = stream.getvalue().splitlines()
        size = zipfile.ZipFile(wheel).getinfo("torch/_C.so").file_size
        scanned = f"scan {wheel.name}: torch/_C.so: {progress.human_bytes(size)} in "
        assert any(line.startswith(scanned) for line in lines), lines
        stream.truncate(0)
        stream.seek(0)
        assert main(["wheel", "arches", "--json", str(wheel)]) == 0
        assert stream.getvalue() == ""
        assert not progress.is_quiet(), "--json must not leave progress silenced for later commands"
    finally:
        progress.set_stream(None)
    capsys.readouterr()


def test_bundle_like_data_hiding_the_name_table_is_read_again(tmp_path: Path) -> None:
    """The decoy's claimed extent covers .shstrtab, so the first pass cannot name the sections."""
    decoy = bytearray(bundle(hip_ids("gfx1201")))
    device_entry = 32 + 24 + len(hip_ids("gfx1201")[0])
    device_offset = struct.unpack_from("<Q", decoy, device_entry)[0]
    probe = shared_object(tmp_path / "p", "_C", bundle(hip_ids("gfx950")), {".decoy": bytes(decoy)})
    offsets = section_offsets(probe)
    strtab_start, strtab_size = offsets[".shstrtab"]
    size = probe.stat().st_size
    claimed = strtab_start + strtab_size + 8 - (offsets[".decoy"][0] + device_offset)
    struct.pack_into("<Q", decoy, device_entry + 8, claimed)
    so = shared_object(tmp_path / "b", "_C", bundle(hip_ids("gfx950")), {".decoy": bytes(decoy)})
    assert section_offsets(so) == offsets and so.stat().st_size == size
    assert offsets[".decoy"][0] + device_offset + claimed <= size  # a plausible extent, inside the file
    streamed = make_wheel(tmp_path / "d", "torch", "1.0", extra_files={"torch/_C.so": so.read_bytes()},
                          tag=NATIVE_TAG)
    report = wheel_targets(streamed)
    assert report.targets == ["gfx950"] and not report.unknown, report

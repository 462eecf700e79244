"""Code-object check on real gcc-built ELF .so files with objcopy-added bundles."""

from __future__ import annotations

import json
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

from offload_fixtures import (
    amdgpu_code_object, bundle, ccob, device_wheel, hip_ids, make_wheel, shared_object,
)
from rocm_bake import offload
from rocm_bake.cli import main
from rocm_bake.errors import RocmBakeError
from rocm_bake.offload import check_wheel_for_arch, wheel_targets


def test_fixture_is_a_real_elf_with_hip_fatbin(tmp_path: Path) -> None:
    so = shared_object(tmp_path, "probe", bundle(hip_ids("gfx950")))
    out = subprocess.run(["readelf", "-S", "-W", str(so)], capture_output=True, text=True, check=True)
    assert ".hip_fatbin" in out.stdout


def test_one_arch(tmp_path: Path) -> None:
    wheel = device_wheel(tmp_path, "torch", bundle(hip_ids("gfx950")))
    report = wheel_targets(wheel)
    assert report.targets == ["gfx950"]
    assert (report.pure, report.device_code, report.compressed_unknown) == (False, True, False)
    assert check_wheel_for_arch(wheel, "gfx950").targets == ["gfx950"]
    with pytest.raises(RocmBakeError) as err:
        check_wheel_for_arch(wheel, "gfx1201")
    message = str(err.value)
    assert wheel.name in message and "gfx950" in message and "gfx1201" in message


def test_two_arches_fat_build_passes_both_and_refuses_a_third(tmp_path: Path) -> None:
    wheel = device_wheel(tmp_path, "torch", bundle(hip_ids("gfx950", "gfx1201")))
    assert wheel_targets(wheel).targets == ["gfx1201", "gfx950"]
    check_wheel_for_arch(wheel, "gfx950")
    check_wheel_for_arch(wheel, "gfx1201")
    with pytest.raises(RocmBakeError, match="gfx1201, gfx950, not gfx1151"):
        check_wheel_for_arch(wheel, "gfx1151")


def test_target_id_features_are_stripped_for_matching_and_kept_in_notes(tmp_path: Path) -> None:
    wheel = device_wheel(tmp_path, "amd_aiter", bundle(hip_ids("gfx90a:xnack+", "gfx942:sramecc+:xnack-")))
    report = wheel_targets(wheel)
    assert report.targets == ["gfx90a", "gfx942"]
    assert any("gfx90a with features xnack+" in n for n in report.notes)
    assert any("gfx942 with features sramecc+:xnack-" in n for n in report.notes)
    check_wheel_for_arch(wheel, "gfx90a")


def test_plain_so_and_pure_python_wheels_pass(tmp_path: Path) -> None:
    plain = device_wheel(tmp_path, "nixl", None)
    report = wheel_targets(plain)
    assert (report.targets, report.pure, report.device_code) == ([], False, False)
    check_wheel_for_arch(plain, "gfx1201")
    pure = make_wheel(tmp_path / "w", "triton_kernels", "1.0", {"triton_kernels/__init__.py": b"x = 1\n"}, pure=True)
    report = wheel_targets(pure)
    assert (report.targets, report.pure, report.device_code) == ([], True, False)
    check_wheel_for_arch(pure, "gfx950")


def test_several_bundles_back_to_back_in_one_section(tmp_path: Path) -> None:
    first = bundle(hip_ids("gfx1201"))
    second = bundle(hip_ids("gfx1201"))
    pad = bytes((-len(first)) % 4096)
    wheel = device_wheel(tmp_path, "torch", first + pad + second + ccob(bundle(hip_ids("gfx1201"))))
    report = wheel_targets(wheel)
    assert [s.kind for s in report.sources] == ["bundle", "bundle", "compressed-bundle"]
    assert report.targets == ["gfx1201"]
    # a foreign bundle hidden behind the first is still found
    mixed = device_wheel(tmp_path / "m", "torch", first + pad + bundle(hip_ids("gfx950")))
    assert wheel_targets(mixed).targets == ["gfx1201", "gfx950"]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_zlib_compressed_bundle_is_decompressed(tmp_path: Path, version: int) -> None:
    wheel = device_wheel(tmp_path, "torch", ccob(bundle(hip_ids("gfx1151")), "zlib", version))
    report = wheel_targets(wheel)
    assert report.targets == ["gfx1151"] and not report.compressed_unknown
    assert report.sources[0].note.startswith(f"CCOB v{version} zlib")
    with pytest.raises(RocmBakeError, match="gfx1151, not gfx950"):
        check_wheel_for_arch(wheel, "gfx950")


def test_zstd_compressed_bundle_read_through_available_decompressor(tmp_path: Path) -> None:
    assert offload.zstd_available() is not None, "zstd (module or CLI) is needed for this test"
    wheel = device_wheel(tmp_path, "torch", ccob(bundle(hip_ids("gfx1250")), "zstd", 3))
    assert wheel_targets(wheel).targets == ["gfx1250"]


def test_unreadable_compressed_bundle_is_refused_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = device_wheel(tmp_path, "torch", ccob(bundle(hip_ids("gfx1201")), "zstd", 2))
    monkeypatch.setattr(offload, "zstd_available", lambda: None)
    report = wheel_targets(wheel)
    assert report.compressed_unknown and report.targets == []
    assert any("compressed, targets unknown" in n for n in report.notes)
    with pytest.raises(RocmBakeError) as err:
        check_wheel_for_arch(wheel, "gfx950")
    assert "cannot verify" in str(err.value) and wheel.name in str(err.value)
    assert check_wheel_for_arch(wheel, "gfx950", allow_unknown=True).compressed_unknown


def test_unknown_compression_method_is_unknown_not_guessed(tmp_path: Path) -> None:
    blob = bytearray(ccob(bundle(hip_ids("gfx950")), "zlib", 3))
    blob[6:8] = struct.pack("<H", 9)
    report = wheel_targets(device_wheel(tmp_path, "torch", bytes(blob)))
    assert report.compressed_unknown and "method 9" in " ".join(report.notes)


def test_known_targets_plus_unknown_still_needs_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fatbin = bundle(hip_ids("gfx950"))
    fatbin += bytes((-len(fatbin)) % 4096) + ccob(bundle(hip_ids("gfx1201")), "zstd", 3)
    wheel = device_wheel(tmp_path, "torch", fatbin)
    monkeypatch.setattr(offload, "zstd_available", lambda: None)
    with pytest.raises(RocmBakeError, match="cannot verify"):
        check_wheel_for_arch(wheel, "gfx950")
    assert check_wheel_for_arch(wheel, "gfx950", allow_unknown=True).targets == ["gfx950"]


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
def test_corrupt_bundle_is_a_clear_error(tmp_path: Path, mangle, problem: str) -> None:
    wheel = device_wheel(tmp_path, "torch", mangle(bundle(hip_ids("gfx950"))))
    with pytest.raises(RocmBakeError) as err:
        wheel_targets(wheel)
    message = str(err.value)
    assert problem in message and wheel.name in message and "torch/_C.so" in message
    assert ".hip_fatbin" in message


def test_truncated_compressed_bundle_is_a_clear_error(tmp_path: Path) -> None:
    blob = ccob(bundle(hip_ids("gfx950")), "zlib", 3)
    wheel = device_wheel(tmp_path, "torch", blob[: len(blob) // 2])
    with pytest.raises(RocmBakeError, match="truncated"):
        wheel_targets(wheel)
    # a header that fits but zlib data that is not: named as corrupt
    garbage = b"CCOB" + struct.pack("<HHQQQ", 3, 0, 32 + 1024, 4096, 0) + bytes(range(256)) * 4
    bad = device_wheel(tmp_path / "g", "torch", garbage)
    with pytest.raises(RocmBakeError, match="CCOB v3 zlib: compressed data is corrupt"):
        wheel_targets(bad)


def test_standalone_amdgpu_code_objects_count(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path, "amd_aiter", "0.1",
        {"aiter/hsa/gfx942/k.co": amdgpu_code_object("gfx942"), "aiter/__init__.py": b""},
    )
    assert wheel_targets(wheel).targets == ["gfx942"]
    with pytest.raises(RocmBakeError, match="gfx942, not gfx950"):
        check_wheel_for_arch(wheel, "gfx950")


def test_generic_target_covers_its_members() -> None:
    assert offload.covers("gfx9-4-generic", "gfx950")
    assert offload.covers("gfx11-generic", "gfx1151")
    assert not offload.covers("gfx11-generic", "gfx1201")
    assert not offload.covers("gfx1200", "gfx1201")


def test_stored_members_and_non_wheels(tmp_path: Path) -> None:
    so = shared_object(tmp_path, "s", bundle(hip_ids("gfx1201")))
    wheel = tmp_path / "stored-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("stored/_C.cpython-311-x86_64-linux-gnu.so", so.read_bytes())
    assert wheel_targets(wheel).targets == ["gfx1201"]
    not_zip = tmp_path / "broken-1.0-py3-none-any.whl"
    not_zip.write_bytes(b"not a zip")
    with pytest.raises(RocmBakeError, match="not a zip"):
        wheel_targets(not_zip)
    with pytest.raises(RocmBakeError, match="not found"):
        wheel_targets(tmp_path / "missing.whl")


def test_cli_wheel_arches_json_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fat = device_wheel(tmp_path / "a", "torch", bundle(hip_ids("gfx950", "gfx1201")))
    pure = make_wheel(tmp_path / "b", "nixl", "1.0", {"nixl/__init__.py": b""}, pure=True)
    assert main(["wheel", "arches", "--json", str(fat), str(pure)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(d["wheel"], d["targets"], d["pure"]) for d in data] == [
        (fat.name, ["gfx1201", "gfx950"], False), (pure.name, [], True),
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
    wheel = make_wheel(tmp_path / "w", "lib", "1.0", {"lib/_C.so": bytes(so)})
    report = wheel_targets(wheel)
    assert report.compressed_unknown and "without section headers" in " ".join(report.notes)
    with pytest.raises(RocmBakeError, match="cannot verify"):
        check_wheel_for_arch(wheel, "gfx950")


def test_big_members_are_read_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seek-based reader (used above IN_MEMORY_LIMIT) gives the same answer."""
    fatbin = bundle(hip_ids("gfx950"))
    fatbin += bytes((-len(fatbin)) % 4096) + ccob(bundle(hip_ids("gfx1201")), "zlib", 2)
    wheel = device_wheel(tmp_path, "torch", fatbin)
    in_memory = wheel_targets(wheel)
    monkeypatch.setattr(offload, "IN_MEMORY_LIMIT", 0)
    streamed = wheel_targets(wheel)
    assert streamed.targets == in_memory.targets == ["gfx1201", "gfx950"]
    assert [s.offset for s in streamed.sources] == [s.offset for s in in_memory.sources]

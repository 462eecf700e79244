"""Real wheels with real ELF shared objects carrying HIP offload bundles.

The bundle bytes are written here, independently of ``rocm_bake.offload``,
in the layout clang-offload-bundler writes; a tiny C file is compiled with
gcc and objcopy adds the ``.hip_fatbin`` section, as the HIP toolchain does.
"""

from __future__ import annotations

import hashlib
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path

from rocm_bake.zstd import zstd
from tests.index_fixtures import MACH, NATIVE_TAG, amdgpu_code_object, make_wheel

MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
HOST_ID = "host-x86_64-unknown-linux-gnu"

#: The e_flags value given to a code object for a target LLVM does not number (``sm_80``, ``../../x``).
UNNUMBERED_MACH = 0x7E


def _entry_code_object(target: str) -> bytes:
    """The code object in a bundle entry for ``target`` (a processor, or any id tail)."""
    processor = target.split(":")[0]
    return amdgpu_code_object(processor, 16 * len(processor), None if processor in MACH else UNNUMBERED_MACH)


def bundle(ids: list[str], align: int = 4096, payload_extra: bytes = b"") -> bytes:
    """An uncompressed offload bundle; device entries carry AMDGPU code objects.

    ``payload_extra`` is appended to each device payload (to make bundles big,
    or to hide bytes that look like other bundles inside one).
    """
    payloads = [b"" if i.startswith("host-") else
                _entry_code_object(i.rsplit("-", 1)[-1]) + payload_extra
                for i in ids]
    header_size = len(MAGIC) + 8 + sum(24 + len(i) for i in ids)
    offsets, pos = [], header_size
    for payload in payloads:
        pos = (pos + align - 1) // align * align
        offsets.append(pos)
        pos += len(payload)
    out = bytearray(MAGIC + struct.pack("<Q", len(ids)))
    for bundle_id, offset, payload in zip(ids, offsets, payloads):
        out += struct.pack("<QQQ", offset, len(payload), len(bundle_id)) + bundle_id.encode()
    for offset, payload in zip(offsets, payloads):
        out += bytes(offset - len(out)) + payload
    return bytes(out)


def hip_ids(*targets: str) -> list[str]:
    return [HOST_ID] + [f"hipv4-amdgcn-amd-amdhsa--{t}" for t in targets]


def ccob(inner: bytes, method: str = "zlib", version: int = 3) -> bytes:
    """A compressed bundle (clang --offload-compress) wrapping ``inner``."""
    if method == "zlib":
        data, code = zlib.compress(inner, 6), 0
    else:
        # libzstd's own encoder through the venv's binding (the zstd CLI is the same library, but a Debian package)
        data = zstd().compress(inner)
        code = 1
    digest = struct.unpack("<Q", hashlib.md5(inner).digest()[8:])[0]
    if version == 3:
        head = b"CCOB" + struct.pack("<HHQQQ", 3, code, 32 + len(data), len(inner), digest)
    elif version == 2:
        head = b"CCOB" + struct.pack("<HHIIQ", 2, code, 24 + len(data), len(inner), digest)
    else:
        head = b"CCOB" + struct.pack("<HHIQ", 1, code, len(inner), digest)
    return head + data


C_SOURCE = "int rocm_bake_fixture(int x) { return x * 3 + 1; }\n"


def shared_object(
    work: Path, name: str, fatbin: bytes | None, extra_sections: dict[str, bytes] | None = None,
    c_source: str = C_SOURCE,
) -> Path:
    """A real gcc-built .so, with ``fatbin`` as its ``.hip_fatbin`` section if given.

    ``extra_sections`` are added by objcopy too (this objcopy places sections
    listed later *before* earlier ones in the file: check with ``section_offsets``).
    """
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"{name}.c"
    src.write_text(c_source)
    so = work / f"{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    args = []
    if fatbin is not None:
        blob = work / f"{name}.fatbin"
        blob.write_bytes(fatbin)
        args += ["--add-section", f".hip_fatbin={blob}", "--set-section-alignment", ".hip_fatbin=4096"]
    for index, (section, data) in enumerate((extra_sections or {}).items()):
        blob = work / f"{name}.extra{index}"
        blob.write_bytes(data)
        args += ["--add-section", f"{section}={blob}"]
    if args:
        subprocess.run(["objcopy", *args, str(so)], check=True)
    return so


def section_offsets(so: Path) -> dict[str, tuple[int, int]]:
    """``{name: (file offset, size)}`` as readelf reports them (an independent reading)."""
    out = subprocess.run(["readelf", "-S", "-W", str(so)], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[0].startswith("[") and parts[1].startswith("."):
            found[parts[1]] = (int(parts[4], 16), int(parts[5], 16))
    return found


def device_wheel(
    work: Path, dist: str, fatbin: bytes | None, version: str = "1.0", stored: bool = False,
    extra_sections: dict[str, bytes] | None = None, c_source: str = C_SOURCE,
) -> Path:
    """A platform wheel whose ``_C.so`` carries ``fatbin`` (None: a plain .so).

    ``stored``: the members are stored, not deflated (read in place, not streamed).
    """
    so = shared_object(work / "build" / dist, "_C", fatbin, extra_sections, c_source)
    return make_wheel(work / "wheels", dist, version, extra_files={f"{dist}/_C.so": so.read_bytes(),
                                                                   f"{dist}/__init__.py": b""},
                      tag=NATIVE_TAG, compression=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)

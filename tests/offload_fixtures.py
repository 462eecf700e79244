"""Real wheels with real ELF shared objects carrying HIP offload bundles.

The bundle bytes are written here, independently of ``rocm_bake.offload``,
in the layout clang-offload-bundler writes; a tiny C file is compiled with
gcc and objcopy adds the ``.hip_fatbin`` section, as the HIP toolchain does.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path

from rocm_bake.zstd import zstd

MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
HOST_ID = "host-x86_64-unknown-linux-gnu"

#: EF_AMDGPU_MACH values for the code objects written into bundle entries.
MACH = {"gfx950": 0x4F, "gfx1201": 0x4E, "gfx1151": 0x4A, "gfx90a": 0x3F, "gfx942": 0x4C,
        "gfx1250": 0x49}


def amdgpu_code_object(arch: str) -> bytes:
    """A 64-byte ELF64 header of an AMDGPU code object (EM_AMDGPU, e_flags mach) plus body."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 4]) + bytes(7)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 224, 1, 0, 0, 0, MACH.get(arch, 0x7E) | 0x300, 64, 56, 0, 64, 0, 0
    )
    assert len(header) == 64
    return header + arch.encode() * 16


def bundle(ids: list[str], align: int = 4096, payload_extra: bytes = b"") -> bytes:
    """An uncompressed offload bundle; device entries carry AMDGPU code objects.

    ``payload_extra`` is appended to each device payload (to make bundles big,
    or to hide bytes that look like other bundles inside one).
    """
    payloads = [b"" if i.startswith("host-") else
                amdgpu_code_object(i.rsplit("-", 1)[-1].split(":")[0]) + payload_extra
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


def make_wheel(
    out_dir: Path, dist: str, version: str, members: dict[str, bytes], pure: bool = False,
    compression: int = zipfile.ZIP_DEFLATED,
) -> Path:
    """An installable wheel (dist-info with METADATA, WHEEL and a hashed RECORD)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = "py3-none-any" if pure else "cp311-cp311-linux_x86_64"
    wheel = out_dir / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    files = dict(members)
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: rocm-bake-tests\nRoot-Is-Purelib: {str(pure).lower()}\n"
        f"Tag: {tag}\n"
    ).encode()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", compression=compression) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return wheel


def device_wheel(
    work: Path, dist: str, fatbin: bytes | None, version: str = "1.0", stored: bool = False,
    extra_sections: dict[str, bytes] | None = None, c_source: str = C_SOURCE,
) -> Path:
    """A platform wheel whose ``_C.so`` carries ``fatbin`` (None: a plain .so).

    ``stored``: the members are stored, not deflated (read in place, not streamed).
    """
    so = shared_object(work / "build" / dist, "_C", fatbin, extra_sections, c_source)
    return make_wheel(work / "wheels", dist, version, {f"{dist}/_C.so": so.read_bytes(),
                                                     f"{dist}/__init__.py": b""},
                      compression=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)

"""Real, installable small wheels for index tests (and anyone else's).

``make_wheel`` writes a wheel pip and uv install for real (METADATA,
WHEEL, hashed RECORD). ``device_files`` gives native-looking payloads that
differ per arch: real AMDGPU code-object ELF headers (EM_AMDGPU, with the
processor in ``e_flags``) of arch-dependent size, the way two archs' torch
wheels share a filename and differ in device code. ``arch_wheel_set`` builds
one arch's index input covering every version rule of the seed, with
dependencies only inside the set (no network).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

#: EF_AMDGPU_MACH values (LLVM BinaryFormat/ELF.h).
MACH = {"gfx950": 0x4F, "gfx1201": 0x4E, "gfx1151": 0x4A, "gfx942": 0x4C, "gfx90a": 0x3F,
        "gfx1250": 0x49, "gfx1100": 0x41}
EM_AMDGPU = 224

#: A platform tag the running interpreter installs.
NATIVE_TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
PURE_TAG = "py3-none-any"
GIT = "git31a77fc"
ROCM = "rocm10.1.0"


def amdgpu_code_object(arch: str, body_size: int = 256) -> bytes:
    """An AMDGPU code object: a valid ELF64 header for ``arch`` plus an arch-specific body."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 4]) + bytes(7)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, EM_AMDGPU, 1, 0, 0, 0, MACH[arch] | 0x300, 64, 56, 0, 64, 0, 0
    )
    return header + (arch.encode() * body_size)[:body_size]


def device_files(package: str, arch: str) -> dict[str, bytes]:
    """Device code for ``arch``; gfx9 parts get more kernels (amd_aiter is 481 vs 131 MB)."""
    kernels = 3 if arch.startswith("gfx9") else 1
    return {f"{package}/kernels/k{i}.co": amdgpu_code_object(arch, 512 * (i + 1)) for i in range(kernels)}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    out_dir: Path,
    name: str,
    version: str,
    requires: Sequence[str] = (),
    extra_files: Mapping[str, bytes] | None = None,
    tag: str = PURE_TAG,
    requires_python: str | None = None,
    filename: str | None = None,
) -> Path:
    """Write ``<name>-<version>-<tag>.whl`` into ``out_dir`` and return its path.

    ``name`` is used as given in the filename (``amd_aiter``) and METADATA.
    A module ``<name>/__init__.py`` records name and version; ``extra_files``
    adds members (e.g. ``device_files``). ``filename`` overrides the file
    name (for tests of mismatched metadata).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        meta.append(f"Requires-Python: {requires_python}")
    meta += [f"Requires-Dist: {r}" for r in requires]
    pure = tag == PURE_TAG
    members: dict[str, bytes] = {
        f"{dist}/__init__.py": f"NAME = {name!r}\nVERSION = {version!r}\n".encode(),
        **dict(extra_files or {}),
        f"{info}/METADATA": ("\n".join(meta) + "\n").encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: rocm-bake-tests\nRoot-Is-Purelib: {str(pure).lower()}\n"
            f"Tag: {tag}\n"
        ).encode(),
    }
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = out_dir / (filename or f"{dist}-{version}-{tag}.whl")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


#: (name, version, native, requires) for one arch's set; every rule of the seed.
ARCH_SET: list[tuple[str, str, bool, list[str]]] = [
    ("torch", f"2.15.0a0+{GIT}.{ROCM}", True, [f"triton==3.6.0+{GIT}.{ROCM}"]),
    ("triton", f"3.6.0+{GIT}.{ROCM}", True, []),
    ("amd_aiter", f"0.1.28+{GIT}.{ROCM}", True, ["torch"]),
    ("torchvision", f"0.30.0+{ROCM}", True, [f"torch==2.15.0a0+{GIT}.{ROCM}"]),
    ("vllm", "0.12.0+rocm101", True, ["torch", "triton_kernels", "nixl"]),
    ("triton_kernels", "1.0.0", False, ["triton"]),
    ("nixl", "0.7.0", False, []),
    ("nixl_rocm", "0.7.0", True, ["nixl"]),
]


def arch_wheel_set(out_dir: Path, arch: str, names: Sequence[str] | None = None) -> list[Path]:
    """One arch's wheels (same filenames for every arch, different device code)."""
    paths = []
    for name, version, native, requires in ARCH_SET:
        if names is not None and name not in names:
            continue
        extra = {**device_files(name, arch), f"{name}/_arch.py": f"BUILT_FOR = {arch!r}\n".encode()} if native else {}
        paths.append(
            make_wheel(out_dir, name, version, requires, extra, tag=NATIVE_TAG if native else PURE_TAG,
                       requires_python=">=3.10")
        )
    return paths

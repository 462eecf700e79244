#!/usr/bin/env python3
"""The demo stacks' stand-in for a ROCm build: real small wheels with real offload bundles.

Runs inside BuildKit ``RUN`` steps on the demo base (Debian python3, gcc,
binutils; nothing pulled from a public registry), with the standard library
only. A device wheel's ``.so`` is compiled by gcc, and ``objcopy`` adds a
``.hip_fatbin`` section holding a clang-offload-bundler bundle with one
AMDGPU code object per arch of ``PYTORCH_ROCM_ARCH`` — what the HIP
toolchain emits, so ``rocm-bake wheel arches`` and the index's code-object
check read these wheels exactly as they read real ones. A fat build
(``gfx950;gfx1201``) gets both code objects in one binary, as a real fat build does.

Versions follow the index's rules (``rocm_bake.index.versions``): ``+git<sha>.rocm<V>`` for torch, triton
and amd_aiter, ``+rocm<V>`` for torchvision, upstream's ``+rocm101`` for
vllm, none for the pure-Python triton_kernels — and never the arch.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import struct
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
HOST_ID = "host-x86_64-unknown-linux-gnu"
#: EF_AMDGPU_MACH of each arch the demo builds (LLVM's AMDGPU ELF flags).
MACH = {"gfx950": 0x4F, "gfx1201": 0x4E, "gfx1151": 0x4A, "gfx1250": 0x49, "gfx942": 0x4C, "gfx90a": 0x3F}
EF_AMDGPU_FEATURE_XNACK_ANY_V4 = 0x100
EF_AMDGPU_FEATURE_SRAMECC_ANY_V4 = 0x400


def code_object(arch: str) -> bytes:
    """An AMDGPU code object: ELF64, EM_AMDGPU (224), ELFOSABI_AMDGPU_HSA v4, e_flags = mach."""
    if arch not in MACH:
        sys.exit(f"demo_build: no EF_AMDGPU_MACH known for {arch}")
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 4]) + bytes(7)
    flags = MACH[arch] | EF_AMDGPU_FEATURE_XNACK_ANY_V4 | EF_AMDGPU_FEATURE_SRAMECC_ANY_V4
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 224, 1, 0, 0, 0, flags, 64, 56, 0, 64, 0, 0)
    return header + f"demo kernels for {arch}\n".encode() * 64


def offload_bundle(arches: list[str], align: int = 4096) -> bytes:
    """clang-offload-bundler's layout: magic, entry count, (offset, size, id) entries, aligned payloads."""
    ids = [HOST_ID] + [f"hipv4-amdgcn-amd-amdhsa--{a}" for a in arches]
    payloads = [b""] + [code_object(a) for a in arches]
    pos = len(MAGIC) + 8 + sum(24 + len(i) for i in ids)
    offsets = []
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


def device_library(work: Path, name: str, arches: list[str]) -> bytes:
    """gcc builds the host side; objcopy adds the device code as ``.hip_fatbin``."""
    src = work / f"{name}.c"
    src.write_text(f"int {name}_entry(int x) {{ return x * 3 + 1; }}\n")
    lib = work / f"{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(src)], check=True)
    fatbin = work / f"{name}.hipfb"
    fatbin.write_bytes(offload_bundle(arches))
    subprocess.run(
        ["objcopy", "--add-section", f".hip_fatbin={fatbin}", "--set-section-alignment", ".hip_fatbin=4096",
         str(lib)],
        check=True,
    )
    return lib.read_bytes()


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(out: Path, name: str, version: str, members: dict[str, bytes], requires: list[str], pure: bool) -> Path:
    """A valid wheel: METADATA, WHEEL, and a RECORD hashing every member."""
    tag = "py3-none-any" if pure else "cp311-cp311-linux_x86_64"
    dist_info = f"{name}-{version}.dist-info"
    metadata = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: rocm-bake demo stand-in for {name}", "Requires-Python: >=3.9"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    files = dict(members)
    files[f"{dist_info}/METADATA"] = ("\n".join(metadata) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: rocm-bake-demo\nRoot-Is-Purelib: {str(pure).lower()}\nTag: {tag}\n"
    ).encode()
    record = [record_line(n, d) for n, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in sorted(files.items()):
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return wheel


def build_wheel(args: argparse.Namespace) -> None:
    package = args.name
    members = {f"{package}/__init__.py": f'__version__ = "{args.version}"\n'.encode()}
    if args.arches:
        arches = [a for a in args.arches.split(";") if a]
        with tempfile.TemporaryDirectory() as tmp:
            members[f"{package}/_C.so"] = device_library(Path(tmp), "_C", arches)
        members[f"{package}/_arches.txt"] = ("\n".join(arches) + "\n").encode()
    wheel = write_wheel(Path(args.out), package, args.version, members, args.requires or [], pure=args.pure)
    print(f"built {wheel.name} ({wheel.stat().st_size} bytes)" + (f" for {args.arches}" if args.arches else ""))


def install(args: argparse.Namespace) -> None:
    """Unpack wheels into site-packages (the demo base has no pip; wheels are installed, not built, here)."""
    target = Path(args.target or sysconfig.get_paths()["purelib"])
    for wheel in args.wheels:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(target)
        print(f"installed {Path(wheel).name} into {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    wheel = sub.add_parser("wheel", help="build one wheel")
    wheel.add_argument("--name", required=True)
    wheel.add_argument("--version", required=True)
    wheel.add_argument("--arches", help="PYTORCH_ROCM_ARCH: device code for these arches")
    wheel.add_argument("--pure", action="store_true", help="pure Python (no ROCm code)")
    wheel.add_argument("--requires", action="append")
    wheel.add_argument("--out", required=True)
    wheel.set_defaults(func=build_wheel)
    inst = sub.add_parser("install", help="unpack wheels into site-packages")
    inst.add_argument("wheels", nargs="+")
    inst.add_argument("--target")
    inst.set_defaults(func=install)
    args = parser.parse_args()
    os.umask(0o022)
    args.func(args)


if __name__ == "__main__":
    main()

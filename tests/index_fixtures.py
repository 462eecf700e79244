"""Real, installable small wheels for index tests (and anyone else's).

``make_wheel`` writes a wheel pip and uv install for real (METADATA,
WHEEL, hashed RECORD). ``device_files`` gives native-looking payloads that
differ per arch: real AMDGPU code-object ELF headers (EM_AMDGPU, with the
processor in ``e_flags``) of arch-dependent size, the way two archs' torch
wheels share a filename and differ in device code. ``arch_wheel_set`` builds
one arch's index input covering every version rule (``rocm_bake.index.versions``), with
dependencies only inside the set (no network).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import sys
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from rocm_bake.offload.targets import AMDGPU_MACH

#: Each processor's EF_AMDGPU_MACH value, read from the product's table (its one home).
MACH = {processor: mach for mach, processor in AMDGPU_MACH.items()}
EM_AMDGPU = 224

#: A platform tag the running interpreter installs.
NATIVE_TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
PURE_TAG = "py3-none-any"
GIT = "git31a77fc"
ROCM = "rocm10.1.0"


def amdgpu_code_object(arch: str, body_size: int = 256, mach: int | None = None) -> bytes:
    """An AMDGPU code object: a valid ELF64 header for ``arch`` plus an arch-specific body.

    ``e_flags`` holds ``arch``'s EF_AMDGPU_MACH (KeyError for a name LLVM does
    not number), or ``mach`` when given (a value for a target with none).
    """
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 4]) + bytes(7)
    flags = (MACH[arch] if mach is None else mach) | 0x300
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, EM_AMDGPU, 1, 0, 0, 0, flags, 64, 56, 0, 64, 0, 0)
    assert len(header) == 64
    return header + (arch.encode() * body_size)[:body_size]


def device_files(package: str, arch: str) -> dict[str, bytes]:
    """Device code for ``arch``; gfx9 parts get more kernels (amd_aiter is 481 vs 131 MB).

    ``arch`` may be a fat build's ``gfx950;gfx1201``: code objects for each arch.
    """
    if ";" in arch:
        return {f"{package}/kernels/{a}/{name.rsplit('/', 1)[1]}": data
                for a in arch.split(";") for name, data in device_files(package, a).items()}
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
    metadata: bytes | None = None,
    compression: int = zipfile.ZIP_DEFLATED,
) -> Path:
    """Write ``<name>-<version>-<tag>.whl`` into ``out_dir`` and return its path.

    ``name`` is used as given in the filename (``amd_aiter``) and METADATA.
    A module ``<name>/__init__.py`` records name and version; ``extra_files``
    adds members (e.g. ``device_files``). ``filename`` overrides the file
    name (for tests of mismatched metadata); ``metadata`` the METADATA bytes.
    ``compression``: ``zipfile.ZIP_STORED`` gives members read in place, not streamed.
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
        f"{info}/METADATA": metadata if metadata is not None else ("\n".join(meta) + "\n").encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: rocm-bake-tests\nRoot-Is-Purelib: {str(pure).lower()}\n"
            f"Tag: {tag}\n"
        ).encode(),
    }
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = out_dir / (filename or f"{dist}-{version}-{tag}.whl")
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


#: (name, version, native, requires) for one arch's set; every version rule.
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
    """One arch's wheels (same filenames for every arch, different device code).

    ``arch`` may be a fat build's ``gfx950;gfx1201``: native wheels then carry
    code objects for every arch of it.
    """
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


def _raw_zip(path: Path, members: list[tuple[str, int, int, bytes, int]]) -> None:
    """Write a zip from (name, method, crc32, stored bytes, uncompressed size) (no zip64: < 4 GiB)."""
    local = bytearray()
    central = bytearray()
    for name, method, crc, data, size in members:
        raw = name.encode()
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0)
        local += raw + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x314, 20, 0, method, 0, 0x21, crc, len(data),
                               size, len(raw), 0, 0, 0, 0, 0o100644 << 16, offset)
        central += raw
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(local), 0)
    path.write_bytes(bytes(local) + bytes(central) + end)


def bomb_wheel(out_dir: Path, name: str, version: str, mib: int) -> Path:
    """A valid, small wheel whose METADATA inflates to a header plus ``mib`` MiB of spaces (a zip bomb).

    The DEFLATE stream is one 1 MiB block of spaces, fully flushed so it can
    be repeated, then the final block: 1.5 GB inflates from ~1.5 MB. The
    CRC is the real one, so the archive is valid, not merely large.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    chunk = b" " * (1 << 20)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.flush()
    head = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: ".encode()
    body_chunks = mib
    inflated = len(head) + mib * len(chunk)
    head_comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    head_bytes = head_comp.compress(head) + head_comp.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(head)
    for _ in range(body_chunks):
        crc = zlib.crc32(chunk, crc)
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    wheel = f"Wheel-Version: 1.0\nGenerator: rocm-bake-tests\nRoot-Is-Purelib: true\nTag: {PURE_TAG}\n".encode()
    init = b""
    members = [
        (f"{dist}/__init__.py", 0, zlib.crc32(init), init, 0),
        (f"{info}/WHEEL", 0, zlib.crc32(wheel), wheel, len(wheel)),
        (f"{info}/METADATA", 8, crc, head_bytes + segment * body_chunks + tail, inflated),
    ]
    path = out_dir / f"{dist}-{version}-{PURE_TAG}.whl"
    _raw_zip(path, members)
    return path


#: A METADATA shaped like a real torch wheel's: the quirks installers accept and strict validation flags.
TORCH_LIKE_METADATA = """\
Metadata-Version: {metadata_version}
Name: torch
Version: {version}
Summary: Tensors and Dynamic neural networks in Python with strong GPU acceleration
Home-page: https://pytorch.org/
Download-URL: https://github.com/pytorch/pytorch/tags
Author: PyTorch Team
Author-email: packages@pytorch.org
License: BSD-3-Clause
Keywords: pytorch,machine learning
Classifier: Development Status :: 5 - Production/Stable
Classifier: Intended Audience :: Developers
Classifier: License :: OSI Approved :: BSD License
Classifier: Programming Language :: C++
Classifier: Programming Language :: Python :: 3 :: Only
Requires-Python: >=3.10
Description-Content-Type: text/markdown
License-File: LICENSE
License-File: NOTICE
License-File: third_party/pybind11/LICENSE
Requires-Dist: filelock; extra == "full"
Requires-Dist: typing-extensions>=4.10.0; extra == "full"
Requires-Dist: setuptools; python_version >= "3.12" and extra == "full"
Requires-Dist: sympy>=1.13.3; extra == "full"
Requires-Dist: networkx>=2.5.1; extra == "full"
Requires-Dist: jinja2; extra == "full"
Requires-Dist: fsspec>=0.8.5; extra == "full"
Requires-Dist: pytorch-triton-rocm==3.6.0+git31a77fc; platform_system == "Linux" and platform_machine == "x86_64" and extra == "full"
Requires-Dist: nvidia-cuda-nvrtc-cu12==12.8.93; platform_system == "Linux" and platform_machine == "aarch64"
Requires-Dist: nvidia-cudnn-cu12==9.10.2.21; platform_system == "Windows"
Provides-Extra: full
Provides-Extra: optree
Requires-Dist: optree>=0.13.0; extra == "optree"
Provides-Extra: opt-einsum
Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"
Provides-Extra: pyyaml
Requires-Dist: pyyaml; extra == "pyyaml"
Dynamic: author
Dynamic: author-email
Dynamic: classifier
Dynamic: description
Dynamic: description-content-type
Dynamic: download-url
Dynamic: home-page
Dynamic: keywords
Dynamic: license
Dynamic: license-file
Dynamic: provides-extra
Dynamic: requires-dist
Dynamic: requires-python
Dynamic: summary

![PyTorch Logo](https://github.com/pytorch/pytorch/raw/main/docs/source/_static/img/pytorch-logo-dark.png)

--------------------------------------------------------------------------------

PyTorch is a Python package that provides two high-level features:
- Tensor computation (like NumPy) with strong GPU acceleration
- Deep neural networks built on a tape-based autograd system
{long_tail}"""


def torch_like_metadata(version: str, metadata_version: str = "2.1") -> bytes:
    """Torch's METADATA shape, ~200 KB of description (``License-File``/``Dynamic`` under 2.1 are quirks)."""
    tail = "".join(f"\n## Section {i}\n\nSome prose about building from source, ünïcödé included.\n"
                   for i in range(3000))
    return TORCH_LIKE_METADATA.format(metadata_version=metadata_version, version=version,
                                      long_tail=tail).encode()

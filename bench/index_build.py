#!/usr/bin/env python3
"""Benchmark ``rocm-bake index build`` against ``sha256sum`` over the same wheels.

Generates N wheels of S MB (default 40 × 50 MB; a real amd_aiter is 131–495
MB), each carrying an AMDGPU code object for the arch plus S MB of
incompressible payload, then in one process:

* ``sha256sum`` over the wheels (page cache warmed first, for every run),
  and, as a stricter baseline, one thread of ``hashlib`` (OpenSSL; coreutils'
  sha256sum often lacks SHA-NI, which flatters the first ratio);
* a cold ``build_index`` (no hash cache, no index) — target ≥ 0.9× the
  throughput of sha256sum;
* a warm rebuild over the unchanged wheels — target ≤ 2% of the cold time;
* resolve-only bytes: serve DIST on 127.0.0.1 and resolve
  ``rocm-torch[device-<arch>]`` with ``uv pip install --dry-run`` and with
  ``pip install --dry-run --report``; bytes served ÷ wheel bytes — target
  ≤ 1% (PEP 658 metadata). pip < 25.3 downloads every wheel after resolving
  even with ``--dry-run`` (pypa/pip#12603, fixed by #13482), so pip's figure
  is shown split into its resolve phase (pages + ``.metadata``) and the
  bodies it fetched afterwards.

Usage: ``python bench/index_build.py [--count 40] [--size-mb 50] [--arch gfx950]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rocm_bake.index.hashcache import sha256_file  # noqa: E402
from rocm_bake.index.build import build_index  # noqa: E402
from rocm_bake.index.check import clean_env, serve, uv_binary  # noqa: E402

MACH = {"gfx950": 0x4F, "gfx1201": 0x4E, "gfx1151": 0x4A, "gfx942": 0x4C, "gfx1250": 0x49}
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"


def code_object(arch: str) -> bytes:
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 4]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 224, 1, 0, 0, 0, MACH[arch] | 0x300, 64, 56, 0, 64, 0, 0)


def _rec(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(out: Path, index: int, arch: str, size: int) -> Path:
    name, version = f"benchpkg{index:03d}", "1.0.0+rocm10.1.0"
    info = f"{name}-{version}.dist-info"
    members = {
        f"{name}/__init__.py": b"",
        f"{name}/kernels/k.co": code_object(arch),
        f"{name}/lib/payload.bin": os.urandom(size),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode(),
    }
    record = "".join(f"{n},{_rec(d)},{len(d)}\n" for n, d in members.items()) + f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record.encode()
    path = out / f"{name}-{version}-{TAG}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


def warm_page_cache(paths: list[Path]) -> None:
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


def timed(fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def resolve_bytes(dist: Path, arch: str, work: Path) -> dict[str, int]:
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    req = f"rocm-torch[device-{arch}]"
    out: dict[str, int] = {}
    with serve(dist) as served:
        url = f"{served.url}/index/{arch}/"
        subprocess.run([uv_binary(), "pip", "install", "--dry-run", "--no-config", "--no-cache", "--python",
                        python, "--default-index", url, req], check=True, capture_output=True, env=clean_env())
        out["uv"] = sum(r.bytes for r in served.requests())
        served.reset()
        subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--isolated", "--dry-run",
                        "--report", str(work / "report.json"), "--no-cache-dir", "--index-url", url, req],
                       check=True, capture_output=True, env=clean_env(), cwd=work)
        requests = served.requests()
        out["pip_resolve"] = sum(r.bytes for r in requests if not r.path.endswith(".whl"))
        out["pip_bodies"] = sum(r.bytes for r in requests if r.path.endswith(".whl"))
        resolved = len(json.loads((work / "report.json").read_text())["install"])
        out["resolved"] = resolved
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--size-mb", type=float, default=50)
    parser.add_argument("--arch", default="gfx950", choices=sorted(MACH))
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp dir, removed afterwards")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rocm-bake-bench-", dir=args.workdir) as tmp:
        work = Path(tmp)
        dist = work / "dist"
        wheels_dir = dist / "wheels" / args.arch
        wheels_dir.mkdir(parents=True)
        size = int(args.size_mb * (1 << 20))
        print(f"generating {args.count} wheels x {args.size_mb:g} MB ...", flush=True)
        paths = [make_wheel(wheels_dir, i, args.arch, size) for i in range(args.count)]
        total = sum(p.stat().st_size for p in paths)
        warm_page_cache(paths)

        t_sum, _ = timed(lambda: subprocess.run(["sha256sum", *map(str, paths)], check=True,
                                                stdout=subprocess.DEVNULL))
        t_lib, _ = timed(lambda: [sha256_file(p) for p in paths])
        t_cold, cold = timed(lambda: build_index(args.arch, wheels_dir, dist))
        t_warm, warm = timed(lambda: build_index(args.arch, wheels_dir, dist))
        assert cold.index_sha256 == warm.index_sha256 and warm.hashed_bytes == 0  # type: ignore[attr-defined]
        res = resolve_bytes(dist, args.arch, work)

    mb = total / (1 << 20)
    print(f"wheels: {args.count}, {mb:.0f} MiB total")
    print(f"sha256sum:   {t_sum:7.3f} s  {mb / t_sum:8.1f} MiB/s")
    print(f"hashlib 1x:  {t_lib:7.3f} s  {mb / t_lib:8.1f} MiB/s   (stricter baseline: one thread, OpenSSL)")
    print(f"cold build:  {t_cold:7.3f} s  {mb / t_cold:8.1f} MiB/s   "
          f"throughput vs sha256sum: {t_sum / t_cold:.2f}x  (target >= 0.90x); "
          f"vs one-thread hashlib: {t_lib / t_cold:.2f}x")
    print(f"warm build:  {t_warm:7.3f} s   warm/cold: {100 * t_warm / t_cold:.2f}%  (target <= 2%)")
    print(f"resolve-only, uv --dry-run:        {res['uv']:>12,} bytes  "
          f"{100 * res['uv'] / total:.4f}% of wheel bytes  (target <= 1%)")
    print(f"resolve-only, pip resolve phase:   {res['pip_resolve']:>12,} bytes  "
          f"{100 * res['pip_resolve'] / total:.4f}% of wheel bytes  ({res['resolved']} resolved)")
    print(f"pip {pip_version()} then fetched bodies: {res['pip_bodies']:>12,} bytes  "
          f"{100 * res['pip_bodies'] / total:.1f}% (pip < 25.3 downloads after a --dry-run resolve)")
    return 0


def pip_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("pip")


if __name__ == "__main__":
    sys.exit(main())

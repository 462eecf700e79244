"""Write each arch's small, real test wheels for the CI two-arch index job.

Usage: python .github/scripts/make_test_wheels.py --out DIR ARCH...   (writes DIR/<arch>/*.whl)

Like the real stack, the filenames are the same for every arch and only the
device code inside differs: torch, torchvision and amd_aiter carry a gcc-built
``.so`` whose ``.hip_fatbin`` holds an offload bundle for its arch; triton
compiles no device code (plain ``.so``); triton_kernels is pure Python. The
versions follow the ROCm marker rules of ``rocm_bake.index.versions``, so ``rocm-bake index build``
accepts them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.index_fixtures import NATIVE_TAG, make_wheel  # noqa: E402
from tests.offload_fixtures import bundle, hip_ids, shared_object  # noqa: E402

ROCM = "10.1.0"
#: (dist, version, has device code)
WHEELS = [
    ("torch", f"2.15.0a0+git31a77fc.rocm{ROCM}", True),
    ("torchvision", f"0.24.0+rocm{ROCM}", True),
    ("amd_aiter", f"0.1.28+git5e1c0d2.rocm{ROCM}", True),
    ("triton", f"3.5.0+git8f3b2a1.rocm{ROCM}", False),
    ("triton_kernels", "1.0.0", None),
]


def build(arch: str, out: Path) -> list[Path]:
    """The test wheels for ``arch`` in ``out`` (created)."""
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for dist, version, device in WHEELS:
            if device is None:
                members = {f"{dist}/__init__.py": b"VERSION = 1\n"}
                made.append(make_wheel(out, dist, version, extra_files=members))
                continue
            fatbin = bundle(hip_ids(arch)) if device else None
            so = shared_object(Path(tmp) / dist, "_C", fatbin)
            members = {f"{dist}/__init__.py": f"ARCH = {arch!r}\n".encode(), f"{dist}/_C.so": so.read_bytes()}
            made.append(make_wheel(out, dist, version, extra_files=members, tag=NATIVE_TAG))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="one subdirectory per arch is written here")
    parser.add_argument("arches", nargs="+", metavar="ARCH")
    args = parser.parse_args(argv)
    for arch in args.arches:
        for wheel in build(arch, args.out / arch):
            print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Writers into the machine-wide cache (``~/.cache/rocm-bake``) never trip over each other.

Two checkouts' first ``make demo`` run ``dockerfiles/demo/base.py`` at the
same time; both must end with the one rootfs tarball, made once, with no
traceback and no temporary file left beside it. debootstrap and tar are
stand-ins on PATH here (the real debootstrap takes a minute and the network):
the stand-in tar waits (up to a few seconds) until both builds have written
their tarball, the moment two writers of one fixed name collide.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.engine_fixtures import ROOT

BASE = ROOT / "dockerfiles" / "demo" / "base.py"

FAKE_DEBOOTSTRAP = """#!/bin/sh
# debootstrap [options] SUITE TARGET MIRROR: a tiny rootfs, and one line per run in the count file
target=$(eval echo \\${$(($# - 1))})
mkdir -p "$target/usr/bin" && echo demo > "$target/usr/bin/stand-in"
echo run >> "$RB_TEST_DIR/debootstrap-runs"
"""

FAKE_TAR = """#!/bin/sh
# The real tar, then wait up to 3 s for the other build's tar to get this far too.
/bin/tar "$@" || exit $?
echo done >> "$RB_TEST_DIR/tars"
i=0
while [ "$(wc -l < "$RB_TEST_DIR/tars")" -lt 2 ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
"""


def stand_ins(bin_dir: Path) -> None:
    bin_dir.mkdir()
    for name, text in (("debootstrap", FAKE_DEBOOTSTRAP), ("tar", FAKE_TAR)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def test_two_first_demo_base_builds_at_once_make_one_rootfs_without_a_traceback(tmp_path: Path) -> None:
    stand_ins(tmp_path / "bin")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "RB_TEST_DIR": str(tmp_path),
           "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    builds = [subprocess.Popen([sys.executable, str(BASE), "--rootfs-only"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(build.wait(timeout=120), *build.communicate()) for build in builds]
    for rc, out, err in results:
        assert rc == 0 and "Traceback" not in err, f"a concurrent first demo-base build failed (rc {rc}):\n{err}"
    cache = tmp_path / "cache" / "rocm-bake" / "demo-base"
    tarballs = sorted(cache.rglob("rootfs.tar"))
    assert len(tarballs) == 1 and all(out.strip().splitlines()[-1] == str(tarballs[0]) for _, out, _ in results), results
    assert (tmp_path / "debootstrap-runs").read_text().count("run") == 1, "the second build did not wait for the first"
    leftovers = [p.name for p in tarballs[0].parent.iterdir() if p.name not in ("rootfs.tar", ".lock")]
    assert leftovers == [], f"temporary files left in the shared cache: {leftovers}"

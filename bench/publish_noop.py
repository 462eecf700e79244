"""Bench: a no-op republish (everything already on GitHub) vs the first publish, in one process.

Against the loopback fake GitHub with N synthetic 8 MiB wheels. Prints the
ratio no-op / first; a warm republish should cost reads only (no uploads,
no commit, hashes from the cache), so the ratio should be far below 1.
Run: ``python bench/publish_noop.py [N]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results import record, reset  # noqa: E402

from rocm_bake.archset import ArchSet  # noqa: E402
from rocm_bake.index.build import build_index  # noqa: E402
from rocm_bake.publish.publisher import Publisher  # noqa: E402
from tests.fake_github import FakeGitHub  # noqa: E402
from tests.index_fixtures import make_wheel  # noqa: E402
from tests.publish_fixtures import make_client  # noqa: E402


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeGitHub() as gh:
        wheels = Path(tmp) / "wheels"
        for i in range(n):
            make_wheel(wheels, f"pkg{i}", "1.0", extra_files={f"pkg{i}/blob.bin": os.urandom(8 << 20)})
        dist = Path(tmp) / "dist"
        arch = ArchSet("gfx950")
        build_index(arch, wheels, dist)
        t0 = time.perf_counter()
        first = Publisher(make_client(gh), arch, dist).run()
        t1 = time.perf_counter()
        again = Publisher(make_client(gh), arch, dist).run()
        t2 = time.perf_counter()
        assert again.uploads == 0 and again.commits == 0
        print(f"first publish: {t1 - t0:.3f} s ({first.uploads} uploads, {first.commits} commit)")
        print(f"no-op publish: {t2 - t1:.3f} s (0 uploads, 0 commits)")
        print(f"ratio no-op/first: {(t2 - t1) / (t1 - t0):.3f}")
        reset("publish")
        record("publish", "no-op republish", subject=f"publish again, nothing changed ({t2 - t1:.3f} s, 0 writes)",
               baseline=f"the first publish of {n} x 8 MiB wheels ({t1 - t0:.3f} s, {first.uploads} uploads)",
               ratio=(t2 - t1) / (t1 - t0), goal="far below 1: reads only", met=(t2 - t1) / (t1 - t0) < 0.5,
               note="loopback GitHub REST server")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)

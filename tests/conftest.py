"""Shared pytest setup: the repo root on sys.path so ``components`` imports."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


import os  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def public_index_stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The public index every index build's lock resolves against: an empty simple index on loopback, never PyPI.

    The test wheels need nothing from a public index, so an empty one resolves
    their locks; the squatter tests serve their own stand-in with content.
    """
    from rocm_bake.index.check import serve
    from rocm_bake.index.defaults import PUBLIC_INDEX_ENV

    root = tmp_path_factory.mktemp("public-index")
    (root / "simple").mkdir()
    (root / "simple" / "index.html").write_text("<!DOCTYPE html><html><body></body></html>\n")
    before = os.environ.get(PUBLIC_INDEX_ENV)
    with serve(root) as served:
        os.environ[PUBLIC_INDEX_ENV] = f"{served.url}/simple/"
        yield os.environ[PUBLIC_INDEX_ENV]
    if before is None:
        os.environ.pop(PUBLIC_INDEX_ENV, None)
    else:
        os.environ[PUBLIC_INDEX_ENV] = before

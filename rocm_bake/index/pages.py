"""The index's HTML pages (PEP 503 root and per-project pages, PEP 658/714 links) and the tree digest.

Every link carries ``#sha256=``, and ``data-dist-info-metadata`` /
``data-core-metadata`` so resolvers read the ``.metadata`` file instead of the
wheel; with a wheel URL the hrefs point there (e.g. a GitHub release).
"""

from __future__ import annotations

import hashlib
import html
from urllib.parse import quote

from rocm_bake.archset import ArchSet
from rocm_bake.index.defaults import FILES_DIR, GENERATOR_TAG
from rocm_bake.index.models import PlannedWheel
from rocm_bake.index.versions import METAPACKAGE


def _page(title: str, body: list[str]) -> bytes:
    lines = [
        "<!DOCTYPE html>",
        "<html>",
        "  <head>",
        '    <meta name="pypi:repository-version" content="1.0">',
        f"    {GENERATOR_TAG}",
        f"    <title>{html.escape(title)}</title>",
        "  </head>",
        "  <body>",
        *(f"    {line}<br>" for line in body),
        "  </body>",
        "</html>",
        "",
    ]
    return "\n".join(lines).encode()


def wheel_href(filename: str, sha256: str, wheel_url: str | None) -> str:
    base = wheel_url if wheel_url is not None else f"../{FILES_DIR}"
    return f"{base}/{quote(filename)}#sha256={sha256}"


def anchor(wheel: PlannedWheel, wheel_url: str | None) -> str:
    meta = "sha256=" + hashlib.sha256(wheel.metadata).hexdigest()
    attrs = [f'href="{html.escape(wheel_href(wheel.filename, wheel.sha256, wheel_url))}"']
    if wheel.requires_python:
        attrs.append(f'data-requires-python="{html.escape(wheel.requires_python)}"')
    attrs += [f'data-dist-info-metadata="{meta}"', f'data-core-metadata="{meta}"']
    return f"<a {' '.join(attrs)}>{html.escape(wheel.filename)}</a>"


def render_pages(arch: ArchSet, wheels: list[PlannedWheel], wheel_url: str | None) -> dict[str, bytes]:
    projects: dict[str, list[PlannedWheel]] = {}
    for wheel in wheels:
        projects.setdefault(wheel.project, []).append(wheel)
    pages = {
        "index.html": _page(
            f"rocm-bake index for {arch}",
            [f'<a href="{p}/">{p}</a>' for p in sorted(projects)],
        )
    }
    for project, group in sorted(projects.items()):
        pages[f"{project}/index.html"] = _page(
            f"Links for {project} ({arch})",
            [anchor(w, wheel_url) for w in sorted(group, key=lambda w: w.filename)],
        )
    return pages


def exposed_pins(wheels: list[PlannedWheel]) -> list[str]:
    """``name==version`` of every pinned wheel whose version has no local segment (PyPI could host it too)."""
    from packaging.version import Version

    return [f"{w.project}=={w.version}" for w in sorted(wheels, key=lambda w: w.project)
            if w.project != METAPACKAGE and Version(w.version).local is None]


def tree_digest(pages: dict[str, bytes], wheels: list[PlannedWheel]) -> str:
    """sha256 over (relative path, sha256) of every file the index holds, sorted."""
    entries = {path: hashlib.sha256(data).hexdigest() for path, data in pages.items()}
    for w in wheels:
        entries[f"{FILES_DIR}/{w.filename}"] = w.sha256
        entries[f"{FILES_DIR}/{w.filename}.metadata"] = hashlib.sha256(w.metadata).hexdigest()
    body = "".join(f"{path}\0{sha}\n" for path, sha in sorted(entries.items()))
    return hashlib.sha256(body.encode()).hexdigest()

"""The ``rocm_torch`` package inside the metapackage: the checker and the rocm-bake modules it runs on.

One source, no second implementation: the KFD reader (``rocm_bake.gpu.kfd``),
the offload-bundle reader (``rocm_bake.offload``), the install-line writer
and the checker itself (``rocm_bake.fit_check``) are copied from this
rocm-bake, with their ``rocm_bake.`` imports pointed at ``rocm_torch._bake.``.
The copy is refused, naming the module and the import, when any copied module
would import something that is neither the standard library nor another
copied module, or anything that can reach the network: the checker runs on a
user's Python with nothing but the metapackage installed, and only reads.

Deterministic: the payload is a pure function of these source files and the
index's record (``index.json``, keys sorted), so the metapackage stays
byte-for-byte reproducible.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from pathlib import Path

from rocm_bake.errors import RocmBakeError

PACKAGE = "rocm_torch"
#: Where the copies live inside the package.
COPIED_INTO = f"{PACKAGE}._bake"
#: The modules the checker needs, relative to the rocm_bake package (the checker's own imports, closed over).
COPIED = (
    "errors.py", "zstd.py", "install_line.py", "fit_check.py", "gpu/kfd.py",
    "offload/targets.py", "offload/formats.py", "offload/source.py", "offload/scan.py",
)
#: Optional, guarded imports a copied module may make (the zstd module: stdlib from 3.14, a backport before).
OPTIONAL = frozenset({"backports", "compression"})
#: Standard-library modules the checker must never import: it never reaches the network nor runs programs.
FORBIDDEN = frozenset({"socket", "ssl", "http", "urllib", "ftplib", "smtplib", "asyncio", "subprocess", "xmlrpc"})
#: Modules of those packages that only parse strings (a URL's parts): allowed.
PARSING_ONLY = frozenset({"urllib.parse"})
RECORD_NAME = "index.json"

_SOURCE_ROOT = Path(__file__).resolve().parents[1]
_IMPORT_LINE = re.compile(r"^(\s*(?:from|import)\s+)rocm_bake\.", re.MULTILINE)

INIT = '''"""rocm-torch's checker: run ``python -m rocm_torch`` to check the installed wheels fit this machine.

Nothing is imported here: the check runs only when asked.
"""
'''
MAIN = '''"""``python -m rocm_torch [check] [--sysfs-root DIR] [--json]``."""

import sys

sys.dont_write_bytecode = True  # the checker only reads: no bytecode cache written for what it imports

from pathlib import Path  # noqa: E402

from rocm_torch._bake.fit_check import main  # noqa: E402

sys.exit(main(sys.argv[1:], Path(__file__).with_name("index.json")))
'''


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import a module can run (those under ``if TYPE_CHECKING:`` never do)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def _copied_modules() -> set[str]:
    names = {f"{COPIED_INTO}.{rel[:-3].replace('/', '.')}" for rel in COPIED}
    return names | {COPIED_INTO} | {f"{COPIED_INTO}.{rel.rsplit('/', 1)[0]}" for rel in COPIED if "/" in rel}


def check_imports(rel: str, text: str) -> None:
    """Refuse a copied module that imports anything but the standard library and the other copies."""
    copied = _copied_modules()
    for node in _imports(ast.parse(text, filename=rel)):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if isinstance(node, ast.ImportFrom) and node.module in copied:  # `from package import module`
            modules += [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in copied]
        for module in modules:
            top = module.split(".", 1)[0]
            if top in FORBIDDEN and module not in PARSING_ONLY:
                raise RocmBakeError(f"rocm_bake/{rel}: imports {module}, which can reach the network or run "
                                    f"programs: the rocm_torch checker only reads")
            if module in copied or top in OPTIONAL or top == "__future__" or top in sys.stdlib_module_names:
                continue
            raise RocmBakeError(f"rocm_bake/{rel}: imports {module}, which is neither the standard library nor "
                                f"copied into the metapackage (the rocm_torch checker runs on the standard library)")


def copy_module(rel: str) -> bytes:
    """One rocm_bake module as the package carries it: ``rocm_bake.`` imports pointed at the copies."""
    text = _IMPORT_LINE.sub(rf"\g<1>{COPIED_INTO}.", (_SOURCE_ROOT / rel).read_text(encoding="utf-8"))
    check_imports(rel, text)
    return text.encode()


@functools.cache
def code_members() -> tuple[tuple[str, bytes], ...]:
    """Every code file of the package, by wheel path (the same for every index: built once per process)."""
    base = COPIED_INTO.replace(".", "/")
    members = {f"{PACKAGE}/__init__.py": INIT.encode(), f"{PACKAGE}/__main__.py": MAIN.encode(),
               f"{base}/__init__.py": b""}
    for rel in COPIED:
        if "/" in rel:
            members[f"{base}/{rel.rsplit('/', 1)[0]}/__init__.py"] = b""
        members[f"{base}/{rel}"] = copy_module(rel)
    for path, data in members.items():
        if path.endswith("__main__.py") or path.endswith("/__init__.py"):
            check_imports(path, data.decode())
    return tuple(sorted(members.items()))


def package_members(record: dict[str, object]) -> dict[str, bytes]:
    """The whole ``rocm_torch`` package: the code and the index's record (``index.json``)."""
    members = dict(code_members())
    members[f"{PACKAGE}/{RECORD_NAME}"] = (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()
    return members

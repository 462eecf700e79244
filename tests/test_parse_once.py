"""Parse once at the edge: only edge functions construct an ``ArchSet``/``Arch``; nothing re-parses an arch.

An AST scan of the program (``rocm_bake/``, ``components/``, ``policy/``,
``__main__.py``). A call of ``ArchSet(...)`` or ``Arch(...)`` is a parse,
allowed only in the edges listed in ``EDGES`` (each with why it is one).
Arch types and helpers that re-parse a value every time they are used
(``IndexTarget``, ``RocmArch``, ``parse_rocm_arch``, ``validate_arch``,
``dir_name_of``) are refused outright: any mention of them (an import, a
call, an attribute).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("rocm_bake", "components", "policy", "__main__.py")

#: Calls that parse an arch value.
PARSERS = frozenset({"ArchSet", "Arch"})
#: Names of the replaced arch types and helpers: every use of one is a re-parse (or leads to one).
RETIRED = frozenset({"IndexTarget", "RocmArch", "parse_rocm_arch", "validate_arch", "dir_name_of"})

#: (file, function) where an arch value enters the program and is parsed, once. ``*``: the whole module.
EDGES: dict[tuple[str, str], str] = {
    ("rocm_bake/archset.py", "*"): "defines the types: ArchSet's validation parses each part as an Arch",
    ("rocm_bake/commands/arches.py", "parse_arches"): "an ARCHES value: the --arches argument's type and $ARCHES",
    ("rocm_bake/arch_rules.py", "declared_arch_set"): "an arch a declared resource carries, as the engine hands it "
                                                      "to the policy pack",
    ("rocm_bake/registry/tags.py", "tag_arch_set"): "an image tag read back from a registry",
    ("rocm_bake/gpu/which.py", "configured_indexes"): "a stack file's rocm-bake:pytorchRocmArch, read from disk",
    ("rocm_bake/commands/arches.py", "stack_passes"): "a stack file's rocm-bake:pytorchRocmArch, read from disk "
                                                      "for a stack named by --stacks",
}

#: Files that still re-parse, owned by work under way elsewhere: ignored here, and this set must become empty.
#: A file that no longer violates fails ``test_pending_files_still_violate`` so that it is taken off.
PENDING: frozenset[str] = frozenset()


def python_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def _name(node: ast.AST) -> str | None:
    """``ArchSet`` for ``ArchSet`` and for ``archset.ArchSet``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def findings(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, enclosing function's qualified name, what) for every parse and every retired name."""

    def walk(node: ast.AST, scope: str) -> Iterator[tuple[int, str, str]]:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Call) and _name(child.func) in PARSERS:
                yield child.lineno, scope, f"calls {_name(child.func)}(...)"
            elif isinstance(child, (ast.Name, ast.Attribute)) and _name(child) in RETIRED:
                yield child.lineno, scope, f"uses {_name(child)}"
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                for alias in child.names:
                    if alias.name.rsplit(".", 1)[-1] in RETIRED or alias.name.endswith("index.target"):
                        yield child.lineno, scope, f"imports {alias.name}"
                if isinstance(child, ast.ImportFrom) and (child.module or "").endswith("index.target"):
                    yield child.lineno, scope, f"imports from {child.module}"
            yield from walk(child, inner)

    yield from walk(tree, "")


def allowed(rel: str, scope: str) -> bool:
    """An edge: the function itself, or a function nested in it (argparse's converter, a lambda's parent)."""
    return (rel, "*") in EDGES or any(
        rel == path and (scope == func or scope.startswith(func + ".")) for path, func in EDGES
    )


def scan() -> dict[str, list[str]]:
    """Violations by file (relative path), each ``file:line in function: what``."""
    found: dict[str, list[str]] = {}
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for line, scope, what in findings(tree):
            if not allowed(rel, scope):
                found.setdefault(rel, []).append(f"{rel}:{line} in {scope or '<module>'}: {what}")
    return found


def test_no_arch_is_parsed_past_the_edge() -> None:
    violations = [v for rel, found in sorted(scan().items()) if rel not in PENDING for v in found]
    assert not violations, (
        "an arch value is parsed past the edge (take ArchSet/Arch in the signature instead, or add a real "
        "edge to EDGES with its reason):\n  " + "\n  ".join(violations)
    )


def test_pending_files_still_violate() -> None:
    """PENDING only shrinks: a file that is clean now is taken off it, so it can never regress unseen."""
    clean = sorted(PENDING - set(scan()))
    assert not clean, f"no longer re-parse an arch; remove from PENDING: {', '.join(clean)}"


def test_every_edge_exists() -> None:
    """An allowlisted edge that is gone (renamed, removed) is a stale entry, not a licence for its successor."""
    defined: set[tuple[str, str]] = set()
    for path in python_files():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add((rel, node.name))
        defined.add((rel, "*"))
    stale = sorted(f"{rel}:{func}" for rel, func in EDGES if (rel, func.rsplit(".", 1)[-1]) not in defined)
    assert not stale, f"EDGES names functions that no longer exist: {', '.join(stale)}"


def test_the_scan_finds_a_re_parse() -> None:
    """The scanner itself: a parse inside an ordinary function is found, with its line and function."""
    source = (
        "from rocm_bake.archset import ArchSet\n"
        "from rocm_bake.index.target import IndexTarget\n"
        "def index_dir(dist, arch):\n"
        "    return dist / ArchSet(arch).dir_name\n"
    )
    assert list(findings(ast.parse(source))) == [
        (2, "", "imports IndexTarget"),
        (2, "", "imports from rocm_bake.index.target"),
        (4, "index_dir", "calls ArchSet(...)"),
    ]

"""The shape of the package: no import cycle (lazy imports included) and no oversized module
(in the integration packages too).

The layers and the independence of the stages are checked by ``lint-imports`` (contracts in
``pyproject.toml``); a cycle inside one layer is caught here.
"""

from __future__ import annotations

from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ctxplugin"
INTEGRATIONS = sorted(init.parent for init in ROOT.glob("integrations/*/*/__init__.py") if init.parent.name != "tests")

MAX_LINES = 400


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle() -> None:
    graph = grimp.build_graph("ctxplugin", exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def test_modules_stay_small() -> None:
    assert {"ctxplugin_langgraph", "ctxplugin_postgres"} <= {p.name for p in INTEGRATIONS}, INTEGRATIONS
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for package in (PACKAGE, *INTEGRATIONS)
        for path in package.rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_importing_the_package_leaves_numpy_and_the_stores_for_first_use() -> None:
    """``import ctxplugin`` in a fresh interpreter: numpy (the array scoring, the static embedding)
    and chromadb load when first used, not with the package."""
    import subprocess
    import sys

    probe = "import sys, ctxplugin; print(sorted(m for m in ('numpy', 'chromadb') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"

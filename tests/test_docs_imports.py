"""Every Python block of the README and the user guide compiles, and every name it imports exists.

The blocks that can run offline are run by ``test_readme.py`` and ``test_docs_examples.py``; this
catches the others (a hosted model, a server) when a name they import is renamed or removed. An
import of a third-party package that is not installed is left out: the page names its install."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
OURS = {"ctxplugin", "ctxplugin_langgraph", "ctxplugin_postgres"}


def imported(page: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each import of the page's Python blocks (``name`` None for ``import m``)."""
    found: list[tuple[str, str | None]] = []
    for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # a block may `async for` at top level
        tree = compile(block, str(page), "exec", flags=flags, dont_inherit=True)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                found += [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(alias.name, None) for alias in node.names]
    return found


def submodule(module: str, name: str) -> bool:
    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except ModuleNotFoundError:  # ``module`` is not a package
        return False


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_blocks_compile_and_import_names_that_exist(page: Path) -> None:
    missing = []
    for module, name in imported(page):
        top = module.split(".")[0]
        if top not in OURS and importlib.util.find_spec(top) is None:
            continue
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{module}: {exc}")
            continue
        if name is not None and not hasattr(loaded, name) and not submodule(module, name):
            missing.append(f"from {module} import {name}")
    assert not missing, f"{page.name}: " + "; ".join(missing)

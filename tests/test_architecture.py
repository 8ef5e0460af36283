"""The house in layers (docs/ARCHITECTURE.md), checked from the source alone: every import of every
module of tb_hwprof, those inside functions included, is read with ast (nothing is imported), and

- each layer imports only the layers below it (core <- readers, analysis, logdir <- app <- entry;
  the plugin serves what logdir loads and computes through analysis);
- no module imports itself back through others (no circle, deferred imports included);
- at most 7 modules lie directly in tb_hwprof/ (the public entry points and nothing else).

The checker is itself checked on planted imports: a wall it does not see would pass everything."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tb_hwprof"
# The modules users import by name (tb_hwprof.read/export/..., tb_hwprof.torch.trace_handler,
# tb_hwprof.profile_env.step, python -m tb_hwprof): facades over the layers, which they may use.
ENTRY = {"tb_hwprof", "tb_hwprof.__main__", "tb_hwprof.torch", "tb_hwprof.profile_env"}
# What each layer may import (itself included).
ALLOWED = {
    "core": {"core"},
    "readers": {"core", "readers"},
    "analysis": {"core", "analysis"},
    "logdir": {"core", "logdir"},
    "app": {"core", "readers", "analysis", "logdir", "app"},
    "plugin": {"core", "analysis", "logdir", "plugin"},
    "entry": {"core", "readers", "analysis", "logdir", "app", "entry"},
}
# profile_boot/ is put on a profiled program's PYTHONPATH by `profile` (app) and imports nothing of ours.
LAYER_OF_FOLDER = {"profile_boot": "app"}
MAX_TOP_MODULES = 7


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> str:
    if module in ENTRY:
        return "entry"
    folder = module.split(".")[1]
    return LAYER_OF_FOLDER.get(folder, folder)


def imported(module: str, is_package: bool, source: str, known: Set[str]) -> Iterator[Tuple[int, str]]:
    """(line, module of ours) of every import in `source`, at any depth: `from X import name` names
    module X.name where that is a module, else X."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tb_hwprof":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "tb_hwprof":
                continue
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target


def import_graph() -> Dict[str, List[Tuple[int, str]]]:
    found = modules()
    return {m: [(line, t) for line, t in imported(m, p.name == "__init__.py", p.read_text(encoding="utf-8"), set(found))
                if t != m]
            for m, p in found.items()}


def wall_crossings(graph) -> List[str]:
    return [f"{m}:{line} imports {t} ({layer(m)} may not import {layer(t)})"
            for m, targets in sorted(graph.items()) for line, t in targets
            if layer(t) not in ALLOWED[layer(m)]]


def circles(graph) -> List[List[str]]:
    """The strongly connected groups of more than one module (Tarjan), iteratively."""
    edges = {m: sorted({t for _, t in targets if t in graph}) for m, targets in graph.items()}
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_every_import_stays_inside_its_layers_walls():
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    assert wall_crossings(graph) == []


def test_no_module_imports_itself_back():
    assert circles(import_graph()) == []


def test_only_the_entry_points_lie_directly_in_the_package():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    assert {module_name(PACKAGE / name) for name in top} <= ENTRY | {"tb_hwprof"}, top


def test_every_folder_is_a_known_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders - set(LAYER_OF_FOLDER) == set(ALLOWED) - {"entry"}


# -- the checker, on planted imports ---------------------------------------------------------------
@pytest.mark.parametrize("module, is_package, source, crossing", [
    ("tb_hwprof.logdir.reader", False, "def f():\n    from ..analysis.pipeline import ANALYSIS_SUMMARIES\n", True),
    ("tb_hwprof.analysis.trace_views", False, "from ..logdir import trace\n", True),
    ("tb_hwprof.plugin.views", False, "from ..app.compare_cli import load_side\n", True),
    ("tb_hwprof.readers.nvidia.ncu_rep", False, "import tb_hwprof.analysis.roofline\n", True),
    ("tb_hwprof.core", True, "from ..readers import detect\n", True),
    ("tb_hwprof.analysis.pipeline", False, "from ..core.findings import Analysis\n", False),
    ("tb_hwprof.app.export", False, "from ..logdir.writer import StagedRun\n", False),
    ("tb_hwprof.plugin.views", False, "from ..analysis import compare\n", False),
])
def test_the_checker_sees_a_planted_crossing(module, is_package, source, crossing):
    graph = {module: list(imported(module, is_package, source, set(modules())))}
    assert graph[module]
    assert bool(wall_crossings(graph)) == crossing


def test_the_checker_sees_a_planted_circle():
    graph = {"tb_hwprof.analysis.a": [(1, "tb_hwprof.analysis.b")], "tb_hwprof.analysis.b": [(3, "tb_hwprof.analysis.c")],
             "tb_hwprof.analysis.c": [(9, "tb_hwprof.analysis.a")], "tb_hwprof.analysis.d": [(1, "tb_hwprof.analysis.a")]}
    assert circles(graph) == [["tb_hwprof.analysis.a", "tb_hwprof.analysis.b", "tb_hwprof.analysis.c"]]

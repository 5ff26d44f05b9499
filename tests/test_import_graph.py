"""Layers import one way: the import graph of the ``mpl`` package, read statically from the
source (``ast``, nothing is imported), has no cycle.

What counts as an edge (docs/internals.md, "Import graph"):

* every ``import`` / ``from ... import`` statement of an ``mpl`` module that names an ``mpl``
  module, whether it runs when the module is imported (module level) or on first use (inside
  a function: a lazy import postpones the cost, it is still a dependency). Both kinds are
  reported with their file and line, and neither may close a cycle;
* ``from P import name`` is an edge to the submodule ``P.name`` when there is one, else to
  ``P``; relative imports are resolved;
* a package's ``__init__`` running because one of its submodules is imported is not an edge
  (Python handles a package and its submodules importing each other), and neither are the
  name tables resolved with ``importlib`` (``mpl.__init__``'s lazy public names, the
  offload package's, the CLI's subcommands).
"""

from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "mpl")


def _modules() -> dict[str, str]:
    """module name -> source path, for every .py file of the mpl package."""
    out = {}
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
            out[name.removesuffix(".__init__")] = path
    return out


def _edges(name: str, path: str, modules) -> list[tuple[str, bool, int]]:
    """(imported module, at module level?, line) for each import of an mpl module."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = []

    def walk(node, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
            if isinstance(child, ast.Import):
                out.extend((a.name, top, child.lineno) for a in child.names if a.name in modules)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (child.level - 1)]
                    base = ".".join(parts + ([child.module] if child.module else []))
                for a in child.names:
                    target = f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    if target in modules:
                        out.append((target, top, child.lineno))
            walk(child, inner)

    walk(tree, True)
    return out


def find_cycles(graph: dict[str, set]) -> list[list[str]]:
    """The cycles of ``graph`` (node -> successors): one list of nodes for each strongly
    connected component of more than one node, or a node importing itself."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):                      # Tarjan, iteratively (no recursion limit)
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph.get(node, ()):
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _graph(module_level_only: bool):
    modules = _modules()
    edges = {m: _edges(m, p, modules) for m, p in modules.items()}
    graph = {m: {t for t, top, _ in es if t != m and (top or not module_level_only)}
             for m, es in edges.items()}
    return modules, edges, graph


def _explain(cycle, edges, modules) -> str:
    members = set(cycle)
    lines = []
    for m in cycle:
        for t, top, line in edges[m]:
            if t in members and t != m:
                where = os.path.relpath(modules[m], ROOT)
                lines.append(f"  {where}:{line}: {m} -> {t} ({'module level' if top else 'in a function'})")
    return "\n".join(lines)


def test_the_cycle_finder_finds_cycles():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"a"}}) == [["a"]]
    assert find_cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_walker_reads_both_kinds_of_import():
    modules, edges, _ = _graph(False)
    assert len(modules) > 50 and "mpl.runtime.core" in modules
    core = {(t, top) for t, top, _ in edges["mpl.runtime.core"]}
    assert ("mpl.runtime.eviction", True) in core            # from mpl.runtime.eviction import
    api = {(t, top) for t, top, _ in edges["mpl.api"]}
    assert ("mpl.schema", True) in api and ("mpl.sim.replay", False) in api
    engine = {t for t, _, _ in edges["mpl.offload.engine"]}
    assert "mpl.offload.cpu" in engine                        # from .cpu import (relative)


def test_module_level_imports_have_no_cycle():
    modules, edges, graph = _graph(True)
    cycles = find_cycles(graph)
    assert not cycles, "\n".join(_explain(c, edges, modules) for c in cycles)


def test_no_cycle_even_counting_imports_inside_functions():
    modules, edges, graph = _graph(False)
    cycles = find_cycles(graph)
    assert not cycles, "\n".join(_explain(c, edges, modules) for c in cycles)


def test_the_runtime_imports_only_the_runtime_and_the_schema_table():
    # ARCHITECTURE: the runtime never imports the compiler; a compiled module runs with
    # mpl.runtime alone (tests/test_codegen.py checks sys.modules after importing it). The
    # one exception is the schema, the table everything reads (the required
    # cache.capacity has one source): it is data and imports nothing of mpl
    modules, edges, _ = _graph(False)
    outside = [(m, t, line) for m, es in edges.items() if m.startswith("mpl.runtime")
               for t, _, line in es if not t.startswith("mpl.runtime") and t != "mpl.schema"]
    assert outside == []
    assert [t for t, _, _ in edges.get("mpl.schema", ())] == []


def test_replay_takes_a_policy_and_never_imports_the_api():
    # the text-to-policy step of a replay is the API's (mpl.api.load_for_replay): the
    # replayer and what it uses never import the API (the sim package's public names reach
    # it, for mpl.sim.replay(text); the sweep, which varies policy text, is a client of it)
    modules, edges, _ = _graph(False)
    seen, todo = set(), ["mpl.sim.replay"]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(t for t, _, _ in edges[m])
    assert "mpl.api" not in seen and "mpl.codegen" not in seen and "mpl.sim.sweep" not in seen


_CONSUMERS = ("mpl.offload", "mpl.vllm", "mpl.sim")
#: what they share instead: the trace data and its file formats, and the simulated-time model
_SHARED = ("mpl.trace", "mpl.traceio", "mpl.engine_formats", "mpl.timemodel", "mpl.mechanism")


def _within(module: str, packages) -> str | None:
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def test_offload_vllm_and_sim_never_import_each_other():
    # ARCHITECTURE: offload/ (the live mechanism), vllm/ (the serving integration) and sim/
    # (the offline workbench) consume the runtime's Plan and share the trace format; none of
    # them imports another, at module level or inside a function (docs/internals.md, "Where
    # each job lives")
    modules, edges, _ = _graph(False)
    crossing = [f"{os.path.relpath(modules[m], ROOT)}:{line}: {m} -> {t}"
                for m, es in edges.items() if _within(m, _CONSUMERS)
                for t, _, line in es
                if _within(t, _CONSUMERS) not in (None, _within(m, _CONSUMERS))]
    assert crossing == [], "\n".join(crossing)


def test_what_they_share_reaches_none_of_them():
    # the shared modules are neutral ground: nothing they import, however indirectly, is one
    # of the three consumers (so no import between them is laundered through a shared one)
    modules, edges, _ = _graph(False)
    shared = [m for m in modules if _within(m, _SHARED)]
    assert {"mpl.traceio", "mpl.engine_formats", "mpl.timemodel.timeline",
            "mpl.timemodel.hardware"} <= set(shared)
    for start in shared:
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(t for t, _, _ in edges[m])
        assert [m for m in seen if _within(m, _CONSUMERS)] == [], start


#: what the mechanism may never reach: the engine adapters and the workbench (the three
#: consumers above), and the layers above it that reach them (the API's Policy.attach and
#: Policy.replay, the CLI, the tuner) or that only the front end's clients use
_ABOVE_THE_MECHANISM = ("mpl.api", "mpl.cli", "mpl.codegen", "mpl.tune", "mpl.tune_search",
                        "mpl.tune_predict", "mpl.dsl")


def test_the_mechanism_reaches_no_adapter_and_no_api():
    # mechanism/ is the engine-neutral layer both adapters stand on (docs/internals.md,
    # "Mechanism"): the slot pool and host store, the executor and the plan-execution steps
    # (the runtime's Plan, the trace records), the shadow (the neutral time model) and the
    # preflight (the checker's model-aware rules). It takes a loaded policy from its caller,
    # so it never needs the API, which reaches the adapters (Policy.attach) and the workbench
    modules, edges, _ = _graph(False)
    for start in (m for m in modules if _within(m, ("mpl.mechanism",))):
        seen, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(t for t, _, _ in edges[m])
        bad = sorted(m for m in seen if _within(m, _CONSUMERS + _ABOVE_THE_MECHANISM))
        assert bad == [], f"{start} reaches {bad}"

"""The package's shape holds: no layer imports one above it, the CLI reaches the models only through
planning, and no two modules import each other in a circle (``docs/extending.md``, ``pyproject.toml``'s
``[tool.importlinter]``). Each check is also shown to fail on a graph with one bad import added."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LAYERS = next(c for c in CONFIG["contracts"] if c["type"] == "layers")["layers"]
CLI_RULE = next(c for c in CONFIG["contracts"] if c["type"] == "forbidden")


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("prfaas_plan", cache_dir=None)


def _layers():
    return [grimp.Layer(*[m.strip() for m in layer.split("|")], independent=True) for layer in LAYERS]


def _upward(graph) -> list[str]:
    return [f"{d.importer} -> {d.imported}" for d in graph.find_illegal_dependencies_for_layers(layers=_layers())]


def _cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in adj:
        if root in index:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        group.append(x)
                        if x == v:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))
            elif w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(adj.get(w, ()))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def test_every_subpackage_has_a_layer(graph):
    placed = {m.strip() for layer in LAYERS for m in layer.split("|")}
    top = {m for m in graph.find_children("prfaas_plan") if not m.endswith(("__main__",))}
    assert top - placed == set(), "give every new top-level module a layer in pyproject.toml"


def test_no_layer_imports_one_above_it(graph):
    assert _upward(graph) == []


def test_no_import_cycle(graph):
    assert _cycles(graph) == []


def test_the_checks_catch_a_bad_import(graph):
    graph.add_import(importer="prfaas_plan.arithmetic", imported="prfaas_plan.planning.plans")
    try:
        assert any(d.startswith("prfaas_plan.arithmetic -> prfaas_plan.planning") for d in _upward(graph))
        assert any("prfaas_plan.arithmetic" in group for group in _cycles(graph))
    finally:
        graph.remove_import(importer="prfaas_plan.arithmetic", imported="prfaas_plan.planning.plans")


def _cli_reaches_models(graph) -> list[str]:
    """Direct imports from the CLI into a module the CLI may not import (it only parses, asks
    `prfaas_plan.planning` and renders with `prfaas_plan.output`)."""
    [cli] = CLI_RULE["source_modules"]
    forbidden = CLI_RULE["forbidden_modules"]
    return [f"{m} -> {i}" for m in sorted(graph.find_descendants(cli) | {cli})
            for i in sorted(graph.find_modules_directly_imported_by(m))
            if any(i == f or i.startswith(f + ".") for f in forbidden)]


def test_the_cli_imports_no_model(graph):
    assert _cli_reaches_models(graph) == []


@pytest.mark.parametrize("imported", ["prfaas_plan.arithmetic", "prfaas_plan.performance.roofline",
                                      "prfaas_plan.simulator.plot", "prfaas_plan.workload.workloads"])
def test_the_cli_rule_catches_a_model_import(graph, imported):
    graph.add_import(importer="prfaas_plan.cli.perf_cmds", imported=imported)
    try:
        assert _cli_reaches_models(graph) == [f"prfaas_plan.cli.perf_cmds -> {imported}"]
    finally:
        graph.remove_import(importer="prfaas_plan.cli.perf_cmds", imported=imported)


def test_import_linter_contracts_are_kept(monkeypatch):
    """The same contracts through import-linter itself (what ``lint-imports`` runs in CI)."""
    from importlinter.cli import lint_imports

    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0

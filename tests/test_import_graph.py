"""The shared package's import graph, read from the source with `ast` (nothing is imported).

DESIGN.md "Layering and imports": project modules imported at the top of a file; the package reads
bottom-up in layers (LAYERS below), nothing lower imports anything higher, and no circles.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("relrl", "generators", "evaluation", "training", "benchmarks", "demo")
SCRIPT_DIRS = ("relrl", "training", "evaluation", "generators", "benchmarks")

# Bottom to top. A module may import modules of its own layer or of lower ones.
LAYERS = [
    ("pure logic", {"relrl", "relrl.cli", "relrl.grading", "relrl.stats", "relrl.clustered_stats",
                    "relrl.prompting", "relrl.dynamic_sampling", "relrl.grpo_loss", "relrl.dpo_loss",
                    "relrl.retention", "relrl.rewards", "relrl.folds", "relrl.tools",
                    "relrl.tools.calculator", "relrl.strata"}),
    ("data and model loading", {"relrl.data", "relrl.checkpointing", "relrl.distributed",
                                "relrl.tracking", "relrl.api_client", "relrl.verl_export",
                                "relrl.modeling", "relrl.logprobs", "relrl.sft_data",
                                "relrl.stage_times", "relrl.stage_inputs", "relrl.results_io",
                                "relrl.guess_baselines"}),
    ("engines", {"relrl.engines", "relrl.engines.base", "relrl.engines.hf", "relrl.engines.vllm"}),
    ("built-in models", {"relrl.tiny_tokenizer", "relrl.tiny_models", "relrl.tiny_build"}),
    ("models by name", {"relrl.models"}),
    ("trainers and evaluation runner", {"relrl.evaluation", "relrl.grpo_trainer", "relrl.sft_trainer",
                                        "relrl.dpo_trainer"}),
    ("reports", {"relrl.demo_report", "relrl.replication_report", "relrl.reanalysis",
                 "relrl.result_plots"}),
]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_imports(tree: ast.AST, known: set[str]):
    """(imported module, line, inside a function) for every import of a project module; `from
    relrl import x` counts as importing relrl.x when that is a module."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module]
                names += [f"{child.module}.{a.name}" for a in child.names
                          if f"{child.module}.{a.name}" in known]
            for name in names:
                if name.split(".")[0] in PROJECT:
                    found.append((name, child.lineno, in_function))
            visit(child, inside)

    visit(tree, False)
    return found


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted((root / "relrl").rglob("*.py"))}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        targets = set()
        for target, _, _ in project_imports(ast.parse(path.read_text()), known):
            # `from relrl.engines.base import X` depends on relrl.engines.base (and so on its package,
            # which Python imports first; a package's own submodules are not a dependency of it).
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = walk(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = walk(node)
            if cycle:
                return cycle
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    level = {m: i for i, (_, members) in enumerate(LAYERS) for m in members}
    bad = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if level[target] > level[module]:
                bad.append(f"{module} ({LAYERS[level[module]][0]}) imports {target} "
                           f"({LAYERS[level[target]][0]})")
    return bad


def local_project_imports(files, root: Path = ROOT) -> list[str]:
    bad = []
    for path in files:
        for target, line, in_function in project_imports(ast.parse(path.read_text()), set()):
            if in_function:
                bad.append(f"{path.relative_to(root)}:{line}: {target}")
    return bad


def project_files() -> list[Path]:
    files = [p for d in SCRIPT_DIRS for p in sorted((ROOT / d).rglob("*.py"))]
    return files + [ROOT / "demo.py"]


# ---------------------------------------------------------------------- the real package
def test_every_module_of_the_package_has_a_layer():
    modules = set(package_modules())
    layered = set().union(*(members for _, members in LAYERS))
    assert modules - layered == set(), "give these modules a layer in LAYERS"
    assert layered - modules == set(), "LAYERS names modules that do not exist"


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph(package_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_imports_a_higher_layer():
    assert layer_violations(import_graph(package_modules())) == []


def test_project_modules_are_imported_at_the_top_of_every_file():
    assert local_project_imports(project_files()) == []


def test_the_built_in_models_are_above_loading_and_the_engines():
    graph = import_graph(package_modules())
    below = {"relrl.modeling", "relrl.engines", "relrl.engines.hf", "relrl.engines.vllm"}
    assert all(not (graph[m] & {"relrl.tiny_models", "relrl.tiny_build", "relrl.models"}) for m in below)
    assert {"relrl.tiny_build", "relrl.tiny_models"} <= graph["relrl.models"]


# ---------------------------------------------------------------------- the checks can fail
@pytest.fixture
def planted(tmp_path):
    """A copy of the package with one violation planted by the test."""
    copy = tmp_path / "relrl"
    for name, path in package_modules().items():
        target = copy / path.relative_to(ROOT / "relrl")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    return tmp_path


def test_a_planted_cycle_is_found_and_printed(planted):
    grading = planted / "relrl" / "grading.py"
    grading.write_text(grading.read_text() + "\nfrom relrl.data import DatasetError\n")
    cycle = find_cycle(import_graph(package_modules(planted)))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert {"relrl.grading", "relrl.data"} <= set(cycle)


def test_a_planted_upward_import_is_a_violation(planted):
    modeling = planted / "relrl" / "modeling.py"
    modeling.write_text(modeling.read_text() + "\nfrom relrl import tiny_models\n")
    assert layer_violations(import_graph(package_modules(planted))) == [
        "relrl.modeling (data and model loading) imports relrl.tiny_models (built-in models)"]


def test_a_planted_local_import_is_found(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import os\n\n\ndef run():\n    from relrl.grading import grade\n"
                      "    import vllm  # heavy and optional\n    return grade\n")
    assert local_project_imports([script], tmp_path) == ["script.py:5: relrl.grading"]

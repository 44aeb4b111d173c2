"""The shared package's import graph, read from the source with `ast` (nothing is imported).

DESIGN.md "Layering and imports": project modules imported at the top of a file; the package reads
bottom-up in layers (LAYERS below), nothing lower imports anything higher, and no circles.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("relrl", "study", "generators", "evaluation", "training", "benchmarks", "demo")
SCRIPT_DIRS = ("relrl", "study", "training", "evaluation", "generators", "benchmarks")
OUTSIDE_THE_LIBRARY = ("study", "generators", "evaluation", "training", "benchmarks", "demo")

# The package's folders, bottom to top. A module may import modules of its own layer or of lower
# ones; the package's own __init__ sits at the bottom.
LAYERS = [
    ("problems, grading, tools and untrusted input",
     {"relrl", "relrl.problems", "relrl.grading", "relrl.tools", "relrl.untrusted"}),
    ("runtime", {"relrl.runtime"}),
    ("data and prompting", {"relrl.data"}),
    ("model loading and log-probs", {"relrl.modeling"}),
    ("engines", {"relrl.engines"}),
    ("models by name", {"relrl.models"}),
    ("evaluation and statistics", {"relrl.evaluation"}),
    ("trainers", {"relrl.rl", "relrl.finetune"}),
]


def folder_of(module: str) -> str:
    """relrl.rl.grpo_loss -> relrl.rl; relrl.rl -> relrl.rl; relrl -> relrl."""
    return ".".join(module.split(".")[:2])


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
        here = level[folder_of(module)]
        for target in sorted(targets):
            there = level[folder_of(target)]
            if there > here:
                bad.append(f"{module} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    return bad


def imports_from_outside(files, root: Path = ROOT) -> list[str]:
    """Imports, anywhere in the given files, of the scripts or of the study's reporting."""
    return [f"{path.relative_to(root)}:{line}: {target}"
            for path in files for target, line, _ in project_imports(ast.parse(path.read_text()), set())
            if target.split(".")[0] in OUTSIDE_THE_LIBRARY]


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
def test_every_folder_of_the_package_has_a_layer():
    folders = {folder_of(m) for m in package_modules()}
    layered = set().union(*(members for _, members in LAYERS))
    assert folders - layered == set(), "give these folders a layer in LAYERS"
    assert layered - folders == set(), "LAYERS names folders that do not exist"
    assert all(len(m.split(".")) <= 3 for m in package_modules()), "one level of folders"


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph(package_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_imports_a_higher_layer():
    assert layer_violations(import_graph(package_modules())) == []


def test_project_modules_are_imported_at_the_top_of_every_file():
    assert local_project_imports(project_files()) == []


def test_the_built_in_models_are_above_loading_and_the_engines():
    graph = import_graph(package_modules())
    below = {"relrl.modeling.loading", "relrl.engines", "relrl.engines.hf", "relrl.engines.vllm"}
    assert all(not (graph[m] & {"relrl.modeling.tiny_models", "relrl.models.tiny_build", "relrl.models.by_name"}) for m in below)
    assert {"relrl.models.tiny_build", "relrl.modeling.tiny_models"} <= graph["relrl.models.by_name"]


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
    numbers = planted / "relrl" / "grading" / "numbers.py"
    numbers.write_text(numbers.read_text() + "\nfrom relrl.data.dataset_io import DatasetError\n")
    cycle = find_cycle(import_graph(package_modules(planted)))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert {"relrl.grading.numbers", "relrl.data.dataset_io"} <= set(cycle)


def test_a_planted_upward_import_is_a_violation(planted):
    loading = planted / "relrl" / "modeling" / "loading.py"
    loading.write_text(loading.read_text() + "\nfrom relrl.models import tiny_build\n")
    found = "relrl.modeling.loading (model loading and log-probs) imports {} (models by name)"
    # the package first, as Python imports it first
    assert layer_violations(import_graph(package_modules(planted))) == [
        found.format("relrl.models"), found.format("relrl.models.tiny_build")]


def test_a_planted_import_of_a_script_is_found(planted):
    folds = planted / "relrl" / "data" / "folds.py"
    folds.write_text(folds.read_text() + "\nfrom study.stage_times import read_times\n")
    found = imports_from_outside(sorted((planted / "relrl").rglob("*.py")), planted)
    assert found == [f"relrl/data/folds.py:{len(folds.read_text().splitlines())}: study.stage_times"]


def test_a_planted_local_import_is_found(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import os\n\n\ndef run():\n    from relrl.grading.scoring import grade\n"
                      "    import vllm  # heavy and optional\n    return grade\n")
    assert local_project_imports([script], tmp_path) == ["script.py:5: relrl.grading.scoring"]

"""Mutation testing of the core modules with mutmut 3 (`make mutants`; not part of `make test`).

Each module is mutated in its own scratch copy (.mutants/<module>/) and its mutants run only
against that module's fast test files, on one process (the machine is shared). Prints killed /
survived / equivalent and the score per module; mutants judged equivalent (no test can tell
them from the original) are listed with a reason in tests/mutation/equivalent.md and leave the
score's denominator.

    python tests/mutation/run_mutants.py                 # every module below
    python tests/mutation/run_mutants.py rl.grpo_loss evaluation.stats  # some
    python tests/mutation/run_mutants.py --jobs 2 grading.extraction  # two at a time (a quiet machine)
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from relrl.runtime.cli import ArgumentParser, positive_int

ROOT = Path(__file__).resolve().parents[2]

WORK = ROOT / ".mutants"
EQUIVALENT = Path(__file__).with_name("equivalent.md")
# module (dotted, under relrl/) -> its fast test files. The vLLM engine (relrl/engines/vllm.py)
# is left out: each of its tests starts vLLM (seconds), too slow to run per mutant; its
# behaviour is pinned against the HF engine's by tests/test_engine_vllm.py instead.
MODULES = {
    "rl.grpo_loss": ["tests/test_grpo_loss.py", "tests/test_grpo_loss_edges.py"],
    "rl.dynamic_sampling": ["tests/test_dynamic_sampling.py", "tests/test_question_sampler_weights.py"],
    "runtime.checkpointing": ["tests/test_checkpointing.py"],
    "runtime.stop": ["tests/test_stop_flag.py"],
    "grading.numbers": ["tests/test_grading.py", "tests/test_grading_number_edges.py",
                        "tests/test_grading_text_forms.py", "tests/test_grading_properties.py",
                        "tests/test_grading_values.py", "tests/test_grading_last_line.py"],
    "grading.extraction": ["tests/test_grading.py", "tests/test_grading_patterns.py",
                           "tests/test_grading_final_sections.py", "tests/test_grading_last_line.py",
                           "tests/test_grading_concluding.py", "tests/test_grading_values.py",
                           "tests/test_grading_text_forms.py", "tests/test_grading_properties.py"],
    "grading.scoring": ["tests/test_grading.py", "tests/test_grading_complement.py",
                        "tests/test_grading_number_edges.py", "tests/test_grading_values.py",
                        "tests/test_grading_patterns.py"],
    "grading.target_kind": ["tests/test_grading_complement.py", "tests/test_generator_target_kinds.py"],
    "evaluation.stats": ["tests/test_stats.py"],
    # the bf16 autograd function and Unsloth's packed rows are tested with the GPU stack
    "modeling.logprobs": ["tests/test_logprobs.py", "tests/test_logprobs_edges.py", "tests/test_gpu_stack.py"],
    "engines.base": ["tests/test_engine_base.py", "tests/test_engine_hf.py", "tests/test_engine_stop.py"],
    "engines.hf": ["tests/test_engine_hf.py", "tests/test_engine_stop.py"],
}
# what the tests import or run (the engine tests start training and evaluation scripts)
COPIED = ("relrl", "study", "tests", "benchmarks", "generators", "training", "evaluation")
SETUP_CFG = """[mutmut]
source_paths = relrl
only_mutate = relrl/{path}.py
also_copy =
    pytest.ini
    study
    benchmarks
    generators
    training
    evaluation
pytest_add_cli_args_test_selection =
{tests}
pytest_add_cli_args =
    -p
    no:cacheprovider
    -x
    -q
"""


def equivalent_names(module: str) -> set[str]:
    """Mutant names listed as `- relrl.<module>.x_...: reason` in equivalent.md."""
    if not EQUIVALENT.is_file():
        return set()
    pattern = re.compile(rf"^- `?(relrl\.{re.escape(module)}\.[\w.]+__mutmut_\d+)`?", re.M)
    return set(pattern.findall(EQUIVALENT.read_text(encoding="utf-8")))


def prepare(module: str) -> Path:
    folder = WORK / module
    # mutmut keeps each mutant's verdict in mutants/ and does not retest a survivor after new
    # tests land: start from no verdicts, so the score is the current tests'.
    shutil.rmtree(folder / "mutants", ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        target = folder / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(ROOT / name, target, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pytest.ini", folder / "pytest.ini")
    tests = "\n".join(f"    {t}" for t in MODULES[module])
    (folder / "setup.cfg").write_text(SETUP_CFG.format(path=module.replace(".", "/"),
                                                         tests=tests))
    return folder


def statuses(folder: Path) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"],
                         cwd=folder, capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            found[name] = status
    return found


KILLED, SURVIVED = ("killed", "timeout"), ("survived", "no tests")


def run(module: str, jobs: int = 1) -> dict:
    folder = prepare(module)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.setdefault("RELRL_CACHE", str(ROOT / ".cache" / "relrl"))
    # Scripts the tests start import the mutated copy, not the editable install of this checkout.
    env["PYTHONPATH"] = str(folder / "mutants")
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)],
                   cwd=folder, env=env, check=True)
    found = statuses(folder)
    # "no tests": no test of the module even reaches the mutated function, so nothing kills it
    lived = {n for n, s in found.items() if s in SURVIVED}
    equivalent = equivalent_names(module) & lived
    survived = sorted(lived - equivalent)
    killed = sum(s in KILLED for s in found.values())
    other = sorted(f"{n}: {s}" for n, s in found.items() if s not in KILLED + SURVIVED)
    judged = killed + len(survived)
    return {"module": module, "killed": killed, "survived": len(survived),
            "equivalent": len(equivalent), "other": other, "survivors": survived,
            "score": killed / judged if judged else 1.0}


def main(argv: list[str]) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE",
                        help=f"some of: {', '.join(MODULES)} (default all)")
    parser.add_argument("--jobs", type=positive_int("--jobs"), default=1,
                        help="mutants tested at a time (default 1: the machine is shared)")
    args = parser.parse_args(argv)
    modules = args.modules or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module {unknown[0]!r}; choose from {', '.join(MODULES)}")
    rows = [run(m, args.jobs) for m in modules]
    print(f"\n{'module':22} {'killed':>7} {'survived':>9} {'equivalent':>11} {'score':>7}")
    for r in rows:
        print(f"{r['module']:22} {r['killed']:7} {r['survived']:9} {r['equivalent']:11} "
              f"{r['score']:7.1%}")
        for name in r["survivors"]:
            print(f"    survived: {name}  (python -m mutmut show {name}, in .mutants/{r['module']})")
        for line in r["other"]:
            print(f"    not judged: {line}")
    (WORK / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

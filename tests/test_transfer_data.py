"""Issue 46's transfer data: new wordings of the tiny-tool families that no usual row holds, test
sets that leave out every problem tiny-tool was pretrained on (by parameters and by wording),
and the pipeline's reworded set; the usual rows keep their bytes."""
import contextlib
import hashlib
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_build_dataset import SCRIPT, run

import demo
from relrl.models import tiny_build, tiny_tool_build
from relrl.problems.base import Family, stray_numbers
from relrl.problems.dataset import generate_rows, row_keys
from relrl.problems.pretraining import pretraining_problems, pretraining_rows
from relrl.problems.registry import TOOL_FAMILIES, select
from relrl.runtime.cli import UsageError
from relrl.tools.calculator import evaluate
from study import pipeline_config


TOOL = select(TOOL_FAMILIES)
DRAWS = 60          # parameter draws per family whose new wordings are checked
MAX_OVERLAP = 0.25  # of a new wording's word 4-grams, the share one usual wording may also have
# seed 12's first 240 rows draw tiny-tool pretraining problems, some with a shared question and
# some only with shared parameters (another item name)
MEETS_PRETRAINING = dict(n=240, seed=12)


def rows_of(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def four_grams(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[^\W\d_]+|\d+(?:[.,]\d+)*", text.lower())
    return {tuple(words[i:i + 4]) for i in range(len(words) - 3)}


def overlap(new: str, old: str) -> float:
    """The share of `new`'s word 4-grams that `old` has too: 0 for unrelated sentences, 1 when
    `new` is `old` with words added around it."""
    grams = four_grams(new)
    return len(grams & four_grams(old)) / len(grams)


@contextlib.contextmanager
def drawn_problems():
    """question (any wording) -> Problem.key of every problem drawn meanwhile, recorded where
    Family.generate returns it: apart from relrl.problems.dataset's own look-ups."""
    key_of = {}
    original = Family.generate

    def generate(self, rng):
        problem = original(self, rng)
        key_of.update(dict.fromkeys((*problem.questions, *self.new_questions(problem.params)),
                                    problem.key))
        return problem

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Family, "generate", generate)
        yield key_of


@pytest.fixture(scope="module")
def tool_pretraining():
    """tiny-tool's pretraining rows as its build makes them, and their problems' keys."""
    with drawn_problems() as key_of:
        rows = tiny_tool_build.training_rows(tiny_tool_build.RECIPE)
    return rows, frozenset(key_of[row["question"]] for row in rows)


# ------------------------------------------------------------------ the new wordings

@pytest.mark.parametrize("family", TOOL, ids=lambda f: f.name)
def test_each_new_wording_asks_for_the_same_answer_in_other_words(family):
    assert len(family.new_phrasings) >= 2
    rng = np.random.default_rng(46)
    for _ in range(DRAWS):
        problem = family.generate(rng)
        reworded = family.reworded(problem)
        assert (reworded.value, reworded.answer, reworded.reasoning, reworded.expression) == \
            (problem.value, problem.answer, problem.reasoning, problem.expression)
        assert evaluate(problem.expression) == pytest.approx(problem.value, rel=1e-9)
        assert len(set(reworded.questions)) == len(family.new_phrasings)
        for question in reworded.questions:
            # every number of the calculator expression stated as the expression writes it
            assert not stray_numbers(problem.expression, question), question
            assert question not in problem.questions
            worst = max(overlap(question, old) for old in problem.questions)
            assert worst <= MAX_OVERLAP, (question, worst)


def test_the_overlap_measure_tells_a_rewording_from_a_reordering():
    old = "The life of a pump is Weibull with shape 2 and scale 900 hours. Find R(100 h)."
    assert overlap(old, old) == 1
    assert overlap("Find R(100 h). The life of a pump is Weibull with shape 2 and scale 900 "
                   "hours.", old) >= 0.8
    assert overlap("What share of pumps outlast 100 hours if lifetimes are Weibull, scale 900 "
                   "hours, shape 2?", old) == 0


def test_the_usual_rows_keep_their_bytes():
    """Hashes taken before the new wordings existed: the shipped tiny-tool's pretraining rows
    and every demo master set depend on them."""
    def digest(rows):
        return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]

    tool = generate_rows(TOOL, 300, 7, 2)
    assert digest(tool) == "4657063f763789e4"
    assert digest(generate_rows(select(), 200, 7, 2)) == "156f8e48bef44ac4"
    exclude = frozenset(row["question"] for row in tool)
    assert digest(generate_rows(TOOL, 300, 8, 2, exclude)) == "5eece1d064510adc"


def test_new_wording_rows_have_the_usual_schema_and_only_new_wordings(tmp_path):
    out = tmp_path / "new.jsonl"
    result = run("generate", "--n", 64, "--seed", 5, "--families", "tiny-tool", "--wording",
                 "new", "--out", out)
    assert result.returncode == 0, result.stderr
    new = rows_of(out)
    assert new == generate_rows(TOOL, 64, 5, wording="new")
    # the same seed draws the same problems: 32 groups, asked three ways in the usual wording
    usual = generate_rows(TOOL, 96, 5, 2)
    twins = {row["group"]: row for row in usual}
    every_usual = {row["question"] for row in usual}
    assert len(new) == 64 and len({row["group"] for row in new}) == 32
    for row in new:
        twin = twins[row["group"].removesuffix("-new")]
        assert row["group"].endswith("-new") and row["id"].startswith(row["group"] + "-p")
        assert list(row) == list(twin)  # the same fields in the same order
        same = [k for k in row if k not in ("question", "id", "group")]
        assert [row[k] for k in same] == [twin[k] for k in same]
        assert row["question"] not in every_usual
        assert not stray_numbers(row["expression"], row["question"])
    for group in {row["group"] for row in new}:
        assert len({row["question"] for row in new if row["group"] == group}) == 2


# ------------------------------------------------------------------ pretraining left out

def test_the_restated_recipes_draw_the_builds_rows(tool_pretraining):
    rows, keys = tool_pretraining
    assert pretraining_rows("tiny-tool") == rows
    assert pretraining_problems("tiny-tool") == (keys, frozenset(row["question"] for row in rows))
    assert pretraining_rows("tiny") == tiny_build.training_rows(tiny_build.RECIPE)


def test_exclude_pretraining_draws_no_problem_tiny_tool_saw(tmp_path, tool_pretraining):
    rows, seen_keys = tool_pretraining
    seen_questions = {row["question"] for row in rows}
    n, seed = MEETS_PRETRAINING["n"], MEETS_PRETRAINING["seed"]
    out = tmp_path / "clean.jsonl"
    with drawn_problems() as key_of:
        plain = generate_rows(TOOL, n, seed, 2)
        result = run("generate", "--n", n, "--seed", seed, "--families", "tiny-tool",
                     "--exclude-pretraining", "tiny-tool", "--out", out)
    assert result.returncode == 0, result.stderr
    # without the flag the same command meets pretraining problems, some by parameters alone
    shared_text = {key_of[row["question"]] for row in plain if row["question"] in seen_questions}
    shared = {key_of[row["question"]] for row in plain} & seen_keys
    assert shared_text and shared - shared_text
    clean = rows_of(out)
    assert len(clean) == n
    assert not {row["question"] for row in clean} & seen_questions
    assert not {key_of[row["question"]] for row in clean} & seen_keys


def test_the_reworded_set_shares_no_problem_with_the_master_set_or_pretraining(tmp_path,
                                                                                tool_pretraining):
    """At the master set's own seed, so every first draw is a master problem: only the
    exclusion by parameters keeps them out (their new wording is in no file)."""
    _, seen_keys = tool_pretraining
    n, seed = MEETS_PRETRAINING["n"], MEETS_PRETRAINING["seed"]
    master, reworded = tmp_path / "master.jsonl", tmp_path / "reworded.jsonl"
    with drawn_problems() as key_of:
        assert run("generate", "--n", n, "--seed", seed, "--families", "tiny-tool", "--out",
                   master).returncode == 0
        same_draws = generate_rows(TOOL, 100, seed, wording="new")
        result = run("generate", "--n", 100, "--seed", seed, "--families", "tiny-tool",
                     "--wording", "new", "--exclude", master, "--exclude-pretraining",
                     "tiny-tool", "--out", reworded)
    assert result.returncode == 0, result.stderr
    master_keys = {key_of[row["question"]] for row in rows_of(master)}
    assert {key_of[row["question"]] for row in same_draws} <= master_keys
    assert row_keys(rows_of(master)) == master_keys
    kept = {key_of[row["question"]] for row in rows_of(reworded)}
    assert len(kept) == 50 and not kept & (master_keys | seen_keys)


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("args, message", [
    (["--wording", "newer"], "build_dataset.py generate: argument --wording: invalid choice: "
     "'newer' (choose from 'usual', 'new')"),
    (["--exclude-pretraining", "qwen"], "build_dataset.py generate: argument "
     "--exclude-pretraining: invalid choice: 'qwen' (choose from 'tiny', 'tiny-tool')"),
    (["--wording", "new", "--families", "tiny-tool,bridge"], "--wording new: no new wording for "
     "bridge (the tiny-tool families have them: --families tiny-tool)"),
    (["--wording", "new"], "--wording new: no new wording for binomial_lot, inspection_bayes, "
     "exp_reliability and 44 more (the tiny-tool families have them: --families tiny-tool)"),
])
def test_a_bad_transfer_flag_is_one_line_and_writes_nothing(tmp_path, args, message):
    result = run("generate", "--n", 10, "--out", tmp_path / "out.jsonl", *args)
    assert (result.returncode, result.stderr) == (2, f"error: {message}\n")
    assert list(tmp_path.iterdir()) == []


def test_a_bad_model_stops_the_script_itself_with_exit_2(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "generate", "--exclude-pretraining",
                             "tiny-toool", "--out", tmp_path / "out.jsonl"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--exclude-pretraining: invalid choice" in result.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the pipeline

V3 = dict(model="tiny-tool", tools="calculator", families="tiny-tool", ood_topics=None,
          ood_families="lognormal_reliability,duane_mtbf")


@pytest.fixture
def stages(tmp_path, monkeypatch):
    """A Demo of the fast recipe with the third miniature's data whose `run` records commands."""
    ran = []
    monkeypatch.setattr(demo.Demo, "run", lambda self, stage, args, done=None, work=None,
                        processes=1: ran.append((stage, [str(a) for a in args])))
    d = demo.Demo(fast=True, seed=100, work=tmp_path, out=tmp_path / "out", lanes=1,
                  settings=replace(demo.recipe("fast"), **V3))
    return d, ran


def test_the_recipes_settings_reach_generate_and_the_reworded_set(stages, tmp_path):
    d, ran = stages
    d.cfg = replace(d.cfg, exclude_pretraining=True, reworded_rows=300)
    d.data()
    commands = dict(ran)
    assert [stage for stage, _ in ran] == ["generate", "split", "reworded"]
    master, reworded = commands["generate"], commands["reworded"]
    data = tmp_path / "data"
    assert master[master.index("--exclude-pretraining") + 1] == "tiny-tool"
    assert reworded == ["generators/build_dataset.py", "generate", "--n", "300", "--seed",
                        "1000100", "--paraphrases", "1", "--families", "tiny-tool", "--wording",
                        "new", "--exclude", str(data / "master_all.jsonl"),
                        "--exclude-pretraining", "tiny-tool", "--out",
                        str(data / "reworded.jsonl")]
    assert d.eval_sets()["reworded"] == data / "reworded.jsonl"
    assert "--samples" not in d.eval_args("reworded")  # one sample a question
    d.cfg = replace(d.cfg, eval_sets="holdout,ood")
    assert "reworded" not in d.eval_sets()


def test_without_the_settings_the_data_commands_are_as_before(stages):
    d, ran = stages
    d.data()
    assert [stage for stage, _ in ran] == ["generate", "split"]
    assert "--exclude-pretraining" not in dict(ran)["generate"]
    assert "reworded" not in d.eval_sets()


@pytest.mark.parametrize("changes, message", [
    (dict(families=None, ood_topics="growth", ood_families=None, reworded_rows=10,
          model="tiny", tools="none"),
     "reworded_rows needs families that all have new wordings (families: tiny-tool); 47 of "
     "the recipe's have none, binomial_lot among them"),
    (dict(eval_sets="holdout,reworded"), "eval_sets reworded needs reworded_rows"),
])
def test_a_reworded_set_the_families_cannot_make_is_refused(tmp_path, changes, message):
    config = replace(demo.recipe("fast"), **{**V3, **changes})
    path = tmp_path / "recipe.yaml"
    pipeline_config.write(path, config)
    with pytest.raises(UsageError, match=re.escape(message)):
        pipeline_config.load(path)

"""study/replication/mechanism.py: pass@k and the majority vote against brute force over every
draw and order of a question's samples, each class of a completion's calculator use on
hand-made transcripts, splits that add up to the whole, and on the committed redone replication
the post hoc tool-use shares, the pooled report's mean@k and pass@4, the audit's shares of wrong
formulas (issue 46) and the recorded guess baselines."""
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from relrl.evaluation.guess_baselines import GUESSES, Fitted, score_fitted
from relrl.evaluation.strata import in_high_range
from relrl.tools.protocol import calculator_call
from study.replication import mechanism as mech

ROOT = Path(__file__).resolve().parents[1]
V2 = ROOT / "results" / "demo-replication-v2"
QUESTION = "Gamma prior alpha = 1.5, beta = 4,100 h; 7 failures in 21000 h. Posterior mean?"
TARGET = "3.386e-4"  # (1.5 + 7) / (4100 + 21000)
RIGHT = "x1 = 1.5; x2 = 4100; x3 = 7; x4 = 21000; (x1 + x3)/(x2 + x4)"
STUDY = mech.Grading(0.05, "study")


def transcript(expression: str | None, answer: str | None, boxed: str = "0.5") -> str:
    """A completion: a calculator call (none for None), its answer (none for None), the reply."""
    text = "" if expression is None else calculator_call(expression) + "\nuser\n"
    if answer is not None:
        text += f"<tool_response>\n{answer}\n</tool_response>\nassistant\n"
    return text + f"Answer: \\boxed{{{boxed}}}"


def classify(expression, answer, question=QUESTION, target=TARGET, kind="value", grading=STUDY):
    sample = {"transcript": transcript(expression, answer), "correct": False}
    return mech.completion_class(sample, mech.question_numbers(question), target, kind, grading)


# ------------------------------------------------------------------ classes
@pytest.mark.parametrize("expression, answer, expected", [
    (None, None, "no_call"),
    (RIGHT, "error: unknown name 'x5'", "no_value"),  # an error answer
    (RIGHT, None, "no_value"),  # a call the transcript ends after
    (RIGHT, "0.0003386454183", "value_right"),
    ("x1 = 8.5; x2 = 25100; x1/x2", "0.0003386454183", "value_right"),  # derived numbers, right
    ("x1 = 1.5; x2 = 4100; x3 = 7; x4 = 21000; (x1 - x3)/(x2 + x4)", "-0.0002191", "wrong_formula"),
    ("x1 = 7; x2 = 4100; x3 = 1.5; x4 = 21000; (x1 + x3)/(x2 - x4)", "-0.000503", "wrong_formula"),
    ("x1 = 1.5; x2 = 41000; x3 = 7; x4 = 21000; (x1 + x3)/(x2 + x4)", "0.0001371", "foreign_number"),
    ("(1.5 + 7)/(4100 - 21000)", "-0.000503", "unnamed"),  # numbers inline: not read
])
def test_each_class(expression, answer, expected):
    assert classify(expression, answer) == expected


def test_a_number_written_differently_is_the_question_s():
    # 4,100 in the question is 4100; 4100.0 and 2.1e4 in the call are 4100 and 21000
    assert classify("x1 = 1.5; x2 = 4100.0; x3 = 7; x4 = 2.1e4; x1*x3/(x2 + x4)", "0.000418") \
        == "wrong_formula"
    assert mech.question_numbers("A 95% interval over 1,200 h.") == {95.0, 0.95, 1200.0}
    assert classify("x1 = 0.95; x2 = 1200; x1*x2", "1140", question="A 95% share of 1,200 h.",
                    target="60") == "wrong_formula"


def test_a_malformed_call_gets_no_value_and_a_value_is_graded_by_the_evaluation_s_rule():
    bad = "<tool_call>\n{not json\n</tool_call>\nuser\n<tool_response>\nerror: bad\n</tool_response>"
    sample = {"transcript": bad, "correct": False}
    assert mech.completion_class(sample, set(), TARGET, "value", STUDY) == "no_value"
    # 0.96 for 0.97: 1% off by the study rule, 33% off the failure probability by the complement one
    args = ("x1 = 0.96; x1", "0.96", "Find the reliability: 0.96 or more.", "0.97", "probability")
    assert classify(*args) == "value_right"
    assert classify(*args, grading=mech.Grading(0.05, "complement")) == "wrong_formula"


def test_tool_use_counts_calls_named_numbers_and_copies():
    samples = [{"transcript": transcript(RIGHT, "0.000338645"), "correct": True},
               {"transcript": transcript(RIGHT.replace("4100", "41000"), "0.0001"), "correct": False},
               {"transcript": transcript("(1.5 + 7)/(4100 + 21000)", "0.000338645"), "correct": True},
               {"transcript": transcript(None, None), "correct": False}]
    record = {"question": QUESTION, "target": TARGET, "completions": samples}
    assert mech.tool_use([record]) == {"samples": 4, "accuracy": 0.5, "calls": 0.75,
                                       "calls_assigning": 2, "copied": 0.5,
                                       "correct_when_copied": 1.0}
    counts = mech.class_counts(record, STUDY)
    assert counts == Counter({"value_right": 2, "right:value_right": 2, "foreign_number": 1,
                              "right:foreign_number": 0, "no_call": 1, "right:no_call": 0})


# ------------------------------------------------------------------ synthetic seed folders
def sample(value, correct):
    call = None if value is None else transcript(RIGHT, "0.000338645" if correct else "0.5")
    return {"value": value, "correct": correct, "transcript": call or "no answer"}


def record(qid, family, target, draws):
    """A question with its samples (value, correct) and what the evaluation records of them."""
    completions = [sample(v, c) for v, c in draws]
    return {"id": qid, "group": qid, "question": QUESTION, "family": family, "target": target,
            "target_kind": "probability" if float(target) < 1 else "value",
            "pass_count": sum(c for _, c in draws), "samples": len(draws),
            "completions": completions, **completions[0]}


# (value, correct) draws: ties of right and wrong answers, samples without a number, a value
# graded right once and wrong once (one truncated), every sample wrong, more samples than k
DRAWS = [
    [(0.9, True), (0.9, True), (0.5, False), (0.7, False)],
    [(0.9, True), (0.5, False), (0.5, False), (0.9, True), (0.2, False)],
    [(None, False), (None, False), (None, False), (0.3, True)],
    [(0.4, True), (0.4, False), (0.6, False), (0.6, False), (0.1, True), (0.1, True)],
    [(0.5, False), (0.6, False), (0.7, False), (None, False)],
    [(None, False)] * 4,
    [(0.1, True), (0.2, False), (0.3, True), (0.4, False)],
    [(0.2, False), (0.2, False), (0.3, False), (0.2, False), (0.9, True), (None, False)],
]
TARGETS = ["0.9", "120", "0.95", "0.999", "0.5", "0.3", "30", "45"]  # in [0.85, 1) and elsewhere
FAMILIES = ["series", "weibull", "series", "erlang", "weibull", "series", "erlang", "weibull"]


def pair(seed_dir: Path, name: str, base: list[dict], ft: list[dict], guesses: dict | None):
    folder = seed_dir / "eval" / "heldout"
    folder.mkdir(parents=True, exist_ok=True)
    side = {"tolerance": 0.05, "tolerance_rule": "complement"}
    body = {"kind": "pair_result", "base": {**side, "results": base},
            "finetuned": {**side, "results": ft}}
    if guesses:
        body["guess_baselines"] = guesses
    (folder / f"{name}.json").write_text(json.dumps(body))


@pytest.fixture
def seeds(tmp_path):
    """Two seeds: the base and a model on the same questions, a guess block fitted elsewhere."""
    dirs = []
    for seed in (1, 2):
        recs = [record(f"q{seed}-{i}", f, t, d) for i, (f, t, d) in enumerate(zip(FAMILIES, TARGETS, DRAWS))]
        ft = [record(r["id"], r["family"], r["target"], list(reversed(d)) + [(0.9, True)])
              for r, d in zip(recs, DRAWS)]
        fitted = Fitted(0.9, 0.3, {"weibull": 120.0})
        guesses = score_fitted(recs, fitted, tolerance=0.05, rule="complement")
        pair(tmp_path / f"seed-{seed}", "grpo", recs, ft, guesses)
        dirs.append(tmp_path / f"seed-{seed}")
    return dirs


def brute_pass(draws, k):
    """The share of k-sample subsets holding a right sample."""
    subsets = list(itertools.combinations([c for _, c in draws], k))
    return sum(any(s) for s in subsets) / len(subsets)


def brute_majority(draws):
    """Over every order of the samples: the most frequent number (first seen of equals), graded
    by its first sample in that order; samples without a number do not vote."""
    scores = []
    for order in itertools.permutations(draws):
        votes = Counter(v for v, _ in order if v is not None)
        if not votes:
            scores.append(0.0)
            continue
        winner = votes.most_common(1)[0][0]
        scores.append(float(next(c for v, c in order if v == winner)))
    return sum(scores) / len(scores)


def test_pass_at_k_and_the_majority_vote_are_brute_force_s(seeds):
    result = mech.mechanism(seeds, "heldout", ["base", "grpo"])
    base, model = result["models"]["base"], result["models"]["grpo"]
    assert base["k"] == 4 and model["k"] == 5  # the fewest samples a question has
    draws_ft = [list(reversed(d)) + [(0.9, True)] for d in DRAWS]
    for found, draws, k in ((base, DRAWS, 4), (model, draws_ft, 5)):
        assert found["all"]["pass@k"] == pytest.approx(sum(brute_pass(d, k) for d in draws) / len(draws))
        assert found["all"]["majority"] == pytest.approx(sum(map(brute_majority, draws)) / len(draws))
        assert found["all"]["mean@k"] == pytest.approx(
            sum(sum(c for _, c in d) / len(d) for d in draws) / len(draws))
    assert result["seeds"] == ["seed-1", "seed-2"] and base["all"]["questions"] == 16


def test_splits_add_up_to_the_whole(seeds):
    result = mech.mechanism(seeds, "heldout", ["base", "grpo", "missing"])
    assert result["models"]["missing"] is None
    assert set(result["models"]["base"]["by_family"]) == {"series", "weibull", "erlang"}
    high = result["models"]["base"]["by_target_range"]["high_range"]["questions"]
    assert high == 2 * sum(in_high_range(float(t)) for t in TARGETS) == 6
    for model in ("base", "grpo"):
        found = result["models"][model]
        whole = found["all"]
        for split in ("by_family", "by_target_range"):
            parts = list(found[split].values())
            for key in ("questions", "completions", "correct"):
                assert sum(p[key] for p in parts) == whole[key]
            for name in mech.CLASSES:
                for key in ("completions", "correct"):
                    assert sum(p["classes"][name][key] for p in parts) == whole["classes"][name][key]
            assert sum(p["tool_use"]["samples"] for p in parts) == whole["completions"]
            for key in ("mean@k", "pass@k", "majority"):  # means over questions
                assert sum(p[key] * p["questions"] for p in parts) == pytest.approx(
                    whole[key] * whole["questions"])
        assert sum(c["completions"] for c in whole["classes"].values()) == whole["completions"]
        assert sum(c["share"] for c in whole["classes"].values()) == pytest.approx(1.0)
    guess = result["best_guess"]
    for split in ("by_family", "by_target_range"):
        parts = list(guess[split].values())
        assert sum(p["questions"] for p in parts) == guess["all"]["questions"] == 16
        for name in GUESSES:
            assert sum(p["accuracy"][name] * p["questions"] for p in parts) == pytest.approx(
                guess["all"]["accuracy"][name] * 16)
    # the constant 0.9 is right on the 0.9 target alone (0.95 is twice its failure probability);
    # family_mode also gets weibull's 120 right; the question's last number, 21000, never
    assert guess["all"]["accuracy"] == pytest.approx({"constant": 1 / 8, "family_mode": 2 / 8,
                                                      "copy": 0.0})
    assert guess["all"]["best"] == "family_mode"
    assert guess["by_family"]["series"]["best"] == "constant"  # first of equals
    assert guess["by_family"]["weibull"]["accuracy"]["family_mode"] == pytest.approx(1 / 3)


def test_report_lines_are_tables_of_every_split(seeds):
    result = mech.mechanism(seeds, "heldout", ["base", "grpo"])
    lines = mech.report_lines(result)
    assert lines[1] == "## Mechanism on heldout questions (pooled over seeds; k = 4, 5)"
    rows = [line for line in lines if line.startswith("| ")]
    assert len({len(r.split("|")) for r in rows}) == 1  # every row as wide as its header
    assert sum(r.startswith("| heldout |") for r in rows) == 2
    assert sum(r.startswith("| in [0.85, 1) |") for r in rows) == 2
    assert sum(r.startswith("| weibull |") for r in rows) == 2
    grpo_all = next(r for r in rows if r.startswith("| heldout | grpo |"))
    extra = result["models"]["grpo"]["all"]["correct"] - result["models"]["base"]["all"]["correct"]
    assert f"| {extra:+d} | 25.0% (family_mode) |" in grpo_all
    only = [line for line in mech.report_lines(result, ["grpo"]) if line.startswith("| heldout |")]
    assert only == [grpo_all]  # the base's right answers counted, its row not shown
    assert mech.report_lines(mech.mechanism(seeds, "ood", ["base"])) == []


# ------------------------------------------------------------------ the committed replication
ARMS = ("base", "SFT warm start", "GRPO exp7 best", "GRPO exp10 best", "GRPO exp7 plain best")


def test_committed_tool_use_is_the_post_hoc_script_s():
    saved = json.loads((V2 / "posthoc" / "posthoc.json").read_text())["seeds"]
    for seed, s in saved.items():
        folder = V2 / s["folder"]
        for set_name, arms in s["tool_use"].items():
            result = mech.mechanism([folder], set_name, ARMS)
            for arm in ARMS:
                assert result["models"][arm]["all"]["tool_use"] == arms[arm], (seed, set_name, arm)


@pytest.fixture(scope="module")
def heldout():
    confirmatory = [V2 / f"seed-{s}" for s in (21, 22, 23)]
    return mech.mechanism(confirmatory, "heldout", ("base", "GRPO exp7 best", "GRPO exp10 best"))


def test_committed_mean_and_pass_at_4_are_the_pooled_report_s(heldout):
    at_k = json.loads((V2 / "pooled.json").read_text())["at_k"]["heldout"]
    for model, found in heldout["models"].items():
        assert found["k"] == 4
        assert found["all"]["mean@k"] == pytest.approx(at_k[model]["mean@k"]["value"], abs=1e-12)
        assert found["all"]["pass@k"] == pytest.approx(at_k[model]["pass@4"]["value"], abs=1e-12)


def test_committed_wrong_formulas_are_the_audit_s(heldout):
    """Issue 46: completions whose call takes the question's numbers with a wrong formula or
    slot fell from 22.3% to 12.3%; about a third of calls bind a number not in the question."""
    base, exp7 = heldout["models"]["base"]["all"], heldout["models"]["GRPO exp7 best"]["all"]
    assert (base["classes"]["wrong_formula"]["completions"], base["completions"]) == (381, 1708)
    assert round(100 * base["classes"]["wrong_formula"]["share"], 1) == 22.3
    assert round(100 * exp7["classes"]["wrong_formula"]["share"], 1) == 12.3
    for found in (base, exp7):
        assert 0.30 < 1 - found["tool_use"]["copied"] < 0.36


def test_committed_guesses_are_the_recorded_blocks_accuracies():
    for seed in (21, 22, 23):
        folder = V2 / f"seed-{seed}"
        block = json.loads((folder / "eval" / "heldout" / "grpo_exp7_best.json").read_text())
        guess = mech.mechanism([folder], "heldout", ())["best_guess"]["all"]
        for name in GUESSES:
            assert guess["accuracy"][name] == pytest.approx(block["guess_baselines"][name]["accuracy"])

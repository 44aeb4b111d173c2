"""What a fine-tuned model learnt, beside how much it gained: sharpening or new reach, and which
step of the calculator's use went right or wrong, per model (base included), pooled over seeds,
by problem family and by target range, with the best guess on the same questions.

Measures, averaged over questions (each counts once, whatever its paraphrase group; the pooled
report's accuracies and guess margins average over groups, so they differ a little: the redone
replication's base pass@4 on held-out questions is 78.9% over questions, 77.9% over groups):

  mean@k      the share of a question's samples graded right, as study.at_k's mean@k
  pass@k      the unbiased chance that k samples of a question hold a right one, k = the
              samples drawn per question (relrl.evaluation.stats.pass_at_k): the questions the
              model reaches at all with k tries
  majority    the accuracy of the answer most of a question's k samples give (self-consistency).
              An answer is a sample's extracted number (`value`; samples without one do not
              vote; a question where none has one scores 0). Ties: the expected accuracy of a
              pick at random among the tied answers, so the share of them that are right (it
              does not depend on the samples' order). An answer's grade is the share of its
              samples graded right (they agree unless grading looked beyond the number, at
              truncation say).

  Sharpening or new capability: a fine-tuned model whose mean@k rises while its pass@k stays
  near the base's has moved probability onto answers its base already reached in k samples
  (sharpening); a rise in pass@k is questions newly reached. The base's own majority vote is
  what sharpening can buy with no training at all: a gain in mean@k up to the base's majority
  is within reach of voting over the base's samples.

Every completion falls in exactly one class by its first calculator call (the first
<tool_call> and the first <tool_response> after it; tiny-tool makes one call), the first of
these that fits (so a right value from a derived number, 1 - R written as a number, is right):

  no_call         no complete tool call
  no_value        the call got no answer, or one that is not a finite number (an error: bad
                  JSON, an unknown name, a domain error ...)
  value_right     the calculator's value is right by the evaluation's own rule (its tolerance,
                  tolerance rule and the question's target kind): the formula and its numbers
                  were right; a wrong final answer here is a miscopied result
  wrong_formula   a wrong value from a call whose named numbers (`x1 = 4100; ...`, spaced
                  around `=` as tiny-tool writes them) all appear
                  in the question: the numbers were read, the formula or the slot a number went
                  in was wrong (formula choice)
  foreign_number  a wrong value from a call that names a number not in the question (number
                  copying: a misread, a miscopy, a number from another question); its formula is
                  not checked
  unnamed         a wrong value from a call that names no numbers (written inline: which
                  numbers it took is not read)

A number is in the question as written there, thousands separators dropped and compared as a
float (4,100 is 4100; a call's 2.1e4 or 21000.0 is 21000), a percentage also as a fraction
(95% is 95 and 0.95); "16^2" holds 16 and 2, not 256. `tool_use` is the redone replication's
post hoc reading of the same calls (evaluation/redone_posthoc.py): the share of samples that
call, of calls that name numbers, of those whose numbers all appear in the question, and the
accuracy of those, whatever the calculator's value.

Best guess: the guesses a pair file's guess_baselines block recorded (fitted on each seed's own
training rows, relrl.evaluation.guess_baselines), re-graded on the same questions; its accuracy
in every split, the best of the three chosen within the split (a choice that favours the guess).

By target range: relrl.evaluation.strata's [0.85, 1) against the rest, as the pooled report's
by_target_range (study.replication.groups.strata). By family: a record's `family` ("-" when it
has none). Counts of the splits sum to the whole's.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from relrl.evaluation.guess_baselines import GUESSES, fitted_from_block, guess_outcomes
from relrl.evaluation.results_io import read_result
from relrl.evaluation.stats import pass_at_k
from relrl.grading.scoring import is_correct_value
from relrl.grading.target_kind import target_kind_of
from relrl.tools.protocol import CALL_CLOSE, tool_call_bodies
from relrl.untrusted import UntrustedInputError, loads_json
from study.at_k import samples_of
from study.replication.groups import strata
from study.replication.seed_files import slug

CLASSES = ("value_right", "wrong_formula", "foreign_number", "unnamed", "no_value", "no_call")
RANGES = ("high_range", "rest_range")
NO_FAMILY = "-"
IN_HIGH_RANGE = strata(None)["high_range"]  # the pooled report's record filter
_ASSIGNED = re.compile(r"[A-Za-z_]\w* = (-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3})")
_ANSWER_OPEN, _ANSWER_CLOSE = "<tool_response>", "</tool_response>"


class Grading(NamedTuple):
    """A model result's own rule, to grade the calculator's value as its answers were graded."""

    tolerance: float
    rule: str


# ------------------------------------------------------------------ one completion's call
def samples(record: dict) -> list[dict]:
    """Every sample of a question's record (K > 1 keeps them under `completions`)."""
    return record.get("completions") or [record]


def question_numbers(question: str) -> set[float]:
    """The numbers a question writes, as floats (see the module's docstring)."""
    plain = _THOUSANDS.sub("", question)
    return ({float(x) for x in _NUMBER.findall(plain)}
            | {float(x) / 100 for x in _PERCENT.findall(plain)})


def first_call_numbers(transcript: str) -> list[str] | None:
    """The numbers the first calculator call assigns to names; None without such a call."""
    for body in tool_call_bodies(transcript):
        try:
            expression = loads_json(body, "tool call")["arguments"]["expression"]
        except (UntrustedInputError, KeyError, TypeError):
            return None
        return _ASSIGNED.findall(expression) if isinstance(expression, str) else None
    return None


def first_answer(transcript: str) -> float | None:
    """The first call's answer when it is a finite number; None without one (or an error)."""
    call_end = transcript.find(CALL_CLOSE)
    opening = transcript.find(_ANSWER_OPEN, call_end) if call_end >= 0 else -1
    closing = transcript.find(_ANSWER_CLOSE, opening) if opening >= 0 else -1
    if closing < 0:
        return None
    try:
        value = float(transcript[opening + len(_ANSWER_OPEN):closing].strip())
    except ValueError:  # an error line
        return None
    return value if math.isfinite(value) else None


def completion_class(sample: dict, in_question: set[float], target, target_kind: str,
                     grading: Grading) -> str:
    """One completion's class among CLASSES, in the order the module's docstring gives."""
    transcript = sample.get("transcript") or ""
    if not tool_call_bodies(transcript):
        return "no_call"
    value = first_answer(transcript)
    if value is None:
        return "no_value"
    if is_correct_value(value, target, tolerance=grading.tolerance, rule=grading.rule,
                        target_kind=target_kind):
        return "value_right"
    numbers = first_call_numbers(transcript)
    if not numbers:
        return "unnamed"
    return "wrong_formula" if all(float(x) in in_question for x in numbers) else "foreign_number"


# ------------------------------------------------------------------ counts over completions
def call_counts(record: dict) -> Counter:
    """tool_use's counts over one question's samples."""
    counts = Counter()
    in_question = question_numbers(record["question"])
    for sample in samples(record):
        right = bool(sample["correct"])
        transcript = sample.get("transcript") or ""
        numbers = first_call_numbers(transcript)
        copied = bool(numbers) and all(float(x) in in_question for x in numbers)
        counts.update(samples=1, correct=right, calls=bool(tool_call_bodies(transcript)),
                      assigning=bool(numbers), copied=copied, right_when_copied=copied and right)
    return counts


def tool_use_shares(counts: Counter) -> dict:
    """The post hoc tool-use shares from call_counts summed over a set of questions."""
    n, assigning, copied = counts["samples"], counts["assigning"], counts["copied"]
    return {"samples": n, "accuracy": counts["correct"] / n if n else None,
            "calls": counts["calls"] / n if n else None, "calls_assigning": assigning,
            "copied": copied / assigning if assigning else None,
            "correct_when_copied": counts["right_when_copied"] / copied if copied else None}


def tool_use(recs: Iterable[dict]) -> dict:
    """Accuracy over every sample, the share that call the calculator, and of the calls that
    name numbers, the share whose numbers all appear in the question and their accuracy."""
    return tool_use_shares(sum((call_counts(r) for r in recs), Counter()))


def class_counts(record: dict, grading: Grading) -> Counter:
    """Per class, the question's completions in it and the right answers among them."""
    counts = Counter()
    in_question = question_numbers(record["question"])
    kind = target_kind_of({"question": record["question"], "answer": record["target"],
                           "target_kind": record.get("target_kind")})
    for sample in samples(record):
        name = completion_class(sample, in_question, record["target"], kind, grading)
        counts.update({name: 1, f"right:{name}": bool(sample["correct"])})
    return counts


# ------------------------------------------------------------------ per question
def split_keys(record: dict) -> dict:
    """The family and the target range a question counts in."""
    return {"family": str(record.get("family") or NO_FAMILY),
            "range": RANGES[0] if IN_HIGH_RANGE(record) else RANGES[1]}


def majority(record: dict) -> float:
    """The majority vote's accuracy on one question (see the module's docstring for ties)."""
    grades: dict[float, list[bool]] = {}
    for sample in samples(record):
        if sample.get("value") is not None:
            grades.setdefault(float(sample["value"]), []).append(bool(sample["correct"]))
    if not grades:
        return 0.0
    top = max(len(g) for g in grades.values())
    tied = [sum(g) / len(g) for g in grades.values() if len(g) == top]
    return sum(tied) / len(tied)


def question_row(record: dict, grading: Grading, k: int) -> dict:
    """What one question contributes to every measure, and the splits it belongs to."""
    n = len(samples(record))
    right = sum(bool(s["correct"]) for s in samples(record))
    return {**split_keys(record),
            "mean": right / n, "pass": pass_at_k(n, right, k), "majority": majority(record),
            "calls": call_counts(record), "classes": class_counts(record, grading)}


def measures(rows: Sequence[dict]) -> dict:
    """Every measure over a set of questions' rows."""
    q = len(rows)
    calls = sum((r["calls"] for r in rows), Counter())
    classes = sum((r["classes"] for r in rows), Counter())
    n = calls["samples"]
    return {"questions": q, "completions": n, "correct": calls["correct"],
            "mean@k": sum(r["mean"] for r in rows) / q if q else None,
            "pass@k": sum(r["pass"] for r in rows) / q if q else None,
            "majority": sum(r["majority"] for r in rows) / q if q else None,
            "classes": {name: {"completions": classes[name],
                               "share": classes[name] / n if n else None,
                               "correct": classes[f"right:{name}"]} for name in CLASSES},
            "tool_use": tool_use_shares(calls)}


def splits(rows: Sequence[dict], summarise) -> dict:
    """summarise() over every question, by family and by target range."""
    families = sorted({r["family"] for r in rows})
    return {"all": summarise(rows),
            "by_family": {f: summarise([r for r in rows if r["family"] == f]) for f in families},
            "by_target_range": {name: summarise([r for r in rows if r["range"] == name])
                                for name in RANGES}}


# ------------------------------------------------------------------ best guess
def guess_rows(recs: Sequence[dict], block: dict) -> list[dict]:
    """Per question: its splits and whether each recorded guess is right on it."""
    outcomes = guess_outcomes(recs, fitted_from_block(block), tolerance=block["tolerance"],
                              rule=block["tolerance_rule"])
    return [{**split_keys(r), "guesses": {name: outcomes[name][i] for name in GUESSES}}
            for i, r in enumerate(recs)]


def guess_summary(rows: Sequence[dict]) -> dict:
    """Each guess's accuracy over the questions, and the best of them (first of equals)."""
    q = len(rows)
    accuracy = {name: sum(r["guesses"][name] for r in rows) / q if q else None for name in GUESSES}
    best = max(GUESSES, key=lambda name: accuracy[name] or 0.0)
    return {"questions": q, "accuracy": accuracy, "best": best, "best_accuracy": accuracy[best]}


# ------------------------------------------------------------------ reading seed folders
def pair_file(seed_dir: Path, set_name: str, model: str) -> Path | None:
    """The pair file holding a model's records on a set ("base": any of them, as
    study.replication.seed_files.records reads it); None where there is none."""
    folder = seed_dir / "eval" / set_name
    if model == "base":
        found = sorted(folder.glob("*.json")) if folder.is_dir() else []
        return found[0] if found else None
    path = folder / f"{slug(model)}.json"
    return path if path.is_file() else None


def model_result(seed_dir: Path, set_name: str, model: str) -> dict | None:
    path = pair_file(seed_dir, set_name, model)
    if path is None:
        return None
    return read_result(path)["base" if model == "base" else "finetuned"]


def model_rows(seed_dirs: Sequence[Path], set_name: str, model: str) -> tuple[int, list[dict]] | None:
    """(k, every question's row over the seeds); None where some seed lacks the model's records."""
    results = [model_result(d, set_name, model) for d in seed_dirs]
    if not results or any(r is None or not r.get("results") for r in results):
        return None
    k = samples_of([rec for r in results for rec in r["results"]])
    return k, [question_row(rec, Grading(r["tolerance"], r["tolerance_rule"]), k)
               for r in results for rec in r["results"]]


def best_guess(seed_dirs: Sequence[Path], set_name: str) -> dict | None:
    """The guesses over the seeds' questions; None where some seed recorded no baselines."""
    rows = []
    for seed_dir in seed_dirs:
        path = pair_file(seed_dir, set_name, "base")
        pair = read_result(path) if path else {}
        if not pair.get("guess_baselines"):
            return None
        rows += guess_rows(pair["base"]["results"], pair["guess_baselines"])
    return splits(rows, guess_summary) if rows else None


def mechanism(seed_dirs: Sequence[Path], set_name: str, models: Sequence[str]) -> dict:
    """Per model (None where a seed lacks its records): k and every measure, over all the
    seeds' questions, by family and by target range; the best guess on the same questions.

    {"set", "seeds": [folder names], "best_guess": None or a split of guess_summary(),
     "models": {label: None or {"k", "all": M, "by_family": {family: M},
                                "by_target_range": {"high_range": M, "rest_range": M}}}}
    M: {"questions", "completions", "correct", "mean@k", "pass@k", "majority",
        "classes": {class: {"completions", "share", "correct"}}, "tool_use": tool_use()'s}"""
    out = {"set": set_name, "seeds": [Path(d).name for d in seed_dirs], "models": {},
           "best_guess": best_guess([Path(d) for d in seed_dirs], set_name)}
    for model in models:
        found = model_rows([Path(d) for d in seed_dirs], set_name, model)
        out["models"][model] = None if found is None else {"k": found[0], **splits(found[1], measures)}
    return out


# ------------------------------------------------------------------ report.md
CLASS_HEADINGS = {"value_right": "Calculator right", "wrong_formula": "Wrong formula",
                  "foreign_number": "Foreign number", "unnamed": "Unnamed",
                  "no_value": "No value", "no_call": "No call"}
RANGE_LABELS = {"high_range": "in [0.85, 1)", "rest_range": "elsewhere"}
NOTE = ("mean@k: the share right of one sample; pass@k: the chance that k samples hold a right "
        "one; majority: the accuracy of the answer most of the k samples give (a tie scores the "
        "share of the tied answers that are right; samples without a number do not vote). mean@k "
        "rising with pass@k flat is sharpening (the base reached those answers in k samples); "
        "pass@k rising is questions newly reached; the base's majority is what voting over its "
        "samples gets with no training. Classes, every completion by its first calculator call: "
        "the calculator's value right (by the evaluation's rule); a wrong value whose named "
        "numbers all appear in the question (wrong formula or slot); a wrong value naming a "
        "number not in the question (foreign number); a wrong value from a call naming no "
        "numbers (unnamed); a call with an error or no answer (no value); no call. Extra right: "
        "the model's right completions minus the base's on the same questions. Averaged over "
        "questions, not groups (`study/replication/mechanism.py`).")


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def measure_cells(m: dict) -> list[str]:
    """A row's mean@k, pass@k, majority and class shares."""
    return ([percent(m[key]) for key in ("mean@k", "pass@k", "majority")]
            + [percent(m["classes"][name]["share"]) for name in CLASSES])


def extra_right(m: dict, base: dict | None) -> str:
    """The model's right completions minus the base's, on the same questions."""
    return "-" if base is None else f"{m['correct'] - base['correct']:+d}"


def guess_cell(guess: dict | None) -> str:
    return "-" if guess is None else f"{percent(guess['best_accuracy'])} ({guess['best']})"


def parts_of(entry: dict, split: str) -> dict:
    """{part: its numbers} of a model's or the guesses' entry: "all" is a split of one part."""
    return {"all": entry["all"]} if split == "all" else entry[split]


def split_table(result: dict, names: Sequence[str], split: str, first: str, label=str) -> list[str]:
    """Per part of a split (all, by_target_range, by_family) and model of `names`: the
    measures, the extra right answers over the base's and the best guess on the part's
    questions."""
    columns = [first, "Model", "Questions", "mean@k", "pass@k", "Majority",
               *(CLASS_HEADINGS[c] for c in CLASSES), "Extra right", "Best guess"]
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    models = {m: parts_of(result["models"][m], split) for m in names}
    base = parts_of(result["models"]["base"], split) if result["models"].get("base") else {}
    guesses = parts_of(result["best_guess"], split) if result["best_guess"] else {}
    for part in models[names[0]]:  # the split's own order: sorted families, RANGES
        for model, parts in models.items():
            m = parts.get(part)
            if m is not None:
                against = None if model == "base" else base.get(part)
                lines.append(f"| {label(part)} | {model} | {m['questions']} | "
                             + " | ".join(measure_cells(m)) + f" | {extra_right(m, against)} | "
                             f"{guess_cell(guesses.get(part))} |")
    return lines


def report_lines(result: dict, models: Sequence[str] | None = None) -> list[str]:
    """report.md's mechanism section for one set: mechanism()'s result as three tables (every
    question, by target range, by family), for `models` (default: every model it has; "Extra
    right" counts from the base's, shown or not); nothing when none of them has records."""
    names = [m for m, found in result["models"].items()
             if found and (models is None or m in models)]
    if not names:
        return []
    k = sorted({result["models"][m]["k"] for m in names})
    heading = (f"## Mechanism on {result['set']} questions (pooled over seeds; k = "
               f"{', '.join(map(str, k))})")
    return (["", heading, "", NOTE, ""]
            + split_table(result, names, "all", "Set", lambda _: result["set"])
            + ["", "By target range:", ""]
            + split_table(result, names, "by_target_range", "Targets", RANGE_LABELS.get)
            + ["", "By family:", ""]
            + split_table(result, names, "by_family", "Family"))

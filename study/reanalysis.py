"""Post hoc re-analysis of committed evaluation results: both tolerance rules, the guess
baselines and the strata, with no model run again.

Each completion's stored answer value is regraded (relrl.grading.scoring.is_correct_value). Under the
study's rule the stored grade is kept: it is the measured number, and the value's regrade is
checked against it. Under the complement rule the value is regraded, except where the value
alone does not reproduce the stored study grade (an answer read as a percent number): those are
regraded from the stored response text with the current grader, and counted.

Accuracies in the tables are at the level of paraphrase groups, as the replication report's
(a group's score is the mean over its questions of pass_count / samples; pooled over seeds,
each seed's groups count separately). The strata (relrl.evaluation.strata) count completions, as a model
result's own accuracy does. The guesses are fitted per seed on that seed's training rows and
scored on the set with the same rule (relrl.evaluation.guess_baselines).

  reanalyse(name, seeds)  one folder's numbers: {"sets": {set: {"rules": ..., "strata": ...}}}
  render(result)          the Markdown tables, from the JSON alone
"""
from __future__ import annotations

from typing import Sequence

from relrl.evaluation.guess_baselines import GUESSES, Fitted, fit_guesses, guess_outcomes
from relrl.evaluation.strata import strata
from relrl.grading.scoring import grade, is_correct_value
from relrl.grading.target_kind import target_kind_of
from study.at_k import at_k_cells, cell_text, pass_name, samples_of

RULES = ("study", "complement")
MODELS = ("base", "SFT warm start", "GRPO exp7 best", "GRPO exp10 best")
SHORT = {"base": "base", "SFT warm start": "SFT", "GRPO exp7 best": "exp7 best",
         "GRPO exp10 best": "exp10 best"}
SETS = ("heldout", "retention", "holdout", "ood", "train")
SET_NAMES = {"heldout": "held-out mixed-style", "retention": "retention", "holdout": "holdout",
             "ood": "out-of-distribution", "train": "mixed training"}
CHECK_CONSTANT = 0.95  # a fixed guess, not fitted: a cross-check on the fitted constant


def kind_of(record: dict) -> str:
    return target_kind_of({"question": record.get("question"), "answer": record["target"]})


def _completions(record: dict) -> list[dict]:
    return record.get("completions") or [record]


def regrade(record: dict, rule: str, tolerance: float, tally: dict) -> dict:
    """The record with every completion graded under `rule` (see the module docstring);
    `tally` counts records, those with a probability target, completions, those regraded
    from text, and value regrades that differ from the stored study grade."""
    kind, target = kind_of(record), record["target"]
    tally["records"] += 1
    tally["probability_targets"] += kind == "probability"
    graded = []
    for c in _completions(record):
        stored = bool(c["correct"])
        by_value = is_correct_value(c.get("value"), target, tolerance=tolerance, rule="study",
                                    target_kind=kind)
        tally["completions"] += 1
        if rule == "study":
            correct = stored
            tally["study_value_disagrees"] += by_value != stored
        elif by_value == stored:
            correct = is_correct_value(c.get("value"), target, tolerance=tolerance, rule=rule,
                                       target_kind=kind)
        else:
            correct = grade(c.get("response") or "", target, tolerance=tolerance, rule=rule,
                            target_kind=kind, truncated=bool(c.get("truncated"))).correct
            tally["from_text"] += 1
        graded.append({**c, "correct": correct})
    out = {**record, "correct": graded[0]["correct"],
           "pass_count": sum(c["correct"] for c in graded)}
    if "completions" in record:
        out["completions"] = graded
    return out


def group_scores(records: Sequence[dict], scores: Sequence[float]) -> list[float]:
    """Per paraphrase group (in order of first appearance), the mean of its questions' scores."""
    by: dict[str, list[float]] = {}
    for r, s in zip(records, scores):
        by.setdefault(str(r.get("group") or r["id"]), []).append(s)
    return [sum(v) / len(v) for v in by.values()]


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _group(row: dict) -> str:
    return str(row.get("group") or row["id"])


def fitting_rows(train_rows: Sequence[dict], questions: Sequence[dict]) -> list[dict]:
    """The training rows a guess is fitted on for a set: all of them but the set's own groups
    (the mixed training set is itself training rows; the held-out sets share none)."""
    scored = {_group(r) for r in questions}
    return [r for r in train_rows if _group(r) not in scored]


def _seed_set(models: dict[str, list[dict]], fitted: Fitted, rule: str, tolerance: float,
              tally: dict) -> tuple[dict, dict]:
    """One seed, one set, one rule: ({group scores per model and per guess}, the regraded
    records per model)."""
    graded = {m: [regrade(r, rule, tolerance, tally) for r in recs] for m, recs in models.items()}
    scores = {m: group_scores(recs, [r["pass_count"] / r["samples"] for r in recs])
              for m, recs in graded.items()}
    questions = models[MODELS[0]]
    outcomes = guess_outcomes(questions, fitted, tolerance=tolerance, rule=rule)
    outcomes["constant_check"] = guess_outcomes(questions, Fitted(CHECK_CONSTANT, 0.0),
                                                tolerance=tolerance, rule=rule)["constant"]
    guesses = {g: group_scores(questions, [float(x) for x in hits]) for g, hits in outcomes.items()}
    return {"models": scores, "guesses": guesses}, graded


def reanalyse(seeds: dict[int, dict], *, tolerance: float = 0.05) -> dict:
    """seeds: {seed: {"sets": {set: {model: records}}, "train_rows": [...]}} -> the numbers.

    Per set and rule: each model's and each guess's group-level accuracy pooled over seeds,
    the best guess, each model's gain over the base and margin over the best guess; per set,
    model and rule, the strata of the pooled records; and the regrading tallies."""
    sets = [s for s in SETS if all(s in seed["sets"] for seed in seeds.values())]
    out: dict = {}
    fitted: dict[tuple, Fitted] = {}
    for set_name in sets:
        rules, strata_out, regrading = {}, {m: {} for m in MODELS}, {}
        for rule in RULES:
            tally = {"records": 0, "probability_targets": 0, "completions": 0,
                     "from_text": 0, "study_value_disagrees": 0}
            pooled_models: dict[str, list[float]] = {m: [] for m in MODELS}
            pooled_guesses: dict[str, list[float]] = {}
            pooled_records: dict[str, list[dict]] = {m: [] for m in MODELS}
            seed_of: dict[str, list[str]] = {m: [] for m in MODELS}  # each record's seed
            fits = {}
            for seed, data in seeds.items():
                models = {m: data["sets"][set_name][m] for m in MODELS}
                rows = fitting_rows(data["train_rows"], models[MODELS[0]])
                key = (seed, rule, tuple(r["id"] for r in rows))
                if key not in fitted:
                    fitted[key] = fit_guesses(rows, tolerance=tolerance, rule=rule)
                part, graded = _seed_set(models, fitted[key], rule, tolerance, tally)
                for m in MODELS:
                    pooled_models[m] += part["models"][m]
                    pooled_records[m] += graded[m]
                    seed_of[m] += [str(seed)] * len(graded[m])
                for g, s in part["guesses"].items():
                    pooled_guesses.setdefault(g, []).extend(s)
                fits[str(seed)] = {"constant": fitted[key].constant,
                                   "constant_train_accuracy": fitted[key].train_accuracy,
                                   "families_fitted": len(fitted[key].family_answers),
                                   "train_rows": len(rows)}
            accuracy = {m: _mean(v) for m, v in pooled_models.items()}
            guesses = {g: _mean(v) for g, v in pooled_guesses.items()}
            best = max(GUESSES, key=lambda g: guesses[g])  # the check constant is not a guess
            rules[rule] = {
                "groups": len(pooled_models[MODELS[0]]), "accuracy": accuracy,
                "gain_over_base": {m: accuracy[m] - accuracy["base"] for m in MODELS[1:]},
                "guesses": guesses, "best_guess": best,
                "margin_over_best_guess": {m: accuracy[m] - guesses[best] for m in MODELS},
                "fitted": fits,
                # over questions, groups resampled within their seed (study.at_k)
                "at_k": {m: {"samples": samples_of(pooled_records[m]),
                             **at_k_cells(pooled_records[m], seed_of[m])} for m in MODELS}}
            for m in MODELS:
                strata_out[m][rule] = strata(pooled_records[m])
            regrading[rule] = tally
        out[set_name] = {"rules": rules, "strata": strata_out, "regrading": regrading}
    return out


# ---------------------------------------------------------------------------- Markdown


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _num(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _guess_label(name: str, fits: dict) -> str:
    if name != "constant":
        return {"family_mode": "family mode", "copy": "copy"}[name]
    answers = sorted({f["constant"] for f in fits.values()}, key=lambda v: (v is None, v))
    return "constant " + "/".join("-" if a is None else f"{a:g}" for a in answers)


def folder_tables(folder: dict) -> list[str]:
    """One folder's three tables: accuracy under both rules with the best guess, the guesses,
    and the strata."""
    sets = folder["sets"]
    lines = [f"## {folder['label']}", "",
             "| Set | Rule | Groups | base | SFT | exp7 best | exp10 best | exp7 - base "
             "| Best guess | exp7 - best guess |", "|---|---|---|---|---|---|---|---|---|---|"]
    for set_name, s in sets.items():
        for rule, r in s["rules"].items():
            acc, best = r["accuracy"], r["best_guess"]
            lines.append(
                f"| {SET_NAMES[set_name]} | {rule} | {r['groups']} | "
                + " | ".join(_pct(acc[m]) for m in MODELS)
                + f" | {_pts(r['gain_over_base']['GRPO exp7 best'])} | "
                f"{_guess_label(best, r['fitted'])}: {_pct(r['guesses'][best])} | "
                f"{_pts(r['margin_over_best_guess']['GRPO exp7 best'])} |")
    lines += ["", "| Set | Rule | Constant (answer per seed) | Family mode | Copy | "
              f"{CHECK_CONSTANT:g} everywhere |", "|---|---|---|---|---|---|"]
    for set_name, s in sets.items():
        for rule, r in s["rules"].items():
            g = r["guesses"]
            lines.append(f"| {SET_NAMES[set_name]} | {rule} | {_pct(g['constant'])} "
                         f"({_guess_label('constant', r['fitted']).split(' ', 1)[1]}) | "
                         f"{_pct(g['family_mode'])} | {_pct(g['copy'])} | "
                         f"{_pct(g['constant_check'])} |")
    lines += ["", "| Set | Model | Target in [0.85, 1): study | complement | Other targets: "
              "study | complement | Other targets: answers in [0.85, 1) | Median family rank "
              "correlation (families) |", "|---|---|---|---|---|---|---|---|"]
    for set_name, s in sets.items():
        for m in MODELS:
            st, co = s["strata"][m]["study"], s["strata"][m]["complement"]
            hi, rest = st["by_target_range"]["high"], st["by_target_range"]["rest"]
            rho = st["median_rank_correlation"]
            lines.append(
                f"| {SET_NAMES[set_name]} | {SHORT[m]} | {_pct(hi['accuracy'])} | "
                f"{_pct(co['by_target_range']['high']['accuracy'])} | {_pct(rest['accuracy'])} | "
                f"{_pct(co['by_target_range']['rest']['accuracy'])} | "
                f"{_num(rest['answers_in_range'], '.2f')} | "
                f"{_num(rho, '+.3f')} ({st['families_with_rank_correlation']}) |")
    return lines + at_k_lines(sets)


def at_k_lines(sets: dict) -> list[str]:
    """mean@k and pass@K per set, rule and model with their intervals, for a reanalysis that
    recorded them (older ones did not: nothing)."""
    if not all("at_k" in r for s in sets.values() for r in s["rules"].values()):
        return []
    lines = ["", "| Set | Rule | Metric | " + " | ".join(SHORT[m] for m in MODELS) + " |",
             "|---|---|---|" + "---|" * len(MODELS)]
    for set_name, s in sets.items():
        for rule, r in s["rules"].items():
            cells = r["at_k"]
            names = ["mean@k", pass_name(cells[MODELS[0]])]
            for name in filter(None, names):
                lines.append(f"| {SET_NAMES[set_name]} | {rule} | {name} | "
                             + " | ".join(cell_text(cells[m].get(name)) for m in MODELS) + " |")
    return lines


AT_K_TEXT = (" mean@k and pass@K (K: the samples drawn per question) are averaged over "
             "questions, not groups, with 95% intervals from resampling paraphrase groups within "
             "each seed (`study/at_k.py`).")


def render(result: dict) -> str:
    """The Markdown report of a reanalysis JSON (what evaluation/reanalyse_results.py wrote)."""
    lines = [
        "# Post hoc re-analysis of the committed results", "",
        "Not pre-registered: computed after the replication had run, by "
        "`evaluation/reanalyse_results.py` from the committed per-question records, with no "
        "model run again (`results/reanalysis/reanalysis.json.gz` holds every number, per family "
        "too). Two grading rules, tolerance "
        f"{result['tolerance']:g}: `study`, the relative error of the pre-registered grading "
        "(its model accuracies are the measured ones), and `complement`, where a probability "
        "target t is judged on min(t, 1 - t) (`relrl/grading/scoring.py`; the committed rows carry no "
        "`target_kind`, so a target's kind is inferred from its question by "
        "`target_kind_of`). Accuracies are at the level "
        "of paraphrase groups, pooled over seeds. Guesses (`relrl/evaluation/guess_baselines.py`), each "
        "graded by the same rule: `constant`, the one answer right on most training rows; "
        "`family mode`, per family the answer right on most of its training rows; `copy`, the "
        "last number in the question. The first two are fitted per seed on that seed's "
        "training rows "
        f"({result['training_rows']}), never on the set scored: for the mixed training set, "
        f"on the training rows outside its groups. \"{CHECK_CONSTANT:g} everywhere\" "
        "is a fixed guess, not fitted. The strata count completions; the rank "
        "correlation is Spearman's rho, per family with at least "
        f"{result['min_answered']} answered questions, between each question's answer (the "
        "median of its samples) and its target, then the median over those families (their "
        "number in brackets); it does not depend on the rule." + (
            AT_K_TEXT if any("at_k" in r for f in result["folders"].values()
                             for s in f["sets"].values() for r in s["rules"].values()) else ""), ""]
    for folder in result["folders"].values():
        lines += folder_tables(folder)
        tallies = [f"{SET_NAMES[s]} {v['regrading']['complement']['from_text']}"
                   for s, v in folder["sets"].items()]
        disagree = sum(v["regrading"]["study"]["study_value_disagrees"]
                       for v in folder["sets"].values())
        kinds = [f"{SET_NAMES[s]} {_pct(t['probability_targets'] / t['records'])}"
                 for s, v in folder["sets"].items() for t in [v["regrading"]["complement"]]]
        high = [f"{SET_NAMES[s]} {_pct(part['high']['questions'] / questions)}"
                for s, v in folder["sets"].items()
                for part in [v["strata"]["base"]["study"]["by_target_range"]]
                for questions in [part["high"]["questions"] + part["rest"]["questions"]]]
        lines += ["", f"Targets in [0.85, 1): {', '.join(high)} of the questions. Targets judged "
                  f"as probabilities under `complement`: {', '.join(kinds)}. Regraded from the response text under `complement` (the "
                  f"stored value did not reproduce the stored grade): {', '.join(tallies)} "
                  f"completions; such completions under `study`: {disagree}, kept at their "
                  "stored grade.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"

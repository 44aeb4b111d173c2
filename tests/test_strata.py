"""Stratified accuracy and per-family rank correlation on hand-made records."""
import pytest

from relrl.evaluation.strata import by_family, by_target_range, median_rank_correlation, strata


def record(target, values, correct, family="f"):
    """A K-sample record: `values` the sampled answers, `correct` how many were right."""
    return {"id": f"{family}-{target}-{values}", "target": str(target), "family": family,
            "pass_count": correct, "samples": len(values),
            "completions": [{"value": v} for v in values]}


def test_accuracy_and_answer_share_per_target_range():
    rows = [record(0.9355, [0.95, 0.95, 0.2, None], 2),
            record(0.99, [0.99, 0.5], 1),
            record(0.5, [0.95, 0.9, 0.5, 0.1], 1),  # two answers in [0.85, 1)
            record(1.0, [1.0], 1),                   # 1 is outside [0.85, 1)
            record("31, 521", [31.0], 0)]            # not one number: "rest"
    out = by_target_range(rows)
    assert out["high"] == {"questions": 2, "correct": 3, "total": 6, "accuracy": 0.5,
                           "answers_in_range": pytest.approx(3 / 6)}
    assert out["rest"] == {"questions": 3, "correct": 2, "total": 6,
                           "accuracy": pytest.approx(2 / 6),
                           "answers_in_range": pytest.approx(2 / 6)}


def test_an_empty_stratum_has_no_accuracy():
    out = by_target_range([record(0.5, [0.5], 1)])
    assert out["high"] == {"questions": 0, "correct": 0, "total": 0, "accuracy": None,
                           "answers_in_range": None}


def test_one_sample_records_use_their_own_value():
    rows = [{"id": "a", "target": "0.9", "pass_count": 0, "samples": 1, "value": 0.1},
            {"id": "b", "target": "0.2", "pass_count": 0, "samples": 1, "value": 0.95}]
    out = by_target_range(rows)
    assert out["high"]["answers_in_range"] == 0.0 and out["rest"]["answers_in_range"] == 1.0


def test_a_family_whose_answers_rank_as_its_targets_has_rho_one():
    # answers far from the targets (none correct) but in the same order: rho is about order
    rows = [record(t, [10 * t], 0, "perfect") for t in (0.1, 0.2, 0.3, 0.4, 0.5)]
    rows += [record(t, [v], 0, "reversed") for t, v in zip((0.1, 0.2, 0.3, 0.4, 0.5),
                                                           (5, 4, 3, 2, 1))]
    families = by_family(rows)
    assert families["perfect"]["rank_correlation"] == pytest.approx(1.0)
    assert families["reversed"]["rank_correlation"] == pytest.approx(-1.0)
    assert families["perfect"]["answered"] == 5
    assert median_rank_correlation(families) == pytest.approx(0.0)


def test_a_question_answers_with_the_median_of_its_samples():
    # the medians 1, 2, 3, 4, 5 follow the targets; the first samples alone would not
    rows = [record(t, [9 - i, i + 1, i + 1], 0) for i, t in enumerate((1, 2, 3, 4, 5))]
    assert by_family(rows)["f"]["rank_correlation"] == pytest.approx(1.0)


def test_too_few_answered_questions_give_none_with_the_count():
    rows = [record(t, [t], 1, "small") for t in (0.1, 0.2, 0.3, 0.4)]
    rows.append(record(0.5, [None, None], 0, "small"))  # asked, never answered
    small = by_family(rows)["small"]
    assert small["rank_correlation"] is None and small["answered"] == 4
    assert small["questions"] == 5 and small["accuracy"] == pytest.approx(4 / 6)


def test_constant_answers_give_none():
    rows = [record(t, [0.95], 0, "guess") for t in (0.1, 0.2, 0.3, 0.4, 0.5)]
    assert by_family(rows)["guess"] == {"questions": 5, "correct": 0, "total": 5,
                                        "accuracy": 0.0, "answered": 5, "rank_correlation": None}


def test_summary_counts_families_with_a_correlation():
    rows = [record(t, [t], 1, "a") for t in (1, 2, 3, 4, 5)]
    rows += [record(t, [t], 1, "b") for t in (1, 2)]
    rows.append({"id": "x", "target": "3", "pass_count": 1, "samples": 1, "value": 3})  # no family
    out = strata(rows)
    assert set(out["by_family"]) == {"a", "b"}
    assert out["families_with_rank_correlation"] == 1
    assert out["median_rank_correlation"] == pytest.approx(1.0)
    assert out["high_range"] == [0.85, 1.0]
    assert out["by_target_range"]["rest"]["questions"] == 8


def test_the_evaluation_summary_records_the_strata():
    from relrl.evaluation.model_results import model_result
    from relrl.evaluation.settings import EvalSettings

    rows = [{"id": str(t), "target": str(t), "family": "a", "value": t, "correct": True,
             "truncated": False, "pass_count": 1, "samples": 1} for t in (0.9, 0.2, 0.3, 0.4, 0.5)]
    result = model_result(rows, label="m", model_path="fake", adapter=None, dataset="d.jsonl",
                          fingerprint="x", settings=EvalSettings())
    assert result["strata"]["by_target_range"]["high"]["questions"] == 1
    assert result["strata"]["by_family"]["a"]["rank_correlation"] == pytest.approx(1.0)

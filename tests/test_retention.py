"""The retention set keeps the holdout questions the base screened right often, in order."""
import pytest

from relrl.evaluation.retention import select_retention

HOLDOUT = [{"id": f"q{i}", "group": f"g{i // 2}", "question": "?", "answer": "1"} for i in range(5)]
SCREENED = [{"id": "q0", "base_score": 1, "base_samples": 4}, {"id": "q1", "base_score": 2, "base_samples": 4},
            {"id": "q2", "base_score": 4, "base_samples": 4}, {"id": "q3", "base_score": 0, "base_samples": 4},
            {"id": "q4", "base_score": 3, "base_samples": 4}]


def test_keeps_questions_screened_at_least_min_score_in_holdout_order():
    rows = select_retention(HOLDOUT, reversed(SCREENED), min_score=2)
    assert [r["id"] for r in rows] == ["q1", "q2", "q4"]
    assert [r["base_score"] for r in rows] == [2, 4, 3] and rows[0]["group"] == "g0"


def test_refuses_a_holdout_that_was_not_all_screened():
    with pytest.raises(ValueError, match="not screened"):
        select_retention(HOLDOUT, SCREENED[:4], min_score=2)


def test_leaves_out_whole_groups_of_the_held_out_mixed_set():
    # q0 (1 of 4) and q4 (3 of 4) are mixed: their groups g0 and g2 go, q1 with g0 though it
    # screened right twice; q2 of g1 stays
    mixed_groups = {r["group"] for r, s in zip(HOLDOUT, SCREENED) if 0 < s["base_score"] < 4}
    rows = select_retention(HOLDOUT, SCREENED, min_score=2, exclude_groups=mixed_groups)
    assert mixed_groups == {"g0", "g2"} and [r["id"] for r in rows] == ["q2"]

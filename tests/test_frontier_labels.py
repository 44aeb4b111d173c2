"""The grader against 162 labelled frontier-model answers to the 54-question holdout.

The labels were made by an LLM extractor plus a 5% numeric check (see the seed folder's
README), so they are noisy. Every row where the grader (allow_plain=True) and the label disagree
is listed below with its cause after reading the response; the grader was changed only where it
was wrong, never to match a wrong label.
"""
import json

import pytest
from conftest import SEED_DATA

from relrl.grading.scoring import grade

FOLDER = SEED_DATA / "frontier_holdout_54q"
pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason=f"{FOLDER} is not here")

LABEL_WRONG, CUT_OFF, GRADER_WRONG = "label wrong", "response cut off", "grader wrong"

# (model, row index) -> (cause, what the response says)
DISAGREEMENTS = {
    ("gemini-3.1-pro-preview", 0): (
        CUT_OFF, "200 characters: computes 774.2337 as a step, then 'Wait, let me re-read the "
                 "question' and stops; it never answers, the label credits the step"),
    ("gemini-3.1-pro-preview", 17): (
        CUT_OFF, "stops at '**Step 1: Identify the given'; the 29965.38 the label credits "
                 "appears nowhere in the response"),
    ("gemini-3.1-pro-preview", 30): (
        CUT_OFF, "stops mid-product '0.992 \\times 0.991 \\'; the 0.981 the label credits "
                 "appears nowhere"),
    ("gemini-3.1-pro-preview", 36): (
        CUT_OFF, "stops at 'Divide by 0.099' before dividing; the label credits 0.9596, which "
                 "the response never writes"),
    ("o3-mini", 16): (
        CUT_OFF, "stops mid-term 'Term3 = 20 × 0.80436 ×'; the label credits a value "
                 "(0.9999999999999999) that is not in the response"),
    ("o3-mini", 6): (
        LABEL_WRONG, "'FINAL ANSWER: 5.70×10⁻⁵ failures per hour.' is the ground truth 5.70e-5; "
                     "the labeller could not read the unicode superscript"),
    ("o3-mini", 15): (
        LABEL_WRONG, "'λ̂ = 12/1159, or approximately 0.01035 per hour': both forms are the "
                     "ground truth 0.010353, the labeller took them for two answers"),
    ("o3-mini", 18): (
        LABEL_WRONG, "the question asks only for R(49); the final answer lists λ = 0.01035, "
                     "then 'Reliability at t = 49 hours ≈ 0.6023', 0.03% from 0.6021"),
}


def labelled_rows():
    for path in sorted(FOLDER.glob("*_results.json")):
        model = path.name[: -len("_results.json")]
        for index, row in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            yield model, index, row


@pytest.fixture(scope="module")
def results():
    """(model, index, row, Grade) for every labelled answer; a null response grades as empty."""
    return [(model, index, row, grade(row["model_response"] or "", row["ground_truth"],
                                      allow_plain=True))
            for model, index, row in labelled_rows()]


def test_all_162_labelled_answers_are_read(results):
    assert len(results) == 162
    assert all(g.target is not None for *_, g in results)  # every ground truth is one number


def test_agreement_with_labels_is_at_least_95_percent(results):
    agree = sum(g.correct == row["correct"] for _, _, row, g in results)
    assert agree / len(results) >= 0.95, f"agreement {agree}/{len(results)}"


def test_every_disagreement_is_known_and_explained(results):
    found = {(model, index) for model, index, row, g in results if g.correct != row["correct"]}
    assert found == set(DISAGREEMENTS)
    assert all(cause != GRADER_WRONG for cause, _ in DISAGREEMENTS.values())


def test_where_the_label_is_wrong_the_grader_reads_the_right_value(results):
    by_key = {(model, index): g for model, index, _, g in results}
    assert by_key["o3-mini", 6].value == pytest.approx(5.70e-5)
    assert by_key["o3-mini", 15].value == pytest.approx(12 / 1159)
    assert by_key["o3-mini", 18].value == pytest.approx(0.6023)


def test_cut_off_responses_give_no_credit(results):
    by_key = {(model, index): g for model, index, _, g in results}
    for key, (cause, _) in DISAGREEMENTS.items():
        if cause == CUT_OFF:
            assert not by_key[key].correct

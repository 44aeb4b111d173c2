"""The problem families and dataset assembly: registry coverage, row schema, worked solutions
graded correct by the shared grader, determinism, paraphrase groups, split hygiene."""
import math
import re

import numpy as np
import pytest

from relrl.grading.numbers import parse_target
from relrl.grading.scoring import grade
from relrl.problems.base import sig, tex, txt
from relrl.problems.dataset import count_rows, generate_rows, split_rows
from relrl.problems.registry import FAMILIES, TOPICS, select

FIELDS = ["question", "answer", "answer_type", "source", "reasoning", "id", "group", "family",
          "topic", "difficulty", "target_kind"]


@pytest.fixture(scope="module")
def master():
    return generate_rows(list(FAMILIES.values()), 866, seed=0)


def test_registry_covers_enough_families_and_topics():
    assert len(FAMILIES) >= 30
    assert len(TOPICS) >= 9
    assert {f.difficulty for f in FAMILIES.values()} == {1, 2, 3}
    for family in FAMILIES.values():
        assert len(family.phrasings) >= 3, family.name
        assert family.asks and family.check_how, family.name


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_problems_are_well_formed(name):
    family = FAMILIES[name]
    for seed in range(3):
        problem = family.generate(np.random.default_rng([seed, 99]))
        assert math.isfinite(problem.value)
        assert problem.answer == family.answer_text(problem.value)
        assert len(set(problem.questions)) == len(problem.questions) >= 3
        assert problem.reasoning.count("\\boxed{") == 1
        assert f"\\boxed{{{problem.answer}}}" in problem.reasoning.splitlines()[-1]
        result = grade(problem.reasoning, problem.answer)
        assert result.correct and result.rel_error == 0, (name, problem.reasoning)


def test_master_set_matches_the_study_shape(master):
    assert len(master) == 866
    assert len({r["family"] for r in master}) >= 30
    assert len({r["topic"] for r in master}) >= 9
    assert len({r["question"] for r in master}) == 866
    assert len({r["id"] for r in master}) == 866
    for row in master:
        # families with a calculator expression add it last (tests/test_family_expressions.py)
        extra = ["expression"] if FAMILIES[row["family"]].expression else []
        assert list(row) == FIELDS + extra
        value, reason = parse_target(row["answer"])
        assert value is not None and math.isfinite(value), reason
        assert row["answer_type"] == "numeric"
        assert row["source"] == f"generated:{row['family']}"
        assert row["topic"] == FAMILIES[row["family"]].topic
        assert row["difficulty"] == FAMILIES[row["family"]].difficulty
        assert grade(row["reasoning"], row["answer"]).correct, row["id"]


def test_paraphrases_share_group_answer_and_solution(master):
    groups: dict[str, list[dict]] = {}
    for row in master:
        groups.setdefault(row["group"], []).append(row)
    assert 250 <= len(groups) <= 300  # the study: 280 base problems + 586 paraphrases
    for rows in groups.values():
        assert len({r["answer"] for r in rows}) == 1
        assert len({r["reasoning"] for r in rows}) == 1
        assert len({r["question"] for r in rows}) == len(rows)
    assert sum(len(rows) == 3 for rows in groups.values()) >= len(groups) - 1


def test_no_parameter_draw_repeats_across_groups(master):
    # the same numbers in two groups would leak a problem across splits
    signatures = {}
    for row in master:
        numbers = tuple(sorted(re.findall(r"\d+(?:\.\d+)?", row["question"])))
        other = signatures.setdefault((row["family"], numbers), row["group"])
        assert other == row["group"], (row["family"], numbers)


def test_same_seed_same_rows_other_seed_other_rows():
    families = list(FAMILIES.values())
    assert generate_rows(families, 120, seed=5) == generate_rows(families, 120, seed=5)
    first = {r["question"] for r in generate_rows(families, 120, seed=5)}
    second = {r["question"] for r in generate_rows(families, 120, seed=6)}
    assert len(first & second) < 5


def test_paraphrase_count_is_capped_by_the_phrasings():
    families = list(FAMILIES.values())
    base_only = generate_rows(families, 70, seed=1, paraphrases=0)
    assert len({r["group"] for r in base_only}) == 70
    many = generate_rows(families, 90, seed=1, paraphrases=10)
    sizes = {}
    for row in many:
        sizes[row["group"]] = sizes.get(row["group"], 0) + 1
    assert max(sizes.values()) == 3


def test_filters_select_families():
    assert {f.difficulty for f in select(difficulties=[1])} == {1}
    assert {f.topic for f in select(topics=["spares"])} == {"spares"}
    rows = generate_rows(select(families=["bridge", "exp_reliability"]), 30, seed=2)
    assert {r["family"] for r in rows} == {"bridge", "exp_reliability"}
    with pytest.raises(ValueError, match="unknown family nope"):
        select(families=["nope"])
    with pytest.raises(ValueError, match="unknown topic"):
        select(topics=["astrology"])


def test_exhausting_a_small_family_is_an_error():
    family = FAMILIES["zero_failure_sample_size"]  # 20 reliabilities x 6 confidences = 120
    rows = generate_rows([family], 100, seed=0, paraphrases=0)
    assert len({r["question"] for r in rows}) == 100
    with pytest.raises(ValueError, match="no new distinct problem"):
        generate_rows([family], 200, seed=0, paraphrases=0)


def test_exclude_keeps_a_separate_test_set_disjoint(master):
    seen = frozenset(r["question"] for r in master)
    # the same seed would redraw the master's problems first: all of them must be skipped
    rows = generate_rows(list(FAMILIES.values()), 150, seed=0, paraphrases=0, exclude=seen)
    assert len(rows) == 150 and not seen & {r["question"] for r in rows}


@pytest.mark.parametrize("value, text", [
    (0.994512, "0.9945"), (870.0, "870"), (123456.0, "123500"), (0.00012345, "0.0001234"),
    (1.23456e-7, "1.235e-7"), (2.5e-7, "2.5e-7"), (1234567.0, "1.235e6"), (-0.5, "-0.5"),
])
def test_answers_have_four_significant_figures(value, text):
    assert sig(value) == text


def test_number_formatting_in_text():
    assert txt(5.800000000000001) == "5.8"
    assert txt(12000.0, comma=True) == "12,000"
    assert txt(2.5e-5) == "2.5 × 10^-5"
    assert tex(2.5e-5) == "2.5\\times10^{-5}"
    assert tex(0.123456789) == "0.12346"


def test_split_keeps_groups_whole(master):
    splits = split_rows(master, seed=0, val_frac=0.1, holdout_frac=0.1)
    assert sum(len(rows) for rows in splits.values()) == len(master)
    owners = {}
    for name, rows in splits.items():
        for row in rows:
            assert owners.setdefault(row["group"], name) == name
    n_groups = len(owners)
    assert len({r["group"] for r in splits["val"]}) == round(0.1 * n_groups)
    assert len({r["group"] for r in splits["holdout"]}) == round(0.1 * n_groups)
    assert split_rows(master, 0, 0.1, 0.1) == splits
    assert split_rows(master, 1, 0.1, 0.1)["val"] != splits["val"]


def test_split_holds_out_whole_families_and_topics(master):
    splits = split_rows(master, 0, 0.1, 0.1, ood_families=["bridge", "weibull_mrl"])
    assert {r["family"] for r in splits["ood"]} == {"bridge", "weibull_mrl"}
    assert all(r["family"] not in {"bridge", "weibull_mrl"}
               for name in ("train", "val", "holdout") for r in splits[name])
    by_topic = split_rows(master, 0, 0.1, 0.1, ood_topics=["growth"])
    assert {r["topic"] for r in by_topic["ood"]} == {"growth"}
    assert len(by_topic["ood"]) == sum(r["topic"] == "growth" for r in master)


def test_counts(master):
    counts = count_rows(master)
    assert counts["rows"] == 866
    assert sum(counts["by_topic"].values()) == 866
    assert sum(counts["by_difficulty"].values()) == 866
    assert set(counts["by_family"]) == {r["family"] for r in master}

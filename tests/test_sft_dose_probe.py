"""The SFT dose probe (issue 46, item 1): development seeds only, SFT data disjoint from the
held-out questions, and its table computed from the files: the change on the SFT topics and
on the others, paired over groups, and the manipulation check on every sample."""
import importlib.util
import json

import pytest
from conftest import ROOT

from relrl.runtime.cli import UsageError


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "evaluation" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


probe, table = load("sft_dose_probe"), load("sft_dose_table")


@pytest.mark.parametrize("seed", [21, 22, 23, 2, 99])
def test_a_seed_that_could_be_confirmatory_is_refused(seed):
    with pytest.raises(UsageError, match="development seeds only"):
        probe.check_seed(seed)


@pytest.mark.parametrize("seed", [0, 1, 100, 137])
def test_development_seeds_pass(seed):
    probe.check_seed(seed)


def row(i, topic, group=None, expression="x1 = 2; x1 * 3", question=None):
    return {"id": f"q{i}", "group": group or f"g{i}", "topic": topic,
            "question": question or f"question {i} with 2 and 3", "answer": "6",
            **({"expression": expression} if expression else {})}


def test_sft_takes_its_topics_tool_solutions_and_evaluation_the_whole_holdout():
    non_mixed = [row(0, "availability"), row(1, "basic"), row(2, "availability", expression=None)]
    holdout = [row(10, "availability"), row(11, "basic")]
    sft, held = probe.split_rows(non_mixed, holdout, {"availability"})
    assert [r["id"] for r in sft] == ["q0"] and held == holdout


@pytest.mark.parametrize("leak", [dict(group="g0"), dict(question="question 0 with 2 and 3")])
def test_a_held_out_question_in_the_sft_data_is_refused(leak):
    non_mixed = [row(0, "availability")]
    holdout = [row(10, "availability", **leak), row(11, "basic")]
    with pytest.raises(UsageError, match="1 held-out questions are in the SFT data"):
        probe.split_rows(non_mixed, holdout, {"availability"})


def test_other_groups_keeps_the_sft_topics_whole_and_that_many_other_groups():
    holdout = [row(i, "availability") for i in range(4)] + \
        [row(10 + i, "basic", group=f"b{i // 2}") for i in range(8)]
    _, held = probe.split_rows([row(99, "availability")], holdout, {"availability"},
                               other_groups=2, seed=100)
    assert sum(r["topic"] == "availability" for r in held) == 4
    assert len({r["group"] for r in held if r["topic"] == "basic"}) == 2
    assert len(held) == 8  # both paraphrases of each kept group
    _, again = probe.split_rows([row(99, "availability")], holdout, {"availability"},
                                other_groups=2, seed=100)
    assert again == held


def test_a_holdout_without_other_topics_is_refused():
    with pytest.raises(UsageError, match="questions of the SFT topics and of others"):
        probe.split_rows([row(0, "availability")], [row(10, "availability")], {"availability"})


def record(i, topic, group, correct, *, calls=1, errors=0, copy=True):
    """One question, two samples; `correct` the pass count; copy: the call's numbers are the
    question's (2 and 3) or not (7)."""
    number = "2" if copy else "7"
    call = ('<tool_call>\n{"name": "calculator", "arguments": {"expression": '
            f'"x1 = {number}; x2 = 3; x1 * x2"}}}}\n</tool_call>' if calls else "")
    samples = [{"correct": k < correct, "transcript": call, "tool_calls": calls,
                "tool_errors": errors} for k in range(2)]
    return {"id": f"q{i}", "group": group, "topic": topic, "question": "with 2 and 3",
            "pass_count": correct, "samples": 2, "completions": samples}


def test_table_splits_own_and_other_topics_pairs_groups_and_checks_tool_use(tmp_path):
    base = [record(0, "availability", "a", 0), record(1, "availability", "a", 0),
            record(2, "availability", "b", 1), record(3, "basic", "c", 2),
            record(4, "basic", "d", 2)]
    ft = [record(0, "availability", "a", 2), record(1, "availability", "a", 2),
          record(2, "availability", "b", 2), record(3, "basic", "c", 0, calls=0),
          record(4, "basic", "d", 2, errors=1, copy=False)]
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "sft-20.json").write_text(json.dumps(
        {"base": {"results": base}, "finetuned": {"results": ft}}))
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "sft-20.json").write_text(json.dumps(
        {"steps": 20, "items": 7, "losses": [2.0] + [1.0] * 18 + [0.5], "settings": {}}))
    result = table.analyse(tmp_path, {"availability"}, [20])["20"]
    own, other = result["own"], result["other"]
    # groups a (0 -> 1) and b (0.5 -> 1): +0.75 over 2 groups
    assert own["change"]["groups"] == 2 and own["change"]["delta"] == pytest.approx(0.75)
    assert own["change"]["questions"] == 3
    assert other["change"]["delta"] == pytest.approx(-0.5)  # c: 1 -> 0, d: 1 -> 1
    assert result["positive_control"] is False  # two groups: the exact test's p is 0.5
    # loss over the first and last 10% of the 20 steps (2 each)
    assert (result["steps"], result["examples"]) == (20, 7)
    assert (result["loss_first"], result["loss_last"]) == (1.5, 0.75)
    assert other["base_use"] == {"samples": 4, "accuracy": 1.0, "call": 1.0, "value": 1.0,
                                 "copied": 1.0, "copied_of_calls": 1.0}
    # c: no call; d: a call answered with an error, its numbers not the question's
    assert other["sft_use"] == {"samples": 4, "accuracy": 0.5, "call": 0.5, "value": 0.0,
                                "copied": 0.0, "copied_of_calls": 0.0}
    text = table.render({"seed": 100, "topics": ["availability"], "doses": {"20": result}})
    assert "development seed 100" in text and "| 20 | 7 | 1.500 -> 0.750 |" in text


def test_a_gain_on_enough_groups_passes_the_positive_control(tmp_path):
    base = [record(i, "availability", f"a{i}", 0) for i in range(6)] + [record(9, "basic", "c", 1)]
    ft = [record(i, "availability", f"a{i}", 2) for i in range(6)] + [record(9, "basic", "c", 1)]
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "sft-60.json").write_text(json.dumps(
        {"base": {"results": base}, "finetuned": {"results": ft}}))
    result = table.analyse(tmp_path, {"availability"}, [60])["60"]
    assert result["own"]["change"]["p"] == pytest.approx(2 / 64)  # every sign the same
    assert result["positive_control"] is True and result["steps"] is None  # no SFT file

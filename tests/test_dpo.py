"""DPO: the loss against hand-computed values, pair building, bad input, and a tiny-random run
whose chosen-minus-rejected margin grows."""
import importlib.util
import json
import math
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from relrl.finetune.dpo_loss import dpo_loss

# Two pairs: (policy chosen, policy rejected, reference chosen, reference rejected).
# Pair 1: log-ratio gap (-1 - -2) - (-3 - -2) = 2; pair 2: (-5 - -4) - (-4 - -4) = -1.
PC, PR, RC, RR = [-1.0, -5.0], [-3.0, -4.0], [-2.0, -4.0], [-2.0, -4.0]


def _tensors(requires_grad=False):
    return [torch.tensor(v, requires_grad=requires_grad) for v in (PC, PR, RC, RR)]


def test_sigmoid_loss_matches_hand_values():
    pc, pr, rc, rr = _tensors(requires_grad=True)
    out = dpo_loss(pc, pr, rc, rr, beta=0.1)
    # -log sigmoid(0.1 * 2) = log(1 + e^-0.2); -log sigmoid(-0.1) = log(1 + e^0.1)
    expected = (math.log1p(math.exp(-0.2)) + math.log1p(math.exp(0.1))) / 2
    assert out.loss.item() == pytest.approx(expected, abs=1e-6)
    assert out.loss.item() == pytest.approx(0.6712678, abs=1e-6)
    assert out.chosen_rewards.tolist() == pytest.approx([0.1, -0.1])
    assert out.rejected_rewards.tolist() == pytest.approx([-0.1, 0.0])
    assert out.margins.tolist() == pytest.approx([0.2, -0.1])
    assert out.accuracy.item() == 0.5
    out.loss.backward()
    # d/d pc of -log sigmoid(beta * gap) / 2 = -beta * sigmoid(-beta * gap) / 2
    assert pc.grad[0].item() == pytest.approx(-0.1 / (1 + math.exp(0.2)) / 2, abs=1e-7)
    assert pr.grad[0].item() == pytest.approx(0.1 / (1 + math.exp(0.2)) / 2, abs=1e-7)
    assert pc.grad[0].item() == pytest.approx(-0.0225083, abs=1e-7)


def test_ipo_loss_matches_hand_values():
    out = dpo_loss(*_tensors(), beta=0.1, loss_type="ipo")
    # (gap - 1 / (2 * 0.1))^2: (2 - 5)^2 = 9 and (-1 - 5)^2 = 36
    assert out.loss.item() == pytest.approx(22.5)
    out = dpo_loss(*_tensors(), beta=0.5, loss_type="ipo")
    assert out.loss.item() == pytest.approx(((2 - 1) ** 2 + (-1 - 1) ** 2) / 2)


def test_beta_scales_rewards_and_equal_policy_gives_log2():
    pc, pr, rc, rr = _tensors()
    out = dpo_loss(pc, pr, rc, rr, beta=0.5)
    assert out.margins.tolist() == pytest.approx([1.0, -0.5])
    same = dpo_loss(rc, rr, rc, rr, beta=0.1)  # policy == reference: margin 0, loss log 2
    assert same.loss.item() == pytest.approx(math.log(2))
    assert same.accuracy.item() == 0.0


def test_bad_loss_arguments():
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(*_tensors(), beta=0.0)
    with pytest.raises(ValueError, match="loss_type"):
        dpo_loss(*_tensors(), loss_type="hinge")


# ---------------------------------------------------------------------------- pairs


def _completion(text, correct, truncated=False):
    return {"response": text, "correct": correct, "truncated": truncated, "extracted": None,
            "value": None, "reward": float(correct)}


def screening_file(path, questions):
    """A screening.json as evaluation/screen_v4.py writes it: K completions per question."""
    results = []
    for qid, (question, outcomes) in questions.items():
        completions = [_completion(f"{qid} answer {j} \\boxed{{{j}}}", ok)
                       for j, ok in enumerate(outcomes)]
        results.append({"id": qid, "question": question, "target": "1", **completions[0],
                        "pass_count": sum(outcomes), "samples": len(outcomes),
                        "completions": completions})
    path.write_text(json.dumps({"kind": "screening", "samples": 4, "results": results}))
    return path


def test_pairs_from_screening_pair_right_with_wrong_answers(tmp_path):
    from relrl.finetune.dpo_trainer import load_pairs

    path = screening_file(tmp_path / "screening.json", {
        "a": ("Question A?", [True, False, False, True]),   # 2 right, 2 wrong: 2 pairs
        "b": ("Question B?", [True, True, True, True]),     # no wrong answer: no pair
        "c": ("Question C?", [False, True, False, False]),  # 1 right: 1 pair
    })
    pairs = load_pairs([str(path)])
    assert [(p.id, p.chosen, p.rejected) for p in pairs] == [
        ("a", "a answer 0 \\boxed{0}", "a answer 1 \\boxed{1}"),
        ("a", "a answer 3 \\boxed{3}", "a answer 2 \\boxed{2}"),
        ("c", "c answer 1 \\boxed{1}", "c answer 0 \\boxed{0}"),
    ]
    assert all(p.question == {"a": "Question A?", "c": "Question C?"}[p.id] for p in pairs)
    assert len(load_pairs([str(path)], max_per_question=1)) == 2


def test_result_files_whose_questions_differ_are_refused(tmp_path):
    from relrl.data.dataset_io import DatasetError
    from relrl.finetune.dpo_trainer import load_pairs

    first = screening_file(tmp_path / "s1.json", {"a": ("Question A?", [True, False])})
    second = screening_file(tmp_path / "s2.json", {"a": ("Another question?", [False, True])})
    with pytest.raises(DatasetError, match="question a differs .* pairs must share a question"):
        load_pairs([str(first), str(second)])


@pytest.mark.parametrize("row, message", [
    ({"chosen": [{"role": "user", "content": "Q1?"}, {"role": "assistant", "content": "1"}],
      "rejected": [{"role": "user", "content": "Q2?"}, {"role": "assistant", "content": "2"}]},
     "chosen and rejected answer different questions"),
    ({"question": "Q?", "chosen": "  ", "rejected": "2"}, "empty chosen text"),
    ({"question": "Q?", "chosen": "1", "rejected": ""}, "empty rejected text"),
    ({"question": "Q?", "chosen": "1"}, "needs 'chosen' and 'rejected'"),
])
def test_bad_preference_rows_name_their_line(tmp_path, row, message):
    from relrl.data.dataset_io import DatasetError
    from relrl.finetune.dpo_trainer import load_pairs

    good = {"question": "Fine?", "chosen": "yes \\boxed{1}", "rejected": "no \\boxed{2}"}
    path = tmp_path / "prefs.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match=f"prefs.jsonl:2: .*{message}"):
        load_pairs([str(path)])


def test_conversational_preferences_share_their_question(tmp_path):
    from relrl.finetune.dpo_trainer import load_pairs

    turn = lambda q, a: [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    path = tmp_path / "prefs.jsonl"
    path.write_text(json.dumps({"chosen": turn("Q?", "good"), "rejected": turn("Q?", "bad")}))
    (pair,) = load_pairs([str(path)])
    assert (pair.question, pair.chosen, pair.rejected) == ("Q?", "good", "bad")


def test_cli_bad_pairs_exit_2_in_one_line(tmp_path):
    path = tmp_path / "prefs.jsonl"
    path.write_text(json.dumps({"question": "Q?", "chosen": "", "rejected": "x"}) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "training" / "dpo_train.py"), "--model",
                          "tiny-random", "--pairs-from", str(path), "--output-dir",
                          str(tmp_path / "o")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {path}:1: empty chosen text"
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------- training


def test_margin_grows_on_tiny_random(tmp_path):
    """DPO on a toy preference set: the chosen-minus-rejected implicit reward margin starts at
    exactly 0 (a new LoRA is the reference) and grows; the reference is the adapter-off model."""
    spec = importlib.util.spec_from_file_location("dpo_train", ROOT / "training" / "dpo_train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = [{"question": f"What is {i} plus {i}?", "chosen": f"{i} + {i} = {2 * i}. \\boxed{{{2 * i}}}",
             "rejected": f"It is {2 * i + 1}. \\boxed{{{2 * i + 1}}}"} for i in range(4)]
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "dpo"
    assert script.main(["--model", "tiny-random", "--pairs-from", str(prefs), "--output-dir",
                        str(out), "--learning-rate", "1e-3", "--epochs", "6", "--micro-batch",
                        "2", "--grad-accum", "2", "--lora-r", "4"]) == 0
    stats = json.loads((out / "statistics.json").read_text())
    margins, accuracies = stats["margins"], stats["accuracies"]
    assert len(margins) == 6 and margins[0] == 0.0
    assert margins[-1] > 0.3 and margins[-1] > max(margins[:3])
    assert accuracies[-1] == 1.0
    assert stats["losses"][0] == pytest.approx(math.log(2), abs=1e-6)
    assert stats["losses"][-1] < stats["losses"][0]
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    assert len((out / "pairs.jsonl").read_text().splitlines()) == 4
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert [x["margin"] for x in log] == margins and all("chosen_reward" in x for x in log)

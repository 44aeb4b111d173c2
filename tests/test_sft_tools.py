"""SFT with --tools calculator: the tool-using worked solution, its inserted tokens out of the
labels and the loss, the fallback for rows without an expression, truncation, the fingerprint
of runs without tools, and a short run's files."""
import importlib.util
import json
import re

import pytest
import torch
import yaml
from conftest import ROOT

from relrl.data.prompting import build_prompt
from relrl.data.tool_solutions import encode_segments, tool_solution
from relrl.finetune.examples import IGNORE, build_examples, collate_examples
from relrl.modeling.tiny_tokenizer import fixed_tokenizer
from relrl.runtime.cli import UsageError

CALL = ('<tool_call>\n{"name": "calculator", "arguments": {"expression": '
        '"x1 = 0.002; x2 = 500; exp(-x1*x2)"}}\n</tool_call><|im_end|>')
INSERTED = ("\n<|im_start|>user\n<tool_response>\n0.3678794412\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n")
ANSWER = "Answer: \\boxed{0.3679}<|im_end|>"


@pytest.fixture(scope="module")
def tok():
    return fixed_tokenizer()


def tool_row(**extra):
    return {"id": "r0", "group": "g0", "question": "A unit has failure rate 0.002 per hour. "
            "Find its reliability at 500 h.", "answer": "0.3679", "answer_type": "numeric",
            "source": "toy", "reasoning": "R = exp(-0.002 * 500) = 0.3679. \\boxed{0.3679}",
            "expression": "exp(-0.002*500)", **extra}


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


# ---------------------------------------------------------------------------- the solution


def test_tool_solution_segments_are_the_call_the_inserted_answer_and_the_boxed_answer(tok):
    assert tool_solution(tok, tool_row()) == [(CALL, True), (INSERTED, False), (ANSWER, True)]
    # the answer as the row states it, not the calculator's digits
    assert tool_solution(tok, tool_row(answer="0.368"))[2] == ("Answer: \\boxed{0.368}<|im_end|>", True)
    assert tool_solution(tok, {**tool_row(), "expression": ""}) is None
    no_expression = tool_row()
    del no_expression["expression"]
    assert tool_solution(tok, no_expression) is None


def test_an_expression_the_calculator_refuses_is_a_data_error(tok):
    with pytest.raises(ValueError, match=re.escape("row 'r0': the calculator refuses its expression "
                                                   "'frobnicate(2)'")):
        tool_solution(tok, tool_row(expression="frobnicate(2)"))


def test_segments_are_tokenised_one_by_one(tok):
    got_ids, mask = encode_segments(tok, [(CALL, True), (INSERTED, False), (ANSWER, True)])
    call, inserted, answer = ids(tok, CALL), ids(tok, INSERTED), ids(tok, ANSWER)
    assert got_ids == call + inserted + answer
    assert mask == [1] * len(call) + [0] * len(inserted) + [1] * len(answer)
    assert call[-1] == answer[-1] == tok.convert_tokens_to_ids("<|im_end|>")


# ---------------------------------------------------------------------------- examples


def test_labels_skip_exactly_the_prompt_and_the_inserted_ids(tok):
    rows = [tool_row(), tool_row(id="r1", question="For a failure rate of 0.002/h, the "
                                 "reliability at 500 h, to four significant figures?")]
    examples, stats = build_examples(rows, tok, 4096, tools="calculator")
    assert stats.tool_solutions == 2 and stats.plain_reasoning == 0 and stats.tools == "calculator"
    call, inserted, answer = ids(tok, CALL), ids(tok, INSERTED), ids(tok, ANSWER)
    batch = collate_examples(examples, tok.pad_token_id)
    assert (batch.attention_mask == 0).any()  # the two prompts differ in length: padded
    width = batch.prompt_width
    for i, (ex, row) in enumerate(zip(examples, rows)):
        prompt = build_prompt(tok, row["question"], tools="calculator")
        assert "<tools>" in prompt
        assert ex.prompt_ids == ids(tok, prompt)
        assert ex.completion_ids == call + inserted + answer
        labels = batch.labels[i].tolist()
        assert labels[:width] == [IGNORE] * width
        assert labels[width:width + len(ex.completion_ids)] == \
            call + [IGNORE] * len(inserted) + answer
        assert batch.input_ids[i, width - len(ex.prompt_ids):width + len(ex.completion_ids)].tolist() \
            == ex.prompt_ids + ex.completion_ids
        assert ex.trained_tokens == len(call) + len(answer)


def test_loss_reads_only_the_model_written_tokens():
    """token_nll's sum and count equal a hand computation over the labelled tokens, and the
    count leaves the inserted ids out."""
    from relrl.finetune.sft_trainer import token_nll
    from relrl.models.by_name import load_model

    model, tok = load_model("tiny-random")
    examples, _ = build_examples([tool_row()], tok, 4096, tools="calculator")
    ex = examples[0]
    batch = collate_examples(examples, tok.pad_token_id)
    with torch.no_grad():
        nll, count = token_nll(model, batch)
        full = torch.tensor([ex.prompt_ids + ex.completion_ids])
        logp = torch.log_softmax(model(input_ids=full).logits[0, :-1].float(), dim=-1)
        targets = full[0, 1:]
        own = torch.tensor([0] * (len(ex.prompt_ids) - 1) + ex.completion_mask, dtype=torch.bool)
        hand = -logp[torch.arange(len(targets)), targets][own].sum()
    assert count == ex.trained_tokens == len(ids(tok, CALL)) + len(ids(tok, ANSWER))
    assert count < len(ex.completion_ids)
    assert nll.item() == pytest.approx(hand.item(), rel=1e-5)


def test_rows_without_expression_train_on_their_reasoning_and_are_counted(tok):
    plain = {k: v for k, v in tool_row(id="r1").items() if k != "expression"}
    examples, stats = build_examples([tool_row(), plain], tok, 4096, tools="calculator")
    assert (stats.tool_solutions, stats.plain_reasoning) == (1, 1)
    assert stats.warnings() == ["1 of 2 rows have no `expression`: trained on their plain worked "
                                "solution, without a tool call"]
    fallback = examples[1]
    assert fallback.prompt_ids == ids(tok, build_prompt(tok, plain["question"], tools="calculator"))
    assert fallback.completion_ids == ids(tok, plain["reasoning"] + "<|im_end|>")
    assert fallback.completion_mask == [1] * len(fallback.completion_ids)


def test_without_tools_rows_with_an_expression_train_as_before(tok):
    examples, stats = build_examples([tool_row()], tok, 4096)
    assert (stats.tool_solutions, stats.plain_reasoning, stats.warnings()) == (0, 0, [])
    ex = examples[0]
    assert ex.prompt_ids == ids(tok, build_prompt(tok, tool_row()["question"]))
    assert "<tools>" not in tok.decode(ex.prompt_ids)
    assert ex.completion_ids == ids(tok, tool_row()["reasoning"] + "<|im_end|>")
    assert ex.completion_mask == [1] * len(ex.completion_ids)


def test_truncation_cuts_ids_and_mask_together(tok):
    full, _ = build_examples([tool_row()], tok, 4096, tools="calculator")
    prompt_len, call_len = len(full[0].prompt_ids), len(ids(tok, CALL))
    cut_at = call_len + 5  # inside the inserted tool answer
    examples, stats = build_examples([tool_row()], tok, prompt_len + cut_at, tools="calculator")
    ex = examples[0]
    assert stats.truncated == 1
    assert ex.completion_ids == full[0].completion_ids[:cut_at]
    assert ex.completion_mask == [1] * call_len + [0] * 5
    labels = collate_examples(examples, tok.pad_token_id).labels[0, prompt_len:].tolist()
    assert labels == ids(tok, CALL) + [IGNORE] * 5


def test_tools_enter_the_fingerprint_only_when_on():
    from relrl.finetune.sft_trainer import SFTConfig

    assert "tools" not in SFTConfig().settings()  # runs recorded before the setting resume
    assert SFTConfig(tools="calculator").settings()["tools"] == "calculator"
    assert SFTConfig(tools="calculator").settings() != SFTConfig().settings()


# ---------------------------------------------------------------------------- a short run


def sft_main(*args):
    spec = importlib.util.spec_from_file_location("sft_qwen3_kfold",
                                                  ROOT / "training" / "sft_qwen3_kfold.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main([str(a) for a in args])


def test_short_run_with_the_calculator_writes_an_adapter_and_records_tools(tmp_path, capsys):
    rows = [tool_row(id=f"r{k}", group=f"g{k}") for k in range(3)]
    rows.append({k: v for k, v in tool_row(id="r3", group="g3").items() if k != "expression"})
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    assert sft_main("--model", "tiny-random", "--dataset", data, "--output-dir", run,
                    "--train-all", "--folds", "1", "--epochs", "1", "--lora-r", "4",
                    "--grad-accum", "2", "--tools", "calculator") == 0
    assert (run / "adapters" / "all" / "adapter_model.safetensors").is_file()
    assert yaml.safe_load((run / "config.yaml").read_text())["tools"] == "calculator"
    stats = json.loads((run / "all" / "statistics.json").read_text())
    assert (stats["tools"], stats["tool_solutions"], stats["plain_reasoning"]) == ("calculator", 3, 1)
    assert stats["settings"]["tools"] == "calculator"
    log = [json.loads(line) for line in (run / "all" / "train_log.jsonl").read_text().splitlines()]
    tool_tokens = len(ids(fixed_tokenizer(), CALL)) + len(ids(fixed_tokenizer(), ANSWER))
    plain_tokens = len(ids(fixed_tokenizer(), rows[3]["reasoning"] + "<|im_end|>"))
    assert sum(r["tokens"] for r in log) == 3 * tool_tokens + plain_tokens  # inserted ids left out
    out = capsys.readouterr().out
    assert "1 rank(s), tools: calculator\n" in out
    assert "all: 1 steps on 4 examples (3 calling the calculator, 1 plain: no expression)" in out


def test_an_unknown_tools_value_is_refused_naming_the_flag(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(tool_row()) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        sft_main("--model", "tiny-random", "--dataset", data, "--output-dir", tmp_path / "o",
                 "--tools", "abacus")
    assert exit_info.value.code == 2


@pytest.fixture
def scripted_call(monkeypatch):
    """hf's sample_round with turn 0 scripted as a call of the question's expression; later
    turns (after a <tool_response>) are the real model's. Counts the turns of each kind."""
    from relrl.engines import hf

    real, turns = hf.sample_round, {"scripted": 0, "model": 0}

    def sample_round(model, tokenizer, requests, config, should_stop=None):
        call = ids(tokenizer, CALL)
        later = [k for k, r in enumerate(requests) if "<tool_response>" in tokenizer.decode(r.ids)]
        sampled = dict(zip(later, real(model, tokenizer, [requests[k] for k in later], config,
                                       should_stop))) if later else {}
        turns["scripted"] += len(requests) - len(later)
        turns["model"] += len(later)
        return [sampled.get(k, (list(call), None)) for k in range(len(requests))]

    monkeypatch.setattr(hf, "sample_round", sample_round)
    return turns


def test_each_held_out_fold_is_scored_with_the_calculator(tmp_path, scripted_call):
    from relrl.evaluation.results_io import read_result

    rows = [tool_row(id=f"r{k}", group=f"g{k}") for k in range(4)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    assert sft_main("--model", "tiny-random", "--dataset", data, "--output-dir", run,
                    "--folds", "2", "--epochs", "1", "--lora-r", "4", "--grad-accum", "1",
                    "--eval-max-new-tokens", "120", "--tools", "calculator") == 0
    # 2 held-out rows per fold, scored by the adapter and by the base: one call each
    assert scripted_call == {"scripted": 8, "model": 8}
    for k in range(2):
        pair = read_result(run / f"fold_{k}" / "evaluation.json")
        for side in ("base", "finetuned"):
            assert pair[side]["tools"] == "calculator"
            assert pair[side]["tool_use"]["calls"] == 2 and pair[side]["tool_use"]["failed"] == 0
            for record in pair[side]["results"]:
                assert "<tool_response>\n0.3678794412\n</tool_response>" in record["transcript"]
    assert json.loads((run / "cv_summary.json").read_text())["tools"] == "calculator"


def test_eval_max_tool_calls_reaches_the_fold_scoring_and_a_negative_value_is_refused(
        tmp_path, scripted_call):
    from relrl.evaluation.results_io import read_result

    rows = [tool_row(id=f"r{k}", group=f"g{k}") for k in range(4)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    common = ("--model", "tiny-random", "--dataset", data, "--folds", "2", "--epochs", "1",
              "--lora-r", "4", "--grad-accum", "1", "--eval-max-new-tokens", "120",
              "--tools", "calculator")
    with pytest.raises(UsageError, match="^--eval-max-tool-calls: must be >= 0, got -1$"):
        sft_main(*common, "--output-dir", tmp_path / "bad", "--eval-max-tool-calls", "-1")
    assert not (tmp_path / "bad").exists()
    run = tmp_path / "run"
    assert sft_main(*common, "--output-dir", run, "--eval-max-tool-calls", "0") == 0
    assert scripted_call == {"scripted": 8, "model": 0}  # no call runs, so no turn follows
    pair = read_result(run / "fold_0" / "evaluation.json")
    for side in ("base", "finetuned"):
        assert pair[side]["max_tool_calls"] == 0 and pair[side]["tool_use"]["calls"] == 0
        assert all("<tool_response>" not in r["transcript"] for r in pair[side]["results"])

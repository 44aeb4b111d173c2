"""The built-in models: tokenizer, `tiny-random`, and the `tiny` build recipe on a small scale."""
import json
from dataclasses import replace

import pytest
import torch
from transformers import AutoTokenizer

from relrl.data.prompting import SYSTEM_PROMPT, build_prompt, build_training_text
from relrl.modeling.tiny_tokenizer import fixed_tokenizer
from relrl.models.by_name import load_model
from relrl.models.tiny_build import RECIPE, build_tiny_here, checked_report, load_or_build_tiny, tiny_dir


@pytest.fixture(scope="module")
def tok():
    return fixed_tokenizer()


def test_digits_are_single_tokens(tok):
    pieces = tok.convert_ids_to_tokens(tok("R = 0.9512 at 1200 h", add_special_tokens=False)["input_ids"])
    digits = [p.lstrip("Ġ") for p in pieces if any(ch.isdigit() for ch in p)]
    assert digits == list("09512") + list("1200")


def test_chatml_special_tokens_are_single_ids(tok):
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


def test_chat_template_accepts_enable_thinking_and_round_trips(tok, tmp_path):
    prompt = build_prompt(tok, "  What is R(100 h)?  ")
    assert prompt == (f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n"
                      "<|im_start|>user\nWhat is R(100 h)?<|im_end|>\n<|im_start|>assistant\n")
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == prompt  # byte-level: lossless
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert build_prompt(again, "What is R(100 h)?") == prompt
    assert again(prompt, add_special_tokens=False)["input_ids"] == ids


def test_training_text_ends_with_end_of_turn(tok):
    prompt, completion = build_training_text(tok, "q?", "R = 0.9\nAnswer: \\boxed{0.9}")
    assert prompt == build_prompt(tok, "q?") and completion.endswith("\\boxed{0.9}<|im_end|>")


def test_system_prompt_asks_for_one_boxed_answer():
    assert "\\boxed{" in SYSTEM_PROMPT and "exactly once" in SYSTEM_PROMPT


def test_tiny_random_size_and_determinism():
    model, tok = load_model("tiny-random")
    again, _ = load_model("tiny-random")
    other, _ = load_model("tiny-random", seed=1)
    n_params = sum(p.numel() for p in model.parameters())
    assert 0.8e6 <= n_params <= 1.3e6
    assert model.config.model_type == "qwen3" and model.config.vocab_size == len(tok)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(model.parameters(), other.parameters()))


MICRO = replace(RECIPE, version="test", n_train=96, vocab_size=400, hidden_size=32,
                num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                intermediate_size=64, steps=3, batch_size=8, warmup=1, eval_per_family=1,
                eval_samples=2, eval_max_new_tokens=8)


def test_build_recipe_caches_reports_and_rebuilds_identically(tmp_path, monkeypatch):
    lines = []
    # in this process (a build proper runs in a pinned child: tests/test_pinned_build.py)
    first = build_tiny_here(MICRO, tmp_path / "a", log=lines.append)
    second = build_tiny_here(MICRO, tmp_path / "b", log=lambda _: None)
    saved = json.loads((tmp_path / "a" / "accuracy.json").read_text())
    assert saved["by_family"] == first["by_family"] == second["by_family"]
    assert len(saved["by_family"]) >= 30 and saved["recipe"]["version"] == "test"
    assert all(0.0 <= acc <= 1.0 for acc in saved["by_family"].values())
    assert "overall" in lines[-2] and "accuracy" in lines[-2]  # the table is printed at the end
    assert saved["tolerance_rule"] == "study" and "(study tolerance rule)" in lines[-2]
    # the same check under the complement rule, made from the cached model on request
    complement = checked_report(tmp_path / "a", "complement", MICRO)
    assert complement == json.loads((tmp_path / "a" / "accuracy-complement.json").read_text())
    assert complement["tolerance_rule"] == "complement"
    assert (complement["questions"], complement["by_family"].keys()) == \
        (saved["questions"], saved["by_family"].keys())
    assert checked_report(tmp_path / "a", "study", MICRO) == saved
    monkeypatch.setenv("RELRL_CACHE", str(tmp_path))
    assert tiny_dir(MICRO) == tmp_path / "tiny-test"
    model_a, tok_a = load_or_build_tiny(MICRO, tmp_path / "a")
    model_b, _ = load_or_build_tiny(MICRO, tmp_path / "b")
    assert model_a.name_or_path == "tiny"
    assert all(torch.equal(x, y) for x, y in zip(model_a.parameters(), model_b.parameters()))
    assert tok_a.convert_tokens_to_ids("<|im_end|>") == model_a.config.eos_token_id


@pytest.mark.slow
def test_tiny_is_right_on_some_families_wrong_on_others_mixed_on_many():
    model, tok = load_model("tiny")  # builds it on first use (a few minutes)
    assert model.name_or_path == "tiny" and 1e6 < sum(p.numel() for p in model.parameters()) < 1e7
    report = json.loads((tiny_dir() / "accuracy.json").read_text())
    accuracy = list(report["by_family"].values())
    assert len(accuracy) >= 30
    # right (>= 75% of 12 samples): 3 families when built under transformers 5.24, 2 under the
    # pinned 5.17 (same recipe; 32 never right, 29 mixed, 26% of questions mixed). Another
    # machine's floating point builds other weights (see the README), so only "some" is asked.
    assert sum(a >= 0.75 for a in accuracy) >= 1
    assert sum(a == 0.0 for a in accuracy) >= 10  # wrong
    assert sum(0.0 < a < 0.75 for a in accuracy) >= 15  # mixed
    assert report["share_mixed"] >= 0.2  # questions with 1 to 3 of 4 samples right

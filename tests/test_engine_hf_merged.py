"""The hf-merged engine: its copy holds W + (alpha/r) B A, written from the live adapter before
each rollout; it shares everything else with the policy, leaves the policy's base untouched,
samples what hf samples where the delta is zero, and refuses what it cannot merge."""
import copy

import pytest
import torch

from relrl.data.prompting import build_prompt
from relrl.engines import make_engine
from relrl.engines.base import SamplingConfig, question_seed
from relrl.engines.hf_merged import FOUR_BIT, MergedHFEngine
from relrl.modeling.loading import attach_lora
from relrl.models.by_name import check_engine_choice, load_model
from relrl.runtime.cli import UsageError

R, ALPHA = 8, 16
QUESTIONS = ["Two valves in parallel each have reliability 0.9. System reliability?",
             "MTBF 400 h, MTTR 8 h. Steady-state availability?"]


def policy(seed: int = 0, trained: bool = True):
    torch.manual_seed(seed)
    model, tok = load_model("tiny-random")
    model = attach_lora(model, r=R, alpha=ALPHA)
    if trained:  # a fresh LoRA's B is zero: give it a delta
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.05)
    return model, tok


def inputs(tok):
    return torch.tensor([tok(build_prompt(tok, QUESTIONS[0]), add_special_tokens=False)["input_ids"]])


def direct_merge(model, name: str) -> torch.Tensor:
    """W + (alpha / r) B A for the projection `name`, from the policy's own tensors."""
    params = dict(model.named_parameters())
    prefix = f"base_model.model.{name}"
    w = params[f"{prefix}.base_layer.weight"]
    a, b = params[f"{prefix}.lora_A.default.weight"], params[f"{prefix}.lora_B.default.weight"]
    return w + (ALPHA / R) * b @ a


def test_copy_holds_the_direct_merge_and_gives_peft_logits():
    model, tok = policy()
    engine = MergedHFEngine(model, tok)
    engine.refresh()
    weights = dict(engine.copy.named_parameters())
    name = "model.layers.1.mlp.down_proj"
    assert torch.allclose(weights[f"{name}.weight"], direct_merge(model, name), atol=1e-6)
    ids = inputs(tok)
    with torch.no_grad():
        want = model(ids).logits
        got = engine.copy(ids).logits
        # and peft's own merge, on a throwaway copy, as a second reference
        merged = copy.deepcopy(model).merge_and_unload()(ids).logits
    assert (want - got).abs().max() < 1e-4
    assert (merged - got).abs().max() < 1e-5


def test_copy_shares_all_but_the_adapted_weights_and_never_moves_the_base():
    model, tok = policy()
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    engine = MergedHFEngine(model, tok)
    policy_ptrs = {p.data_ptr() for p in model.parameters()}
    own = [n for n, p in engine.copy.named_parameters() if p.data_ptr() not in policy_ptrs]
    adapted = 7 * model.config.num_hidden_layers  # q, k, v, o, gate, up, down in every block
    assert len(own) == adapted and all(n.endswith("proj.weight") for n in own)
    assert not any("lora_" in n for n, _ in engine.copy.named_parameters())
    for _ in range(5):
        engine.refresh()
    after = {n: p for n, p in model.named_parameters() if "lora_" not in n}
    assert all(torch.equal(base_before[n], after[n]) for n in base_before)


def test_refresh_follows_an_update_and_base_policy_writes_the_bare_base():
    model, tok = policy()
    engine = MergedHFEngine(model, tok)
    name = "model.layers.0.self_attn.q_proj"
    weight = lambda: dict(engine.copy.named_parameters())[f"{name}.weight"]
    engine.refresh()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_A" in n:
                p.mul_(2.0)
    engine.refresh()
    assert torch.allclose(weight(), direct_merge(model, name), atol=1e-6)
    bare = dict(model.named_parameters())[f"base_model.model.{name}.base_layer.weight"]
    with engine.base_policy():
        engine.generate([build_prompt(tok, QUESTIONS[0])], 1, [1], SamplingConfig(max_new_tokens=2))
        assert torch.equal(weight(), bare)
    engine.refresh()
    assert torch.allclose(weight(), direct_merge(model, name), atol=1e-6)


def test_zero_delta_samples_exactly_what_hf_samples():
    # A fresh adapter (B = 0): W + 0 is W bit for bit, and W x + B (A x) adds an exact zero, so
    # both engines see the same logits and their seeded samplers draw the same tokens.
    model, tok = policy(trained=False)
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    seeds = [question_seed(3, f"q{i}") for i in range(len(prompts))]
    config = SamplingConfig(max_new_tokens=24, micro_batch=8)
    hf = make_engine("hf", model, tok).generate(prompts, 3, seeds, config)
    merged = make_engine("hf-merged", model, tok).generate(prompts, 3, seeds, config)
    tokens = lambda rows: [[c.token_ids for c in row] for row in rows]
    assert tokens(merged) == tokens(hf)
    assert len({tuple(t) for t in tokens(hf)[0]}) == 3  # really sampled


def test_a_model_without_adapter_is_its_own_copy():
    model, tok = load_model("tiny-random")
    engine = MergedHFEngine(model, tok)
    assert engine.copy is model and engine.pairs == []


def test_refuses_a_four_bit_base_or_unsloth_before_loading():
    with pytest.raises(UsageError, match="--rollout-engine hf-merged: the base is held in 4-bit"):
        check_engine_choice("hf-merged", "tiny", True)
    with pytest.raises(UsageError, match="--rollout-engine hf-merged: Unsloth"):
        check_engine_choice("hf-merged", "tiny", None, unsloth=True)
    check_engine_choice("hf-merged", "tiny", None)  # full precision: accepted
    check_engine_choice("hf", "tiny", True)  # other engines: not this check's business


def test_refuses_a_model_that_says_it_is_four_bit():
    model, tok = policy()
    model.config.quantization_config = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    with pytest.raises(UsageError, match="4-bit"):
        MergedHFEngine(model, tok)


def grpo_run(out, engine):
    """Three useful steps of exp10 on tiny-random with `engine`; its train log."""
    import json

    from relrl.rl.grpo_main import main

    rows = [{"id": f"q{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1)}
            for i in range(4)]
    data = out.parent / f"{out.name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["--model", "tiny-random", "--dataset", str(data), "--output-dir", str(out),
            "--rollout-engine", engine, "--reward", "digit-share", "--informative-by", "reward",
            "--max-useful-steps", "3", "--grad-accum", "1", "--max-new-tokens", "8",
            "--learning-rate", "1e-2", "--save-every", "100"]
    assert main("exp10", argv) == 0
    return [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]


def test_grpo_with_hf_merged_first_rollout_is_hf_s_then_it_trains(tmp_path):
    # exp10 starts from a fresh adapter (zero delta), so the first rollout is hf's exactly;
    # later ones sample from the updated, merged policy.
    hf, merged = grpo_run(tmp_path / "hf", "hf"), grpo_run(tmp_path / "merged", "hf-merged")
    assert len(merged) == len(hf) == 3
    assert merged[0]["rewards"] == hf[0]["rewards"]
    assert merged[0]["completion_lengths"] == hf[0]["completion_lengths"]
    assert (tmp_path / "merged" / "checkpoint-3" / "adapter_model.safetensors").is_file()


def test_the_grpo_command_refuses_hf_merged_on_a_four_bit_base_writing_nothing(tmp_path, capsys):
    from relrl.rl.grpo_main import main
    from relrl.runtime.cli import run_main

    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": "q", "question": "1 + 1?", "answer": "2"}\n')
    argv = ["--model", "tiny", "--dataset", str(data), "--output-dir", str(tmp_path / "out"),
            "--rollout-engine", "hf-merged", "--load-in-4bit", "yes"]
    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda: main("exp10", argv))
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err
    assert err == f"error: --rollout-engine hf-merged: {FOUR_BIT}"
    assert not (tmp_path / "out").exists()

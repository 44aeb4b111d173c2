"""The vLLM sampler's log-probs against the trainer's over a tool rollout's turns, after an
adapter sync and again after a sleep and wake (what a GRPO step does between rollouts), and the
effect of the think-block difference on the last turn (docs/engines.md, "The empty think block").

A LoRA that moves the log-probs is synced; a calculator rollout (its first turn a scripted call,
random weights write none) is scored by the trainer; the gap is reported per model turn after
the first. The scripted turn has no sampler log-probs and is left out."""
from __future__ import annotations

import torch

from gpucheck.common import QUESTIONS, SYNC_B_STD, Check, G, scripted_call, trainer_logprobs
from relrl.data.prompting import build_prompt, end_of_turn
from relrl.engines import SamplingConfig
from relrl.modeling.loading import reference_policy
from relrl.tools.protocol import calculator_call

EMPTY_THINK = "<think>\n\n</think>\n\n"  # Qwen3's generation prompt with thinking off ends so


def moving_lora(model, seed: int) -> None:
    """Every lora_B drawn from N(0, SYNC_B_STD): an adapter that changes the log-probs far more
    than the sampler and the trainer disagree."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * SYNC_B_STD)


def model_turns(completion) -> list[list[int]]:
    """Positions (in token_ids) of each run of sampled tokens: one run per model turn."""
    mask = completion.sampled_mask or [1] * len(completion.token_ids)
    turns, current = [], []
    for k, m in enumerate(mask):
        if m:
            current.append(k)
        elif current:
            turns.append(current)
            current = []
    return turns + ([current] if current else [])


def tool_rollout_vllm(engine, tok, prompts, sampling, call_ids) -> list:
    engine.sample_round = scripted_call(type(engine).sample_round.__get__(engine), tok, call_ids)
    try:
        return [c for row in engine.generate(prompts, G, list(range(len(prompts))), sampling)
                for c in row]
    finally:
        del engine.sample_round


def turn_gaps(model, completions) -> dict:
    """Per model turn after the scripted first: tokens, mean and largest |trainer - sampler|;
    and the adapter's own effect on the same tokens (trainer with and without it)."""
    trainer = trainer_logprobs(model, completions)
    with reference_policy(model):
        base = trainer_logprobs(model, completions)
    by_turn: dict[int, list[float]] = {}
    effect = []
    for c, t, b in zip(completions, trainer, base):
        for k, positions in enumerate(model_turns(c)[1:], start=2):
            by_turn.setdefault(k, []).extend(abs(t[i] - c.logprobs[i]) for i in positions)
            effect.extend(abs(t[i] - b[i]) for i in positions)
    turns = [{"turn": k, "tokens": len(v), "mean_abs_diff": sum(v) / len(v), "max_abs_diff": max(v)}
             for k, v in sorted(by_turn.items()) if v]
    every = [x for v in by_turn.values() for x in v]
    return {"turns": turns, "mean_abs_diff": sum(every) / max(len(every), 1),
            "adapter_effect": sum(effect) / max(len(effect), 1)}


def think_block_effect(model, tok, completions) -> dict:
    """The last turn's log-probs in the trained context (every earlier assistant turn keeps the
    empty think block it was sampled after) against Qwen3's rendering of the same conversation
    (earlier turns without it): mean |difference| per token and of the turn's summed log-prob."""
    if "</think>" not in build_prompt(tok, "q"):
        return {"status": "this tokenizer's template has no think block: nothing differs"}
    block = tok(EMPTY_THINK, add_special_tokens=False)["input_ids"]
    per_token, per_turn = [], []
    for c in completions:
        seq = list(c.prompt_ids) + list(c.token_ids)
        starts = [i for i in range(len(seq) - len(block) + 1) if seq[i:i + len(block)] == block]
        turns = model_turns(c)
        if len(starts) < 2 or not turns:
            continue
        last = [len(c.prompt_ids) + i for i in turns[-1]]
        served = [t for i, t in enumerate(seq) if not any(s <= i < s + len(block) for s in starts[:-1])]
        shift = len(block) * (len(starts) - 1)
        with torch.no_grad():
            a = token_logprobs(model, seq, last)
            b = token_logprobs(model, served, [i - shift for i in last])
        per_token.extend((a - b).abs().tolist())
        per_turn.append(float((a - b).sum().abs()))
    if not per_token:
        return {"status": "no completion with an earlier think block"}
    return {"status": "measured", "completions": len(per_turn), "tokens": len(per_token),
            "mean_abs_diff_per_token": sum(per_token) / len(per_token),
            "mean_abs_diff_turn_sum": sum(per_turn) / len(per_turn)}


def token_logprobs(model, ids: list[int], positions: list[int]) -> torch.Tensor:
    """log p(ids[i] | ids[:i]) at the given positions, one sequence, in float32."""
    device = next(model.parameters()).device
    logits = model(input_ids=torch.tensor([ids], device=device)).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    at = torch.tensor(positions, device=device)
    return logp[at - 1].gather(-1, torch.tensor(ids, device=device)[at].unsqueeze(-1)).squeeze(-1).cpu()


def tool_gap(path: str):
    def run(check: Check, out: dict) -> None:
        state = check.paths[path]
        model, engine, tok = state["model"], state["engine"], state["tokenizer"]
        moving_lora(model, seed=6)
        engine.sync_adapter(model)
        call = tok(calculator_call("exp(-0.002*500)") + end_of_turn(tok),
                   add_special_tokens=False)["input_ids"]
        prompts = [build_prompt(tok, QUESTIONS[0], tools="calculator")]
        sampling = SamplingConfig(max_new_tokens=len(call) + check.shapes["vllm_rollout_tokens"],
                                  tools="calculator", micro_batch=8)
        done = tool_rollout_vllm(engine, tok, prompts, sampling, call)
        # an instance sample_round puts the vLLM engine in its rounds mode (one turn for every
        # request, then the answers), not the streamed turns training uses by default
        out["rollout_mode"] = "rounds (scripted first call)"
        out["after_sync"] = turn_gaps(model, done)
        out["think_block"] = think_block_effect(model, tok, done)
        with engine.updating():  # asleep here where --vllm-sleep auto put it to sleep
            pass
        engine.sync_adapter(model)  # as the trainer does after every update
        again = tool_rollout_vllm(engine, tok, prompts, sampling, call)
        out.update(after_wake=turn_gaps(model, again), slept=bool(engine.sleeps))
        for when in ("after_sync", "after_wake"):
            gap = out[when]
            assert gap["turns"], f"{when}: no model turn after the tool's answer"
            assert gap["mean_abs_diff"] < gap["adapter_effect"] / 4, \
                f"{when}: vLLM does not serve the synced adapter on the tool turns"
    return run

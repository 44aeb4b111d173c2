"""GRPO on tool-using completions (--tools calculator): the tokens the tool loop inserts stay
out of the loss, the KL, the entropy, the importance ratio, the overlong penalty and the length
metrics; resume and data parallelism keep working.

tiny-random never writes a tool call, so `scripted_calls` makes half the samples call the
calculator on their first turn: their turn-0 ids are those of a written call, sampled as far as
the loop knows, and the rest of the completion (the inserted answer, then the model's second
turn) is real. Which samples call depends only on the sample's seed, so resumed and
data-parallel runs script the same ones.

Run as a script (`python tests/test_grpo_tools.py ARGS`), this file is GRPO exp10 with scripted
calls: what the data-parallel test launches under torchrun, and the kill/resume test in separate
processes (SCRIPTED_CALLS=errors scripts calls the calculator refuses; STOP_AT_ROUND=k sends the
process SIGTERM in its k-th sampling round).
"""
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_grpo_trainer import ROWS, config, letters, sigterm_after, tiny_policy, write_rows

from relrl.engines import Completion, hf
from relrl.rl.dynamic_sampling import Group
from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_metrics import step_record
from relrl.rl.grpo_trainer import GRPOTrainer
from relrl.runtime.checkpointing import run_fingerprint
from relrl.runtime.cli import UsageError
from relrl.runtime.stop import STOPPED_EXIT
from relrl.tools.protocol import calculator_call

ROOT = Path(__file__).resolve().parents[1]
CALL = calculator_call("2*3") + "<|im_end|>"
# the scripted call is 69 tokens of tiny-random's vocabulary: room for a short second turn
MAX_NEW = 76


# Calls the calculator refuses, each for another reason: `%` was answered with a memory address
# (`Operator '<ast.Mod object at 0x7f...>'`), different in every process; the second echoes a
# marker's text; the third is a domain error.
ERROR_CALLS = [calculator_call(e) + "<|im_end|>" for e in ("7 % 2", "1 <|im_end|> 2", "sqrt(-1)")]


def scripted_calls(real=hf.sample_round, calls=(CALL,), stop_at_round=None):
    """hf.sample_round where a first turn (the prompt alone: its system, user and assistant
    starts) of a sample with an even seed returns the ids of one of `calls` (chosen by the seed)
    instead of sampling; each call's text is written as plain tokens (a `<|im_end|>` inside the
    expression as its characters, as a model could spell it), then the end-of-turn token. With
    `stop_at_round`, the process sends itself SIGTERM in that round (counted from 1)."""
    rounds = {"n": 0}

    def sample_round(model, tokenizer, requests, sampling, should_stop=None):
        rounds["n"] += 1
        if rounds["n"] == stop_at_round:
            os.kill(os.getpid(), signal.SIGTERM)
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        ids = [tokenizer(c.removesuffix("<|im_end|>"), add_special_tokens=False,
                         split_special_tokens=True)["input_ids"] + [end] for c in calls]
        start = tokenizer.convert_tokens_to_ids("<|im_start|>")
        scripted = [r.ids.count(start) == 3 and r.seed % 2 == 0 for r in requests]
        others = [r for r, s in zip(requests, scripted) if not s]
        sampled = iter(real(model, tokenizer, others, sampling, should_stop) if others else [])
        return [(list(ids[(r.seed >> 8) % len(ids)]), None) if s else next(sampled)
                for r, s in zip(requests, scripted)]
    return sample_round


def tool_trainer(out, monkeypatch=None, **overrides):
    """test_grpo_trainer's toy trainer with the calculator (and scripted calls: monkeypatch)."""
    if monkeypatch is not None:
        monkeypatch.setattr(hf, "sample_round", scripted_calls())
    reward = overrides.pop("reward", letters)
    model, tokenizer = tiny_policy()
    cfg = config(out, tools="calculator", max_new_tokens=MAX_NEW, **overrides)
    return GRPOTrainer(cfg, model, tokenizer, ROWS, reward_fn=reward)


def completion(ids, sampled_mask, logprobs, prompt=(5, 6, 7)):
    return Completion("x", list(ids), list(prompt), truncated=False, logprobs=list(logprobs),
                      sampled_mask=sampled_mask)


# ---------------------------------------------------------------------- the loss
def test_inserted_tokens_stay_out_of_the_loss_kl_entropy_and_the_tis_ratio(tmp_path):
    """The loss equals a hand computation over the sampled tokens only; the sampler's
    log-probs at inserted positions (0.0 from the engine, or anything) change nothing; the
    gradient with respect to the log-probs there is zero."""
    from relrl.rl.grpo_batch import pack
    from relrl.rl.grpo_loss import policy_loss

    model, tokenizer = tiny_policy()
    t = GRPOTrainer(config(tmp_path, beta=0.1, tis_cap=1.5), model, tokenizer, ROWS,
                    reward_fn=letters)
    ids = [40, 41, 42, 43, 44, 45, 46, 47]
    sampled = [1, 1, 0, 0, 0, 1, 1, 1]  # a call, an inserted answer, the last turn
    # sampler log-probs: some far from the trainer's, so the cap binds on some sampled tokens
    sampler = [-2.0, -9.0, 0.0, 0.0, 0.0, -1.0, -12.0, -3.0]
    plain = [50, 51, 52, 53]  # a completion without tool calls
    rows = [(0, completion(ids, sampled, sampler), 1.0),
            (1, completion(plain, None, [-4.0, -5.0, -6.0, -7.0]), -0.5)]

    def measure(rows):
        batch = pack(rows, tokenizer.pad_token_id)
        logp, fixed = t.first_pass(batch)
        terms = policy_loss(logp, fixed.old_logp, batch.advantages, batch.mask, t.loss_cfg,
                            ref_logp=fixed.ref_logp, tis_weight=fixed.tis_weight)
        grad, = torch.autograd.grad(terms.loss, logp)
        return batch, fixed, terms, grad

    batch, fixed, terms, grad = measure(rows)
    hand_mask = torch.tensor([sampled, [1, 1, 1, 1, 0, 0, 0, 0]], dtype=torch.float32)
    assert batch.mask.tolist() == hand_mask.tolist()

    # by hand: on the first pass the ratio is 1, so each sampled token adds
    # -A * min(p_trainer / p_sampler, cap) + beta * k3(ref, old), over the sampled tokens only
    old, ref = fixed.old_logp, fixed.ref_logp
    total, tokens, capped = 0.0, 0, 0
    for r, (_, c, advantage) in enumerate(rows):
        for k in range(len(c.token_ids)):
            if hand_mask[r, k] == 0:
                continue
            ratio = math.exp(float(old[r, k]) - c.logprobs[k])
            capped += ratio > 1.5
            delta = float(ref[r, k] - old[r, k])
            total += -advantage * min(ratio, 1.5) + 0.1 * (math.exp(delta) - delta - 1)
            tokens += 1
    assert tokens == 9 and capped >= 1
    assert float(terms.loss.detach()) == pytest.approx(total / tokens, rel=1e-5)
    assert fixed.rows["tokens"].tolist() == [5.0, 4.0]
    assert fixed.rows["tis_capped"].sum() == capped

    inserted = hand_mask == 0
    assert (grad[inserted] == 0).all() and (grad[~inserted] != 0).all()
    assert (fixed.tis_weight[inserted] == 0).all()
    entropy = t.logprobs(batch, entropy=True)[1].detach()
    assert torch.allclose(fixed.rows["entropy"], (entropy * hand_mask).sum(1))

    # other sampler log-probs at the inserted positions: nothing moves
    wild = [s if m else w for s, m, w in zip(sampler, sampled, [5.0, 5.0, -40.0, 3.0, -1e4, 0, 0, 0])]
    _, fixed2, terms2, grad2 = measure([(0, completion(ids, sampled, wild), 1.0), rows[1]])
    assert float(terms2.loss.detach()) == float(terms.loss.detach())
    assert torch.equal(grad2, grad) and torch.equal(fixed2.tis_weight, fixed.tis_weight)
    for name in ("tokens", "entropy", "tis_ratio", "tis_capped"):
        assert torch.equal(fixed2.rows[name], fixed.rows[name]), name
    assert torch.equal(terms2.row_kl, terms.row_kl)


def test_overlong_penalty_and_lengths_count_the_models_own_tokens(tmp_path):
    model, tokenizer = tiny_policy()
    t = GRPOTrainer(config(tmp_path, overlong_buffer=4, max_new_tokens=8, tools="calculator"),
                    model, tokenizer, ROWS, reward_fn=letters)
    # 12 ids, of which 4 sampled: 4 <= 8 - 4 tokens, no penalty (12 ids would be -1)
    short = Completion("a", list(range(12)), [1], truncated=False,
                       sampled_mask=[1, 1] + [0] * 8 + [1, 1], tool_calls=2, tool_errors=1)
    # 6 sampled of 14: two tokens into the buffer
    six = Completion("b", list(range(14)), [1], truncated=False,
                     sampled_mask=[1, 1, 1] + [0] * 8 + [1, 1, 1], tool_calls=1)
    plain = Completion("c", list(range(3)), [1], truncated=False)
    assert [t.length_penalty(c) for c in (short, six, plain)] == [0.0, -0.5, 0.0]

    group = Group(0, 0, [0.0, 1.0, 0.5], [False, True, False], [short, six, plain])
    counters = {"all_correct": 0, "all_wrong": 0, "same_partial": 0, "total_attempts": 1,
                "waste_rate": 0.0}
    record = step_record(1, "q0", group, {}, counters, lr=0.1, t_sample=0, t_update=0, tools=True)
    assert record["completion_lengths"] == [4, 6, 3] and record["mean_length"] == pytest.approx(13 / 3)
    assert record["tool_calls_mean"] == 1.0 and record["tool_error_share"] == pytest.approx(1 / 3)
    silent = Group(0, 0, [0.0, 1.0], [False, True], [plain, plain])
    record = step_record(1, "q0", silent, {}, counters, lr=0.1, t_sample=0, t_update=0, tools=True)
    assert record["tool_calls_mean"] == 0.0 and record["tool_error_share"] is None
    record = step_record(1, "q0", silent, {}, counters, lr=0.1, t_sample=0, t_update=0)
    assert "tool_calls_mean" not in record and "tool_error_share" not in record


# ---------------------------------------------------------------------- settings
def test_tool_settings_flags_checks_and_fingerprints(tmp_path):
    from relrl.rl.grpo_main import build_parser
    from relrl.runtime.config import saved_differences

    base = ["--model", "tiny-random", "--dataset", "x.jsonl", "--output-dir", str(tmp_path)]
    cfg, _ = build_parser("exp10").parse([*base, "--tools", "calculator", "--max-tool-calls", "2"])
    assert (cfg.tools, cfg.max_tool_calls) == ("calculator", 2)
    cfg, _ = build_parser("exp7").parse(base)
    assert (cfg.tools, cfg.max_tool_calls) == ("none", 4)
    with pytest.raises(UsageError, match="^--max-tool-calls: must be >= 0, got -1$"):
        GRPOConfig(max_tool_calls=-1).check()
    with pytest.raises(UsageError, match="--tools: none or calculator, got 'abacus'"):
        GRPOConfig(tools="abacus").check()

    # a run from before the settings: the same settings, so the same fingerprint, and its
    # config.yaml (without the keys) differs in nothing
    old = GRPOConfig().settings()
    assert "tools" not in old and "max_tool_calls" not in old
    assert GRPOConfig(max_tool_calls=9).settings() == old  # no tools: the limit is inert
    assert run_fingerprint(GRPOConfig(tools="calculator").settings()) != run_fingerprint(old)
    assert GRPOConfig(tools="calculator").settings()["tools"] == "calculator"
    assert "max_tool_calls" not in GRPOConfig(tools="calculator").settings()
    assert GRPOConfig(tools="calculator", max_tool_calls=2).settings()["max_tool_calls"] == 2
    (tmp_path / "config.yaml").write_text("seed: 0\nbeta: 0.0\n")
    assert saved_differences(GRPOConfig(), tmp_path) == []


# ---------------------------------------------------------------------- runs with tool calls
def test_training_and_validation_prompts_and_sampling_carry_the_tools(tmp_path):
    model, tokenizer = tiny_policy()
    t = GRPOTrainer(config(tmp_path, tools="calculator", max_tool_calls=3), model, tokenizer,
                    ROWS, ROWS[:2], reward_fn=letters)
    assert t.sampling.tools == "calculator" and t.sampling.max_tool_calls == 3
    assert all("<tools>" in p and '"name": "calculator"' in p for p in t.prompts)
    seen = []

    def generate(prompts, n, seeds, sampling, should_stop=None):
        seen.append((prompts, sampling))
        return [[Completion("x", [1], [1], truncated=False)] * n for _ in prompts]

    t.engine.generate = generate
    t.validate()
    (prompts, sampling), = seen
    assert prompts == t.prompts[:2] and sampling is t.sampling
    none = GRPOTrainer(config(tmp_path), model, tokenizer, ROWS, reward_fn=letters)
    assert none.sampling.tools == "none" and not any("<tools>" in p for p in none.prompts)


def test_resume_mid_run_with_tool_calls_equals_an_uninterrupted_run(tmp_path, monkeypatch, capsys):
    from relrl.rl import grpo_batch

    packed = []  # (sampled tokens, all tokens) of every packed completion
    real_pack = grpo_batch.pack

    def spy(rows, *args, **kwargs):
        packed.extend((c.sampled_tokens, len(c.token_ids)) for _, c, _ in rows)
        return real_pack(rows, *args, **kwargs)

    monkeypatch.setattr(grpo_batch, "pack", spy)
    settings = dict(max_useful_steps=3, save_every=1, beta=0.05, train_micro_batch=3)
    straight = tool_trainer(tmp_path / "straight", monkeypatch, **settings).run()
    assert any(sampled < total for sampled, total in packed)  # inserted tokens were trained on
    assert any(sampled == total for sampled, total in packed)  # and completions without calls
    log = [json.loads(x) for x in (tmp_path / "straight" / "train_log.jsonl").read_text().splitlines()]
    assert any(x["tool_calls_mean"] > 0 for x in log)
    assert all(x["tool_error_share"] in (None, 0.0) for x in log)  # 2*3 is a good call
    assert max(max(x["completion_lengths"]) for x in log) <= MAX_NEW
    assert straight["tools"] == "calculator" and straight["max_tool_calls"] == 4
    assert straight["settings"]["tools"] == "calculator"

    out = tmp_path / "killed"
    # the signal comes while the second group is scored: that step trains, the third never
    # starts, and the resumed run draws it
    killed = tool_trainer(out, monkeypatch, reward=sigterm_after(4 + 2), **settings)
    stopped = killed.run()
    n = stopped["useful_steps"]
    assert stopped["stopped_by"] == "SIGTERM" and n == 2, n
    capsys.readouterr()
    resumed = tool_trainer(out, monkeypatch, **settings).run(resume_from=out / f"checkpoint-{n}")
    assert resumed == straight
    for name in ("checkpoint-3/adapter_model.safetensors", "statistics.json", "train_log.jsonl"):
        if name == "train_log.jsonl":  # the timings differ
            strip = [{k: v for k, v in json.loads(x).items() if not k.startswith("t_")}
                     for x in (out / name).read_text().splitlines()]
            assert strip == [{k: v for k, v in x.items() if not k.startswith("t_")} for x in log]
        else:
            assert (out / name).read_bytes() == (tmp_path / "straight" / name).read_bytes()


# ---------------------------------------------------------------------- kill and resume
KILL_ARGS = ["--model", "tiny-random", "--reward", "digit-share", "--tools", "calculator",
             "--max-new-tokens", "90", "--max-useful-steps", "3", "--save-every", "1",
             "--max-total-steps", "30", "--train-micro-batch", "2", "--learning-rate", "1e-2",
             "--beta", "0.05", "--grad-accum", "1"]


def test_a_run_whose_tool_answers_are_errors_killed_and_resumed_in_new_processes_is_identical(
        tmp_path, monkeypatch):
    """The calculator refuses most scripted calls, one of them the kind whose error once held a
    memory address (different in every process); a run killed by SIGTERM in one process and
    resumed in another ends byte for byte where an uninterrupted run in a third ends."""
    from relrl.engines import tool_loop
    from relrl.rl.grpo_main import main

    data = write_rows(tmp_path / "train.jsonl", ROWS)
    answers = []
    real_answer = tool_loop.answer_call

    def spy(body, tools="calculator"):
        answer = real_answer(body, tools)
        answers.append(answer.text)
        return answer

    monkeypatch.setattr(tool_loop, "answer_call", spy)
    monkeypatch.setattr(hf, "sample_round", scripted_calls(calls=ERROR_CALLS))
    straight = tmp_path / "straight"
    assert main("exp10", [*KILL_ARGS, "--dataset", data, "--output-dir", str(straight)]) == 0
    assert {a for a in answers if a.startswith("error:")} >= {
        "error: '%' not supported: numbers, + - * / ^ !, names and the calculator's functions only",
        "error: cannot parse '1 \\x3c|im_end|> 2'", "error: math domain error"}
    log = [json.loads(x) for x in (straight / "train_log.jsonl").read_text().splitlines()]
    assert sum(x["tool_error_share"] or 0 for x in log) > 0

    out = tmp_path / "killed"
    args = [*KILL_ARGS, "--dataset", data, "--output-dir", out]
    # in the third step's first round: two steps trained and saved, the third never finishes
    killed = run_script(0, *args, env={"SCRIPTED_CALLS": "errors", "STOP_AT_ROUND": "4"},
                        expect=STOPPED_EXIT)
    assert "stopped by SIGTERM" in killed
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    resumed = run_script(0, *args, "--resume", env={"SCRIPTED_CALLS": "errors"})
    assert "resumed from" in resumed and "done (max_useful_steps)" in resumed
    for name in ("checkpoint-3/adapter_model.safetensors", "statistics.json"):
        assert (out / name).read_bytes() == (straight / name).read_bytes(), name
    timeless = [{k: v for k, v in json.loads(x).items() if not k.startswith("t_")}
                for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert timeless == [{k: v for k, v in x.items() if not k.startswith("t_")} for x in log]


# ---------------------------------------------------------------------- data parallel
DP_ROWS = [{"id": f"q{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1)}
           for i in range(4)]
DP_ARGS = ["--model", "tiny-random", "--reward", "digit-share", "--tools", "calculator",
           "--max-new-tokens", str(MAX_NEW), "--max-useful-steps", "2", "--grad-accum", "2",
           "--save-every", "2", "--max-total-steps", "40", "--train-micro-batch", "2",
           "--learning-rate", "1e-2"]


@pytest.mark.slow
def test_two_gloo_ranks_with_tool_calls_equal_one_process(tmp_path):
    from test_distributed import assert_adapters_close

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in DP_ROWS))
    logs = {}
    for nproc, name in ((0, "one"), (2, "two")):
        out = run_script(nproc, *DP_ARGS, "--dataset", data, "--output-dir", tmp_path / name)
        assert out.count("done (max_useful_steps)") == 1
        logs[name] = [json.loads(x) for x in (tmp_path / name / "train_log.jsonl").read_text().splitlines()]
    assert (tmp_path / "one" / "statistics.json").read_bytes() == \
        (tmp_path / "two" / "statistics.json").read_bytes()
    assert any(x["tool_calls_mean"] > 0 for x in logs["one"])
    for x, y in zip(logs["one"], logs["two"], strict=True):
        same = {k for k in x if not k.startswith("t_") and k != "entropy"}
        assert {k: x[k] for k in same} == {k: y[k] for k in same}
        assert x["entropy"] == pytest.approx(y["entropy"], rel=1e-5)
    assert_adapters_close(tmp_path / "one" / "checkpoint-2", tmp_path / "two" / "checkpoint-2")


def run_script(nproc: int, *args, env=None, expect=0) -> str:
    """This file as GRPO exp10 with scripted calls, under torchrun with nproc gloo ranks (or
    plainly for 0); its stdout, once its exit status is `expect`."""
    runner = [sys.executable] if nproc == 0 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           **{k: "" for k in os.environ if k.startswith("SLURM_")}, **(env or {})}
    proc = subprocess.run([*runner, __file__, *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == expect, proc.stderr[-3000:]
    return proc.stdout


if __name__ == "__main__":
    from relrl.rl.grpo_main import main

    stop_at = os.environ.get("STOP_AT_ROUND")
    hf.sample_round = scripted_calls(
        calls=ERROR_CALLS if os.environ.get("SCRIPTED_CALLS") == "errors" else (CALL,),
        stop_at_round=int(stop_at) if stop_at else None)
    sys.exit(main("exp10", sys.argv[1:]))

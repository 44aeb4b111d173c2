"""The GRPO trainer on tiny-random: update direction, dynamic sampling, exact resume, scripts."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from waiting import wait_until

from relrl.modeling.loading import attach_lora
from relrl.models.by_name import load_model
from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_main import main
from relrl.rl.grpo_trainer import GRPOTrainer
from relrl.runtime.cli import UsageError
from relrl.runtime.lr_schedule import warmup_cosine
from relrl.runtime.stop import STOPPED_EXIT

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"id": f"q{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1)}
        for i in range(4)]
STEP_FIELDS = {"step", "reward_mean", "reward_std", "n_correct", "advantages", "loss", "kl",
               "clip_frac", "entropy", "completion_lengths", "truncated", "lr", "t_sample",
               "t_update", "waste", "waste_rate"}
STUDY_FIELDS = {"useful_steps", "wasted_steps", "total_attempts", "resample_events", "losses",
                "rewards_per_step"}


def letters(text, row):
    """Toy reward: the share of ASCII letters in the completion."""
    share = sum(c.isascii() and c.isalpha() for c in text) / max(1, len(text))
    return share, share >= 0.999


def tiny_policy(expressive=False):
    torch.manual_seed(0)
    model, tokenizer = load_model("tiny-random")
    if expressive:
        # tiny-random's tied embeddings have std 0.02, so no hidden state can give any token
        # more than ~2.5% probability and no reward could move. A larger output scale keeps the
        # weights random but lets a LoRA reshape the distribution within a few steps.
        model.model.norm.weight.data.mul_(5.0)
    return attach_lora(model, r=8, alpha=16), tokenizer


def config(out, **overrides):
    # the toy rewards here are dense and rarely "correct": groups are judged by reward
    base = dict(model="tiny-random", output_dir=str(out), max_new_tokens=8, grad_accum=1,
                learning_rate=1e-2, max_grad_norm=1.0, warmup_ratio=0.0, max_useful_steps=6,
                save_every=100, max_total_attempts=60, informative_by="reward")
    return GRPOConfig(**{**base, **overrides})


def trainer(out, reward=letters, rows=ROWS, **overrides):
    model, tokenizer = tiny_policy()
    return GRPOTrainer(config(out, **overrides), model, tokenizer, rows, reward_fn=reward)


def probe(t):
    """Mean reward of 16 groups with fixed seeds: the same noise before and after training."""
    groups = t.rollout(list(range(len(ROWS))) * 4, first_attempt=10**6)
    return sum(sum(g.rewards) / len(g.rewards) for g in groups) / len(groups)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_reward_moves_with_the_sign_of_the_advantage(tmp_path, monkeypatch, sign):
    from relrl.rl import grpo_trainer

    real = grpo_trainer.group_advantages
    monkeypatch.setattr(grpo_trainer, "group_advantages",
                        lambda rewards, mode: sign * real(rewards, mode))
    model, tokenizer = tiny_policy(expressive=True)
    cfg = config(tmp_path, max_useful_steps=30, max_total_attempts=40, num_generations=8,
                 learning_rate=5e-3)
    t = GRPOTrainer(cfg, model, tokenizer, ROWS, reward_fn=letters)
    before = probe(t)
    stats = t.run()
    after = probe(t)
    rewards = stats["rewards_per_step"]
    assert 0.5 < before < 0.8
    if sign > 0:  # (once every completion is all letters, groups stop being informative)
        assert after > before + 0.2, (before, after)
        assert rewards[-1] > rewards[0]
    else:
        assert after < before - 0.3, (before, after)
        assert sum(rewards[-5:]) < sum(rewards[:5])


def test_warmup_then_cosine():
    factor = warmup_cosine(total=20, warmup_ratio=0.1)  # 2 warmup updates
    assert [factor(u) for u in (0, 1, 2)] == [0.5, 1.0, 1.0]
    assert factor(11) == pytest.approx(0.5) and factor(20) == pytest.approx(0.0)


def test_equal_reward_groups_never_reach_the_update(tmp_path):
    flat = {"q1", "q3"}

    def reward(text, row):  # q1 and q3: the same partial credit for every completion
        return (0.5, True) if row["id"] in flat else letters(text, row)

    t = trainer(tmp_path, reward=reward, max_useful_steps=8)
    stats = t.run()
    log = [json.loads(x) for x in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == list(range(1, 9))
    assert not {x["question_id"] for x in log} & flat
    assert all(x["reward_std"] > 0 for x in log)
    assert stats["waste_by_kind"] == {"all_correct": 0, "all_wrong": 0,
                                      "same_partial": stats["wasted_steps"]}
    assert stats["wasted_steps"] > 0
    assert stats["useful_steps"] + stats["wasted_steps"] == stats["total_attempts"]
    assert STUDY_FIELDS <= stats.keys() and STEP_FIELDS <= log[-1].keys()
    assert len(stats["losses"]) == len(stats["rewards_per_step"]) == 8


def test_grad_accum_groups_per_update_and_batch_mode(tmp_path):
    stats = trainer(tmp_path / "a", grad_accum=3, max_useful_steps=7).run()
    assert stats["optimizer_updates"] == 3  # 3 + 3 + 1 groups
    t = trainer(tmp_path / "b", sampling_mode="batch", gen_batch=4, grad_accum=2,
                max_useful_steps=4)
    sizes, rollout = [], t.sampler.rollout
    t.sampler.rollout = lambda indices, first: sizes.append(len(indices)) or rollout(indices, first)
    stats = t.run()
    assert stats["useful_steps"] == 4 and sum(sizes) == stats["total_attempts"]
    assert sizes[0] == 4  # 2 groups wanted, half assumed informative: one call of 4 questions
    assert stats["surplus_groups"] == stats["total_attempts"] - 4 - stats["wasted_steps"]


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_sum_constant"])
def test_micro_batches_are_normalised_by_the_whole_batch(tmp_path, aggregation):
    """Splitting the batch changes memory, not the update: each micro-batch's loss is divided
    by the batch's token and sequence counts. Compared before clipping (a huge max_grad_norm),
    which would otherwise rescale a wrongly normalised gradient back to the same norm, and
    before Adam, which would magnify rounding."""
    grads = []
    for size in (1, 8):
        t = trainer(tmp_path / str(size), grad_accum=2, train_micro_batch=size, beta=0.1,
                    max_useful_steps=2, aggregation=aggregation, max_grad_norm=1e9)
        seen = []
        t.optimizer.register_step_pre_hook(
            lambda *_: seen.append([p.grad.clone() for p in t.params]))
        t.run()
        grads.append(torch.cat([g.flatten() for g in seen[0]]))
    assert grads[0].abs().max() > 0
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-7)


def test_truncated_completions_masked_and_penalised(tmp_path):
    from relrl.engines import Completion
    from relrl.rl.grpo_batch import pack

    t = trainer(tmp_path, mask_truncated=True, overlong_buffer=4, max_new_tokens=8)
    done = Completion("ab", [5, 6, 7], [1, 2], truncated=False)
    cut = Completion("abcdefgh", list(range(10, 18)), [1, 2], truncated=True)
    batch = pack([(0, done, 1.0), (1, cut, -1.0)], t.tokenizer.pad_token_id, t.cfg.mask_truncated)
    assert batch.mask.tolist() == [[1, 1, 1, 0, 0, 0, 0, 0], [0] * 8]
    assert batch.advantages.tolist() == [1.0, -1.0] and batch.owner.tolist() == [0, 1]
    six = Completion("x", list(range(6)), [1], truncated=False)  # 2 tokens into the buffer
    assert [t.length_penalty(c) for c in (done, six, cut)] == [0.0, -0.5, -1.0]


def test_pass_rate_sampler_starts_from_the_screening_scores(tmp_path):
    rows = [{**ROWS[0], "base_score": 0, "base_samples": 4}, {**ROWS[1], "base_score": 2}, ROWS[2]]
    t = trainer(tmp_path, rows=rows, pass_rate_sampler=True)
    assert t.questions.pass_rate(0) < 0.1 and t.questions.pass_rate(1) == 0.5
    weights = t.questions.weights()  # a 0/4 question is rarely worth drawing
    assert weights[0] < 0.5 * weights[1] and weights[1] == weights[2]


def sigterm_after(calls):
    """A reward that sends this process SIGTERM on its `calls`-th use (mid-rollout)."""
    count = {"n": 0}

    def reward(text, row):
        count["n"] += 1
        if count["n"] == calls:
            os.kill(os.getpid(), signal.SIGTERM)
        return letters(text, row)

    return reward


def test_sigterm_then_resume_equals_an_uninterrupted_run(tmp_path, capsys):
    settings = dict(max_useful_steps=8, grad_accum=2, save_every=4, num_iterations=2, beta=0.05,
                    pass_rate_sampler=True)
    straight = trainer(tmp_path / "straight", **settings).run()

    out = tmp_path / "killed"
    stopped = trainer(out, reward=sigterm_after(4 * 5 + 2), **settings).run()  # mid-rollout
    n = stopped["useful_steps"]
    assert stopped["stopped_by"] == "SIGTERM" and 4 < n < 8
    assert f"stopped by SIGTERM at useful step {n}" in capsys.readouterr().out
    assert {p.name for p in out.glob("checkpoint-*")} == {"checkpoint-4", f"checkpoint-{n}"}
    with open(out / "train_log.jsonl", "a") as log:  # a line the kill cut short
        log.write('{"step": 99, "rew')
    resumed = trainer(out, **settings).run(resume_from=out / f"checkpoint-{n}")

    assert resumed == straight
    for name in ("checkpoint-8/adapter_model.safetensors", "statistics.json"):
        assert (out / name).read_bytes() == (tmp_path / "straight" / name).read_bytes()
    steps = [json.loads(x)["step"] for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))


def test_validation_keeps_the_best_adapter_and_patience_stops(tmp_path):
    model, tokenizer = tiny_policy()
    cfg = config(tmp_path, max_useful_steps=12, val_every=2, patience=2)
    t = GRPOTrainer(cfg, model, tokenizer, ROWS, ROWS[:2], reward_fn=lambda s, r: (
        letters(s, r)[0], letters(s, r)[0] > 0.6))
    stats = t.run()
    history = stats["val_history"]
    best = max(history, key=lambda v: (v["accuracy"], -v["step"]))
    assert stats["best_step"] == best["step"] and stats["best_val_accuracy"] == best["accuracy"]
    assert (tmp_path / "best" / "adapter_model.safetensors").is_file()
    assert json.loads((tmp_path / "best/trainer_state.json").read_text())["step"] == best["step"]
    if stats["stopped_by"] == "early_stopping":
        assert sum(v["step"] > best["step"] for v in history) == 2


def test_best_adapter_is_the_most_accurate_validation_not_the_first_or_last(tmp_path):
    """Validation accuracy that rises, falls and ties: best/ holds the step with the highest
    accuracy (the earliest of equals), and patience counts validations since that step."""
    from safetensors.torch import load_file

    model, tokenizer = tiny_policy()
    cfg = config(tmp_path, max_useful_steps=20, val_every=2, save_every=2, patience=2,
                 val_samples=2)
    t = GRPOTrainer(cfg, model, tokenizer, ROWS, ROWS[:2], reward_fn=letters)
    passes = iter([[0, 1], [1, 2], [1, 1], [2, 1], [2, 2], [2, 2]])  # of 2 samples, 2 rows
    t.validate = lambda: next(passes)
    stats = t.run()
    assert [v["accuracy"] for v in stats["val_history"]] == [0.25, 0.75, 0.5, 0.75]
    assert [v["step"] for v in stats["val_history"]] == [2, 4, 6, 8]
    assert stats["best_step"] == 4 and stats["best_val_accuracy"] == 0.75
    assert stats["stopped_by"] == "early_stopping" and stats["useful_steps"] == 8
    assert json.loads((tmp_path / "best/trainer_state.json").read_text())["step"] == 4
    best = load_file(str(tmp_path / "best/adapter_model.safetensors"))
    at_4 = load_file(str(tmp_path / "checkpoint-4/adapter_model.safetensors"))
    at_8 = load_file(str(tmp_path / "checkpoint-8/adapter_model.safetensors"))
    assert best.keys() == at_4.keys() and all(torch.equal(best[k], at_4[k]) for k in best)
    assert not all(torch.equal(best[k], at_8[k]) for k in best)  # training moved the weights


def test_overlong_penalty_is_added_to_the_rollout_rewards(tmp_path):
    t = trainer(tmp_path, reward=lambda text, row: (0.5, False), overlong_buffer=4,
                max_new_tokens=8)
    groups = t.rollout([0, 1, 2], first_attempt=0)
    penalties = [t.length_penalty(c) for g in groups for c in g.payload]
    assert min(penalties) < 0  # tiny-random rambles into the last 4 tokens
    assert [r for g in groups for r in g.rewards] == [0.5 + p for p in penalties]
    plain = trainer(tmp_path / "off", reward=lambda text, row: (0.5, False), max_new_tokens=8)
    assert all(g.rewards == [0.5] * 4 for g in plain.rollout([0, 1, 2], first_attempt=0))


@pytest.mark.parametrize("variant", ["exp7", "exp10"])
def test_loss_and_advantage_flags_reach_the_trainer(tmp_path, monkeypatch, variant):
    """--aggregation, --advantage, --clip-low/--clip-high and --num-iterations from the command
    line end up in the config, in the loss each micro-batch uses and in the update count."""
    from relrl.rl import grpo_main, grpo_trainer
    from relrl.rl.dynamic_sampling import Group
    from relrl.rl.grpo_loss import LossConfig

    argv = ["--model", "tiny-random", "--dataset", "d.jsonl", "--output-dir", str(tmp_path),
            "--max-new-tokens", "8", "--aggregation", "seq_sum_constant",
            "--advantage", "mean_only", "--clip-low", "0.15", "--clip-high", "0.35",
            "--num-iterations", "3", "--beta", "0.0"]
    cfg, _ = grpo_main.build_parser(variant).parse(argv)
    assert (cfg.aggregation, cfg.advantage, cfg.clip_low, cfg.clip_high, cfg.num_iterations) \
        == ("seq_sum_constant", "mean_only", 0.15, 0.35, 3)
    defaults, _ = grpo_main.build_parser(variant).parse(argv[:8])
    assert (defaults.aggregation, defaults.advantage, defaults.num_iterations) == \
        ("token_mean", "group_norm", 1)

    model, tokenizer = tiny_policy()
    t = GRPOTrainer(cfg, model, tokenizer, ROWS, reward_fn=letters)
    used = []
    real = grpo_trainer.policy_loss
    monkeypatch.setattr(grpo_trainer, "policy_loss",
                        lambda *a, **kw: used.append(a[4]) or real(*a, **kw))
    group = t.rollout([0], first_attempt=0)[0]
    metrics = t.update([Group(0, 0, [0.0, 1.0, 1.0, 1.0], [False, True, True, True],
                              group.payload)])
    assert metrics[0]["advantages"] == pytest.approx([-0.75, 0.25, 0.25, 0.25])  # r - mean
    assert t.updates == 3 and len(used) == 3
    expected = LossConfig(clip_low=0.15, clip_high=0.35, beta=0.0,
                          aggregation="seq_sum_constant", constant=8)
    assert all(c == expected for c in used)


# ---------------------------------------------------------------------- the two scripts
def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def script(name, *args, env=None, check=True):
    run = subprocess.run([sys.executable, str(ROOT / "training" / name), *map(str, args)],
                         capture_output=True, text=True, env={**os.environ, **(env or {})},
                         cwd=ROOT, timeout=600)
    if check:
        assert run.returncode == 0, run.stderr[-2000:]
    return run


def load_script(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHORT = ["--model", "tiny-random", "--max-new-tokens", "8", "--max-useful-steps", "4",
         "--grad-accum", "2", "--save-every", "2", "--max-total-steps", "60",
         "--reward", "digit-share"]


@pytest.fixture(scope="module")
def sft_adapter(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sft") / "fold_1"
    model, _ = load_model("tiny-random")
    attach_lora(model, r=4, alpha=8).save_pretrained(str(folder), save_embedding_layers=False)
    return folder


def test_exp10_script_with_the_study_environment_variables(tmp_path):
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    out = tmp_path / "exp10"
    script("grpo_exp10_nosft.py", *SHORT, env={"DATASET_PATH": data, "OUTPUT_DIR": str(out),
                                               "LEARNING_RATE": "0.002", "BETA": "0.01",
                                               "MAX_USEFUL_STEPS": "4", "MAX_TOTAL_STEPS": "60"})
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["settings"]["learning_rate"] == 0.002 and stats["settings"]["beta"] == 0.01
    assert STUDY_FIELDS <= stats.keys() and stats["useful_steps"] == 4
    assert {p.name for p in out.iterdir()} >= {"checkpoint-2", "checkpoint-4",
                                                "train_log.jsonl", "statistics.json"}
    config = json.loads((out / "checkpoint-4/adapter_config.json").read_text())
    assert config["r"] == 32 and config["peft_type"] == "LORA"
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert all(x["kl"] is not None for x in log)  # beta > 0: the KL to the reference is used


def test_exp7_script_sigterm_resume_and_evaluation(tmp_path, sft_adapter, capsys):
    """exp7 from a warm start: killed by SIGTERM after a checkpoint, resumed, it ends exactly
    where an uninterrupted run ends; its checkpoints load in evaluate_single.py."""
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    args = [*SHORT, "--max-useful-steps", "8", "--dataset", data, "--val-dataset", data,
            "--val-every", "4", "--sft-adapter", sft_adapter.parent, "--fold", "1"]
    assert main("exp7", [*map(str, args), "--output-dir", str(tmp_path / "straight")]) == 0
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(ROOT / "training/grpo_exp7_dynamic.py"),
                             *map(str, args), "--output-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    wait_until(lambda: (out / "checkpoint-2").exists() or proc.poll() is not None,
               timeout=600, what="exp7 writing checkpoint-2")
    assert proc.poll() is None, "exp7 finished before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == STOPPED_EXIT, stderr[-2000:]  # stopped, not finished: resume
    assert "stopped by SIGTERM" in stdout and "--resume" in stdout
    assert not (out / "checkpoint-8").exists()
    with pytest.raises(UsageError, match="this run's checkpoints .* pass --resume"):
        main("exp7", [*map(str, args), "--output-dir", str(out)])
    assert main("exp7", [*map(str, args), "--output-dir", str(out), "--resume"]) == 0
    assert "resumed from" in capsys.readouterr().out
    for name in ("checkpoint-8/adapter_model.safetensors", "statistics.json"):
        assert (out / name).read_bytes() == (tmp_path / "straight" / name).read_bytes()
    config = json.loads((out / "checkpoint-8/adapter_config.json").read_text())
    assert config["r"] == 4  # the SFT adapter's own shape, trained further
    assert (out / "best" / "adapter_model.safetensors").is_file()
    evaluate_single = load_script(ROOT / "evaluation/evaluate_single.py")
    evaluate_single.main(["--model", "tiny-random", "--adapter", str(out / "checkpoint-8"),
                          "--dataset", data, "--output", str(tmp_path / "eval.json"),
                          "--max-new-tokens", "4"])
    assert json.loads((tmp_path / "eval.json").read_text())["finetuned"]["n"] == len(ROWS)


# ---------------------------------------------------------------------- bad input
@pytest.fixture
def no_model(monkeypatch):
    """Fail loudly if a bad-input run gets as far as loading a model."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")
    # The command line's own binding (imported at the top of relrl.rl.grpo_main), and the loader
    # below it, so neither a built-in nor a hub model slips through.
    monkeypatch.setattr("relrl.rl.grpo_main.load_model", refuse)
    monkeypatch.setattr("relrl.models.by_name.load_pretrained", refuse)


def bad(capsys, variant, *args):
    from relrl.runtime.cli import run_main

    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda: main(variant, [str(a) for a in args]))
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error: ") and "\n" not in err
    return err


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, no_model, sft_adapter):
    good = write_rows(tmp_path / "good.jsonl", ROWS)
    rows = ROWS[:2] + [{"id": "x", "question": "no answer here"}]
    broken = write_rows(tmp_path / "bad.jsonl", rows)
    common = ["--model", "tiny-random", "--output-dir", tmp_path / "out"]
    assert "bad.jsonl:3" in bad(capsys, "exp10", *common, "--dataset", broken)
    empty = tmp_path / "empty_adapter"
    empty.mkdir()
    assert "--sft-adapter" in bad(capsys, "exp7", *common, "--dataset", good,
                                  "--sft-adapter", empty)
    assert "--sft-adapter: required" in bad(capsys, "exp7", *common, "--dataset", good)
    assert "--num-generations: must be >= 2, got 1" in bad(capsys, "exp10", *common, "--dataset",
                                                           good, "-G", "1")
    assert "--clip-low" in bad(capsys, "exp10", *common, "--dataset", good, "--clip-low=-0.1")
    assert "--clip-high" in bad(capsys, "exp10", *common, "--dataset", good, "--clip-high=-1")
    other = tmp_path / "out" / "checkpoint-20"
    other.mkdir(parents=True)
    (other / "trainer_state.json").write_text('{"fingerprint": "someone-else"}')
    err = bad(capsys, "exp10", *common, "--dataset", good)
    assert "another run's" in err and "--resume" in err and "--overwrite" in err


def test_bad_input_from_the_command_line(tmp_path):
    good = write_rows(tmp_path / "good.jsonl", ROWS)
    run = script("grpo_exp10_nosft.py", "--model", "tiny-random", "--dataset", good,
                 "--num-generations", "1", check=False)
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "--num-generations: must be >= 2" in run.stderr


@pytest.mark.slow
def test_exp7_on_tiny_with_the_grader_writes_checkpoints_evaluation_loads(tmp_path):
    """The real reward on the miniature base model (built on first use, up to 5 minutes)."""
    from relrl.problems.dataset import generate_rows
    from relrl.problems.registry import FAMILIES

    rows = generate_rows(list(FAMILIES.values()), 12, seed=5, paraphrases=0)
    data = write_rows(tmp_path / "train.jsonl", [{k: r[k] for k in ("question", "answer")}
                                                 for r in rows])
    model, _ = load_model("tiny")
    adapter = tmp_path / "sft"
    attach_lora(model, r=16, alpha=32).save_pretrained(str(adapter), save_embedding_layers=False)
    out = tmp_path / "exp7"
    script("grpo_exp7_dynamic.py", "--model", "tiny", "--dataset", data, "--sft-adapter", adapter,
           "--output-dir", out, "--max-useful-steps", "2", "--grad-accum", "1",
           "--save-every", "1", "--max-new-tokens", "160", "--max-total-steps", "40")
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["useful_steps"] == 2 and stats["settings"]["reward"] == "grader"
    ev = subprocess.run([sys.executable, str(ROOT / "evaluation/evaluate_single.py"),
                         "--model", "tiny", "--adapter", str(out / "checkpoint-2"),
                         "--dataset", data, "--output", str(tmp_path / "eval.json"),
                         "--max-new-tokens", "160"], capture_output=True, text=True, cwd=ROOT)
    assert ev.returncode == 0, ev.stderr[-2000:]
    assert json.loads((tmp_path / "eval.json").read_text())["finetuned"]["n"] == 12

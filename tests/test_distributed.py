"""Data parallelism over torch.distributed: 2 gloo processes under torchrun run the same run as
one process (GRPO exp10, SFT and DPO), a stop signal on one rank stops every rank at the same step,
and the killed 2-process run resumes to the end of the uninterrupted one.

Tolerance: the ranks' gradient sums are added up in another order than one process adds its
micro-batches, so the adapters differ by float rounding, which Adam's per-weight normalisation
magnifies for weights whose gradient is near zero: every weight within 1e-4 of the 1-process
run's (weights are ~0.1 after these steps) and 99.9% within 1e-6. Everything that the sampling
decides (questions, attempts, rewards, waste counters, useful steps, validation accuracy) is
identical; so is statistics.json: with one iteration per batch the surrogate loss is evaluated
at ratio 1 and does not depend on the rounding of the weights.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from safetensors.torch import load_file

ROWS = [{"id": f"q{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1),
         "reasoning": f"{i} + {i + 1} = {2 * i + 1}. \\boxed{{{2 * i + 1}}}"} for i in range(8)]
STEPS = 8
GRPO_ARGS = ["--model", "tiny-random", "--reward", "digit-share", "--max-new-tokens", "8",
             "--max-useful-steps", str(STEPS), "--grad-accum", "2", "--save-every", "2",
             "--max-total-steps", "80", "--train-micro-batch", "2", "--learning-rate", "1e-2",
             "--val-every", "4"]
TIMING = ("t_sample", "t_update", "t_step")


def write_rows(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


def launch(nproc: int, script: str, *args, **popen):
    """The script under torchrun with nproc gloo ranks, or plainly for nproc 0."""
    runner = [sys.executable] if nproc == 0 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc_per_node", str(nproc)]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           **{k: "" for k in os.environ if k.startswith("SLURM_")}}
    return subprocess.Popen([*runner, str(ROOT / "training" / script), *map(str, args)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **popen)


def run(nproc: int, script: str, *args) -> str:
    proc = launch(nproc, script, *args)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return out


def log(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "train_log.jsonl").read_text().splitlines()]


def assert_adapters_close(a: Path, b: Path) -> None:
    wa, wb = load_file(str(a / "adapter_model.safetensors")), load_file(
        str(b / "adapter_model.safetensors"))
    assert wa.keys() == wb.keys()
    diff = torch.cat([(wa[k] - wb[k]).abs().flatten() for k in sorted(wa)])
    assert diff.max() < 1e-4, diff.max()
    assert (diff > 1e-6).float().mean() < 1e-3
    moved = torch.cat([wa[k].abs().flatten() for k in sorted(wa) if "lora_B" in k])
    assert moved.max() > 1e-3  # the runs trained: lora_B starts at zero


def assert_same_run(one: Path, two: Path) -> None:
    assert (one / "statistics.json").read_bytes() == (two / "statistics.json").read_bytes()
    a, b = log(one), log(two)
    assert [x["step"] for x in a] == list(range(1, STEPS + 1))
    for x, y in zip(a, b, strict=True):
        exact = {k for k in x if k not in TIMING and k != "entropy"}
        assert {k: x[k] for k in exact} == {k: y[k] for k in exact}
        assert x["entropy"] == pytest.approx(y["entropy"], rel=1e-5)
    assert_adapters_close(one / f"checkpoint-{STEPS}", two / f"checkpoint-{STEPS}")


@pytest.fixture(scope="module")
def grpo_one(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grpo")
    data = write_rows(folder / "train.jsonl")
    out = folder / "one"
    run(0, "grpo_exp10_nosft.py", *GRPO_ARGS, "--dataset", data, "--val-dataset", data,
        "--output-dir", out)
    return folder, data, out


def test_grpo_on_two_gloo_ranks_equals_one_process(grpo_one):
    folder, data, one = grpo_one
    two = folder / "two"
    out = run(2, "grpo_exp10_nosft.py", *GRPO_ARGS, "--dataset", data, "--val-dataset", data,
              "--output-dir", two)
    assert "2 ranks" in out and out.count("done (max_useful_steps)") == 1  # rank 0 speaks
    stats = json.loads((one / "statistics.json").read_text())
    assert stats["useful_steps"] == STEPS and stats["wasted_steps"] > 0  # groups were dropped
    assert len(stats["val_history"]) == 2
    assert_same_run(one, two)
    assert (two / "best" / "adapter_model.safetensors").is_file()


# gspo and cispo with their recipes' clip settings and two updates per batch: the second
# update's ratio is not 1, so the objectives differ from grpo's and clip (gspo's narrow range).
OBJECTIVE_STEPS = 4
OBJECTIVES = {"gspo": ["--clip-low", "3e-4", "--clip-high", "4e-4"],
              "cispo": ["--clip-low", "1", "--clip-high", "3"]}
# measured at ratios that depend on the weights after an update, so equal up to the rounding
# of the ranks' gradient sums (the module docstring); the rest is decided by the sampling
ROUNDED = {"loss", "entropy", "clip_frac"}


@pytest.mark.parametrize("loss", OBJECTIVES)
def test_gspo_and_cispo_with_two_iterations_on_two_gloo_ranks_equal_one_process(tmp_path, loss):
    data = write_rows(tmp_path / "train.jsonl")
    args = [*GRPO_ARGS, "--max-useful-steps", OBJECTIVE_STEPS, "--save-every", OBJECTIVE_STEPS,
            "--loss", loss, "--num-iterations", "2", *OBJECTIVES[loss], "--dataset", data,
            "--val-dataset", data]
    run(0, "grpo_exp10_nosft.py", *args, "--output-dir", tmp_path / "one")
    out = run(2, "grpo_exp10_nosft.py", *args, "--output-dir", tmp_path / "two")
    assert "2 ranks" in out and f"{loss} loss" in out
    stats = [json.loads((tmp_path / name / "statistics.json").read_text()) for name in ("one", "two")]
    assert stats[0]["loss"] == stats[1]["loss"] == loss
    assert stats[0]["optimizer_updates"] == (OBJECTIVE_STEPS // 2) * 2  # batches of 2, 2 updates each
    assert stats[1]["losses"] == pytest.approx(stats[0]["losses"], rel=1e-4, abs=1e-6)
    assert {k: v for k, v in stats[1].items() if k != "losses"} == \
        {k: v for k, v in stats[0].items() if k != "losses"}
    a, b = log(tmp_path / "one"), log(tmp_path / "two")
    assert [x["step"] for x in a] == list(range(1, OBJECTIVE_STEPS + 1))
    for x, y in zip(a, b, strict=True):
        exact = {k for k in x if k not in TIMING and k not in ROUNDED}
        assert {k: x[k] for k in exact} == {k: y[k] for k in exact}
        assert [y[k] for k in sorted(ROUNDED)] == pytest.approx([x[k] for k in sorted(ROUNDED)],
                                                                 rel=1e-4, abs=1e-6)
    if loss == "gspo":  # the second update's sequence ratios leave the narrow range
        assert all(x["clip_frac"] > 0 for x in a)
    assert_adapters_close(tmp_path / "one" / f"checkpoint-{OBJECTIVE_STEPS}",
                          tmp_path / "two" / f"checkpoint-{OBJECTIVE_STEPS}")


def worker_pids(launcher_pid: int) -> dict[int, int]:
    """rank -> pid of torchrun's worker processes."""
    found = {}
    children = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
    for pid in map(int, children):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ranks = [e.split(b"=", 1)[1] for e in env if e.startswith(b"RANK=")]
        if ranks:
            found[int(ranks[0])] = pid
    return found


def wait_for(predicate, what: str, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigterm_on_one_rank_stops_both_and_the_resumed_run_ends_the_same(grpo_one,
                                                                          monkeypatch):
    folder, data, one = grpo_one
    killed = folder / "killed"
    args = [*GRPO_ARGS, "--dataset", data, "--val-dataset", data, "--output-dir", killed]
    stop_file = folder / ".stop-test"  # as slurm/distributed.sh sets it; never written here
    monkeypatch.setenv("RELRL_STOP_FILE", str(stop_file))
    proc = launch(2, "grpo_exp10_nosft.py", *args)
    try:
        wait_for(lambda: (killed / "checkpoint-2").exists() or proc.poll() is not None,
                 "the first checkpoint")
        pids = wait_for(lambda: len(worker_pids(proc.pid)) == 2 and worker_pids(proc.pid),
                        "two workers")
        os.kill(pids[1], signal.SIGTERM)  # rank 1 only: rank 0 must stop with it
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    # every rank exits 75 (stopped, resume), which torchrun reports as its own failure, 1; the
    # ranks' 75 beside the stop file is what the job file reads (slurm/distributed.sh)
    assert proc.returncode == 1 and re.search(r"exitcode\s*:\s*75\b", err), err[-3000:]
    assert stop_file.with_name(stop_file.name + ".exit").read_text().strip() == "75"
    monkeypatch.delenv("RELRL_STOP_FILE")
    stopped = [line for line in out.splitlines() if line.startswith("stopped by SIGTERM")]
    assert len(stopped) == 1, out  # printed by rank 0, which got no signal itself
    step = int(stopped[0].split("useful step ")[1].split(":")[0])
    assert 2 <= step < STEPS and (killed / f"checkpoint-{step}").is_dir()
    assert not (killed / f"checkpoint-{STEPS}").exists()
    state = json.loads((killed / f"checkpoint-{step}" / "trainer_state.json").read_text())
    assert state["useful_steps"] == step
    out = run(2, "grpo_exp10_nosft.py", *args, "--resume")
    assert f"resumed from {killed}/checkpoint-{step} at useful step {step}" in out
    assert_same_run(one, killed)


def test_sft_on_two_gloo_ranks_equals_one_process_with_the_same_global_batch(tmp_path):
    data = write_rows(tmp_path / "train.jsonl")
    args = ["--model", "tiny-random", "--dataset", data, "--train-all", "--folds", "1",
            "--epochs", "2", "--micro-batch", "1", "--grad-accum", "3", "--save-every", "2",
            "--learning-rate", "1e-3", "--max-length", "128"]
    run(0, "sft_qwen3_kfold.py", *args, "--output-dir", tmp_path / "one")
    run(2, "sft_qwen3_kfold.py", *args, "--output-dir", tmp_path / "two")
    a = json.loads((tmp_path / "one/all/statistics.json").read_text())
    b = json.loads((tmp_path / "two/all/statistics.json").read_text())
    assert a["steps"] == b["steps"] == 6 and a["items"] == b["items"] == len(ROWS)
    # batches of 3 examples, 3 micro-batches: rank 0 runs two, rank 1 one; the first step's
    # loss is exact (same weights), later ones agree to rounding
    assert a["losses"][0] == b["losses"][0]
    assert a["losses"] == pytest.approx(b["losses"], rel=1e-5)
    assert a["losses"][-1] < a["losses"][0]
    for x, y in zip(log(tmp_path / "one/all"), log(tmp_path / "two/all"), strict=True):
        assert (x["step"], x["tokens"], x["examples"]) == (y["step"], y["tokens"], y["examples"])
        assert x["grad_norm"] == pytest.approx(y["grad_norm"], rel=1e-4)
    assert_adapters_close(tmp_path / "one/adapters/all", tmp_path / "two/adapters/all")


def test_dpo_on_two_gloo_ranks_equals_one_process(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({
        "id": r["id"], "question": r["question"], "chosen": r["reasoning"],
        "rejected": f"It is \\boxed{{{r['answer']}0}}"}) + "\n" for r in ROWS[:6]))
    args = ["--model", "tiny-random", "--pairs-from", pairs, "--micro-batch", "1",
            "--grad-accum", "3", "--epochs", "2", "--learning-rate", "1e-3"]
    run(0, "dpo_train.py", *args, "--output-dir", tmp_path / "one")
    run(2, "dpo_train.py", *args, "--output-dir", tmp_path / "two")
    a = json.loads((tmp_path / "one/statistics.json").read_text())
    b = json.loads((tmp_path / "two/statistics.json").read_text())
    assert a["steps"] == b["steps"] == 4
    assert a["losses"][0] == b["losses"][0] == pytest.approx(0.6931, abs=1e-4)  # log 2 at start
    for curve in ("losses", "margins", "accuracies"):
        assert a[curve] == pytest.approx(b[curve], rel=1e-5, abs=1e-7), curve
    assert a["margins"][-1] > 0.1  # it learned to prefer the worked solutions
    assert (tmp_path / "one/pairs.jsonl").read_bytes() == (tmp_path / "two/pairs.jsonl").read_bytes()
    assert_adapters_close(tmp_path / "one/adapter", tmp_path / "two/adapter")

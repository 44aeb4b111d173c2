"""The real job files on a live SLURM cluster (CI starts one with .ci/slurm_cluster.sh).

Jobs are submitted as a user would, overriding only --gres=none and --partition; the site
settings point at this repository's Python and the built-in tiny model. Skipped when sbatch is
absent or no partition answers, unless RELRL_CI_SLURM is set (.ci/run tried to start a cluster):
then they fail, so a cluster that did not come up cannot give a green run. RELRL_SLURM_PARTITION names
the partition (default "local", the CI cluster's).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_gate import ci_started_a_cluster, cluster_unavailable

from relrl.evaluation.results_io import read_result

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "slurm"
PARTITION = os.environ.get("RELRL_SLURM_PARTITION", "local")
MODEL = "tiny"
# Small enough for a shared 2-core machine; two problem families on which the tiny model is
# right some of the time, with answers that fit in 128 tokens.
FAMILIES = "parallel_active,ss_normal_normal"
GEN = ["--n", "12", "--seed", "3", "--families", FAMILIES]
SCREEN_ARGS = "--max-new-tokens 128"

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("sbatch") is None and not ci_started_a_cluster(),
                       reason="sbatch is absent"),
]


def slurm_ready() -> str | None:
    """Why the cluster cannot take jobs, or None when it can."""
    if shutil.which("sbatch") is None:
        return "sbatch is absent"
    try:
        state = subprocess.run(["sinfo", "-h", "-p", PARTITION, "-o", "%a %t"], text=True,
                               capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "sinfo timed out"
    except OSError as exc:  # sbatch without sinfo
        return f"sinfo cannot run ({exc})"
    if state.returncode != 0 or not state.stdout.strip():
        why = (state.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no SLURM partition {PARTITION!r} answers ({why})"
    return None


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    reason = slurm_ready()
    if reason:
        cluster_unavailable(reason)
    # Build the tiny model once here, not in several array tasks at the same time.
    python("-c", f"from relrl.models.by_name import load_model; load_model({MODEL!r})")
    return tmp_path_factory.mktemp("slurm")


def site_env(folder: Path, **values) -> Path:
    """Site settings for this machine: no GPU, no resource requests beyond the defaults."""
    settings = {"SITE_PARTITION": PARTITION, "SITE_GPUS": "0", "SITE_PYTHON_ENV": sys.prefix,
                "MODEL": MODEL, "RUN_DIR": str(folder / "run")}
    settings.update(values)
    path = folder / "site.env"
    path.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in settings.items()))
    return path


def job_env(site: Path, **settings) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(SITE_ENV=str(site), RELRL_ROOT=str(ROOT), **settings)
    return env


def sbatch(job: str, folder: Path, env: dict, *options: str, wait: bool = True) -> str:
    """Submit slurm/<job>.sbatch from `folder` (its log lands there); the job id."""
    command = ["sbatch", "--parsable", "--gres=none", f"--partition={PARTITION}", *options,
               str(SLURM / f"{job}.sbatch")]
    if wait:
        command.insert(1, "--wait")
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                            timeout=850)
    job_id = result.stdout.strip().split(";")[0]
    assert result.returncode == 0, f"{job} {job_id} failed:\n{logs(folder, job_id)}{result.stderr}"
    return job_id


def logs(folder: Path, job_id: str) -> str:
    return "".join(p.read_text() for p in sorted(folder.rglob(f"*{job_id}*.out")))


def job_states(job_id: str) -> list[dict]:
    """scontrol's fields for a job (one dict per array task)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True,
                         text=True, timeout=30).stdout
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(2)
    raise AssertionError(f"timed out waiting for {what}")


def python(*args: str) -> None:
    subprocess.run([sys.executable, *args], cwd=ROOT, check=True, capture_output=True,
                   timeout=850)


@pytest.fixture(scope="module")
def questions(work) -> Path:
    data = work / "data"
    data.mkdir()
    python("generators/build_dataset.py", "generate", *GEN, "--out", str(data / "all.jsonl"))
    return data / "all.jsonl"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def screened(work, questions) -> Path:
    """Screening as a 3-task array and its merge job, on the cluster."""
    folder = work / "screen"
    folder.mkdir()
    env = job_env(site_env(folder), SCREEN_DATASET=str(questions),
                  SCREEN_DIR=str(folder / "out"), SCREEN_ARGS=SCREEN_ARGS)
    array = sbatch("screen", folder, env, "--array=0-2")
    assert len(job_states(array)) == 3
    assert all(t["JobState"] == "COMPLETED" for t in job_states(array))
    assert sorted(p.name for p in (folder / "out").glob("screening.shard-*.json")) == [
        f"screening.shard-{i}-of-3.json" for i in range(3)]
    sbatch("screen_merge", folder, env)
    return folder / "out"


def test_screening_array_and_merge_equal_one_unsharded_run(work, questions, screened):
    whole = work / "screen-whole"
    whole.mkdir()
    python("evaluation/screen_v4.py", "--model", MODEL, "--dataset", str(questions),
           "--output-dir", str(whole), *SCREEN_ARGS.split())
    for name in ("mixed.jsonl", "non_mixed.jsonl"):
        assert read_jsonl(screened / name) == read_jsonl(whole / name), name
    mixed = read_jsonl(whole / "mixed.jsonl")
    assert mixed, "the tiny model should get some questions partly right"
    sharded = read_result(screened / "screening.json")
    single = read_result(whole / "screening.json")
    assert [(r["id"], r["pass_count"]) for r in sharded["results"]] == \
        [(r["id"], r["pass_count"]) for r in single["results"]]


def test_grpo_checkpoints_on_usr1_and_its_requeued_run_finishes(work, screened):
    folder = work / "grpo"
    folder.mkdir()
    out = folder / "run"
    steps = 12
    env = job_env(site_env(folder), EXP="exp10", GRPO_DATASET=str(screened / "mixed.jsonl"),
                  GRPO_DIR=str(out), GRPO_ARGS=f"--max-useful-steps {steps} --grad-accum 1 "
                  "--save-every 100 --max-new-tokens 128 --max-total-steps 400")
    job = sbatch("grpo", folder, env, wait=False)
    wait_for(lambda: (out / "train_log.jsonl").exists(), 600, "the first training step")
    subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True, timeout=30)
    # The job requeues itself; SLURM holds a requeued job for two minutes before it may start
    # again, which this test does not need to wait out. But not "now": slurmd revoked the first
    # run's credential at the requeue, with one-second resolution, and refuses a relaunch whose
    # credential is from that same second ("Job credential revoked", the job ends FAILED; seen
    # when the requeue and the start fell 0.7 s apart).
    wait_for(lambda: job_states(job)[0].get("Restarts") == "1"
             and job_states(job)[0]["JobState"] == "PENDING", 600, "the requeue")
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now+3"], check=True,
                   timeout=30)
    final = wait_for(lambda: (s := job_states(job)[0])["JobState"] in
                     {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"} and s, 800, "the job")
    log = logs(folder, job)
    assert final["JobState"] == "COMPLETED" and final["ExitCode"] == "0:0", log
    stopped = re.search(r"stopped by SIGUSR1 at useful step (\d+): wrote (\S+); ", log)
    assert stopped, log
    step, checkpoint = int(stopped.group(1)), stopped.group(2)
    assert step < steps and checkpoint == f"{out}/checkpoint-{step}"
    assert "requeueing job" in log and "restart 1" in log
    assert f"resumed from {checkpoint} at useful step {step}" in log
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["useful_steps"] == steps
    assert (out / f"checkpoint-{steps}").is_dir()
    steps_logged = [json.loads(line)["step"] for line in
                    (out / "train_log.jsonl").read_text().splitlines()]
    assert steps_logged == list(range(1, steps + 1)), "the resumed run continues the log"


def test_pipeline_runs_every_stage_to_the_compare_table(work):
    folder = work / "pipeline"
    folder.mkdir()
    run = folder / "run"
    site = site_env(
        folder, GEN_N="30", GEN_ARGS=f"--families {FAMILIES}", SPLIT_ARGS="",
        SCREEN_SHARDS="2", SFT_FOLDS="2", SFT_FOLD="0", EVAL_STEPS="2",
        SCREEN_ARGS=SCREEN_ARGS,
        SFT_ARGS="--epochs 1 --eval-max-new-tokens 128",
        GRPO_ARGS="--max-useful-steps 2 --save-every 1 --grad-accum 1 --max-new-tokens 128 "
                  "--max-total-steps 200",
        EVAL_ARGS="--max-new-tokens 128")
    result = subprocess.run([str(SLURM / "pipeline.sh")], env=job_env(site), cwd=folder,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    ids = dict(line.split() for line in result.stdout.splitlines())
    assert list(ids) == ["generate", "screen", "merge", "sft", "grpo_exp7", "grpo_exp10",
                         "evaluate", "compare"]

    def finished():
        states = {stage: [t["JobState"] for t in job_states(job)] for stage, job in ids.items()}
        bad = {s: st for s, st in states.items() if set(st) - {"PENDING", "RUNNING",
                                                               "COMPLETING", "COMPLETED"}}
        assert not bad, f"{bad}\n" + "".join(
            p.read_text() for p in sorted((run / "logs").glob("*.out")))
        return states["compare"] == ["COMPLETED"]

    wait_for(finished, 850, "the pipeline")
    tables = {p.stem: p.read_text() for p in (run / "eval").glob("*.md")}
    assert set(tables) == {"mixed", "holdout"}
    for table in tables.values():
        for label in ("sft-fold_0", "grpo_exp7-ckpt-2", "grpo_exp10-ckpt-2"):
            assert label in table
    assert (run / "checkpoints.txt").read_text().split()[::2] == [
        f"{run}/sft/adapters/fold_0", f"{run}/grpo_exp7/checkpoint-2",
        f"{run}/grpo_exp10/checkpoint-2"]
    assert (run / "sft" / "cv_summary.json").is_file()
    assert (run / "site.env").read_text() == site.read_text(), "the jobs' copy of the settings"


def node_cpus() -> int:
    out = subprocess.run(["sinfo", "-h", "-p", PARTITION, "-o", "%c"], capture_output=True,
                         text=True, timeout=30).stdout.split()
    return max((int(x.rstrip("+")) for x in out if x.rstrip("+").isdigit()), default=0)


def test_distributed_grpo_as_a_two_task_job(work, questions):
    """The GRPO job file as 2 srun tasks (one gloo rank each) on the CPU: both ranks train,
    rank 0 alone writes, and the run ends where it should."""
    if node_cpus() < 2:
        pytest.skip("the partition's node has fewer than 2 CPUs")
    folder = work / "grpo-2ranks"
    folder.mkdir()
    out = folder / "run"
    env = job_env(site_env(folder, MODEL="tiny-random"), EXP="exp10", LAUNCHER="srun",
                  OMP_NUM_THREADS="1", GRPO_DATASET=str(questions), GRPO_DIR=str(out),
                  GRPO_ARGS="--max-useful-steps 4 --grad-accum 2 --save-every 2 "
                  "--max-new-tokens 8 --max-total-steps 60 --reward digit-share")
    job = sbatch("grpo", folder, env, "--ntasks=2", "--cpus-per-task=1")
    log = logs(folder, job)
    assert "data parallel: 2 ranks (srun tasks)" in log and ", 2 ranks, fingerprint" in log
    assert log.count("done (max_useful_steps)") == 1, log  # rank 0 speaks for both
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["useful_steps"] == 4 and (out / "checkpoint-4").is_dir()

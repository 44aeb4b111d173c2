"""The SLURM job files without a cluster: syntax, no personal data, the pipeline's sbatch lines,
bad input stopping a job in its first second, and USR1 turning into checkpoint + requeue."""
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "slurm"
JOB_FILES = sorted(SLURM.glob("*.sbatch"))
SHELL_FILES = JOB_FILES + sorted(SLURM.glob("*.sh")) + [ROOT / ".ci" / "slurm_cluster.sh"]
ALL_FILES = SHELL_FILES + [SLURM / "site.env.example", SLURM / "README.md"]
GPU_JOBS = {"screen", "sft_kfold", "grpo", "evaluate", "gsm8k"}
CPU_JOBS = {"generate_data", "screen_merge", "compare", "api_baselines"}


def write_site_env(path: Path, **values) -> Path:
    settings = {"SITE_PARTITION": "gpu-part", "SITE_PYTHON_ENV": "", "MODEL": "tiny-random",
                "RUN_DIR": str(path.parent / "run"), "SCREEN_SHARDS": "3", "SFT_FOLDS": "2",
                "SFT_FOLD": "1", "EVAL_STEPS": "2 4"}
    settings.update(values)
    path.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in settings.items()))
    return path


def clean_env(**extra) -> dict:
    """The caller's environment without any study or SLURM setting a job might read."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SITE_", "SBATCH_")) and k not in {
               "MODEL", "RUN_DIR", "EXP", "CHECKPOINTS", "RELRL_ROOT", "CONFIG"}}
    env.update(extra)
    return env


def run_job(job: str, site_env: Path, unset=(), **extra) -> subprocess.CompletedProcess:
    """A job file run by bash outside SLURM, as the batch shell would run it."""
    env = clean_env(SITE_ENV=str(site_env), RELRL_ROOT=str(ROOT), **extra)
    for name in unset:
        env.pop(name, None)
    return subprocess.run(["bash", str(SLURM / f"{job}.sbatch")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_every_kind_of_job_has_a_file():
    assert {f.stem for f in JOB_FILES} == GPU_JOBS | CPU_JOBS


@pytest.mark.parametrize("path", SHELL_FILES, ids=lambda p: p.name)
def test_bash_syntax(path):
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_no_personal_data(path):
    text = path.read_text()
    assert not re.search(r"[\w.+-]+@[\w-]+\.[a-z]{2,}", text, re.I), "an e-mail address"
    assert not re.search(r"(/home/|/Users/|/gpfs/users/|~/)\w", text), "a home path"
    for name in {os.environ.get("USER"), os.environ.get("LOGNAME")} - {None, "", "root"}:
        assert not re.search(rf"\b{re.escape(name)}\b", text), f"the user name {name}"


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: p.stem)
def test_job_files_leave_site_options_to_site_env(path):
    options = re.findall(r"^#SBATCH\s+(--[\w-]+)", path.read_text(), re.M)
    site_only = {"--partition", "--account", "--qos", "--mail-user", "--mem", "--cpus-per-task"}
    assert not site_only & set(options)
    kind = re.search(r"^#RELRL kind=(\w+)$", path.read_text(), re.M).group(1)
    assert (kind in {"train", "eval"}) == (path.stem in GPU_JOBS)
    assert ("--gres" in options) == (path.stem in GPU_JOBS)
    if re.search(r"run_resumable|run_training", path.read_text()):  # long steps checkpoint
        assert {"--signal", "--requeue", "--open-mode"} <= set(options)
        assert "#SBATCH --signal=B:USR1@" in path.read_text()


# ------------------------------------------------------------------ pipeline.sh --dry-run
def dry_run(tmp_path, **values):
    site = write_site_env(tmp_path / "site.env", **values)
    env = clean_env(SITE_ENV=str(site))
    return subprocess.run([str(SLURM / "pipeline.sh"), "--dry-run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=30)


def sbatch_lines(stdout: str) -> dict:
    """{job file stem (+ EXP): parsed options} from the dry run's sbatch lines."""
    jobs = {}
    for line in stdout.splitlines():
        if not line.startswith("sbatch "):
            continue
        words = shlex.split(line)
        options = dict(w[2:].split("=", 1) for w in words[1:-1] if "=" in w)
        flags = {w for w in words[1:-1] if "=" not in w}
        name = Path(words[-1]).stem
        if "EXP=" in options.get("export", ""):
            name += "_" + options["export"].split("EXP=")[1]
        jobs[name] = {**options, "flags": flags}
    return jobs


def test_pipeline_dry_run_chains_every_stage(tmp_path):
    result = dry_run(tmp_path, SITE_GPU_TYPE="a100", SITE_GPUS="2", SITE_ACCOUNT="proj1",
                     SITE_CPU_PARTITION="cpu-part", SITE_MEM="80G", SITE_TIME_TRAIN="20:00:00",
                     SITE_TIME_EVAL="3:00:00", SITE_TIME_CPU="1:00:00")
    assert result.returncode == 0, result.stderr
    jobs = sbatch_lines(result.stdout)
    assert list(jobs) == ["generate_data", "screen", "screen_merge", "sft_kfold", "grpo_exp7",
                          "grpo_exp10", "evaluate", "compare"]
    assert "dependency" not in jobs["generate_data"]
    needs = {name: job.get("dependency") for name, job in jobs.items()}
    assert needs == {"generate_data": None, "screen": "afterok:<generate>",
                     "screen_merge": "afterok:<screen>", "sft_kfold": "afterok:<merge>",
                     "grpo_exp7": "afterok:<sft>", "grpo_exp10": "afterok:<merge>",
                     "evaluate": "afterok:<grpo_exp7>:<grpo_exp10>",
                     "compare": "afterok:<evaluate>"}
    assert all(job["kill-on-invalid-dep"] == "yes" for name, job in jobs.items()
               if name != "generate_data")
    assert jobs["screen"]["array"] == "0-2"  # SCREEN_SHARDS=3
    assert jobs["sft_kfold"]["array"] == "0-1"  # SFT_FOLDS=2
    assert jobs["evaluate"]["array"] == "0-4"  # SFT fold + 2 runs x 2 steps
    for name, job in jobs.items():
        assert "--parsable" in job["flags"]
        assert job["account"] == "proj1"
        assert "mail-user" not in job  # mail is off unless SITE_MAIL_USER is set
        stem = name.split("_exp")[0]
        if stem in GPU_JOBS:
            assert (job["partition"], job["gres"], job["mem"]) == ("gpu-part", "gpu:a100:2", "80G")
        else:
            assert job["partition"] == "cpu-part" and "gres" not in job
    times = {name: job["time"] for name, job in jobs.items()}
    assert times == {"generate_data": "1:00:00", "screen": "3:00:00", "screen_merge": "1:00:00",
                     "sft_kfold": "20:00:00", "grpo_exp7": "20:00:00", "grpo_exp10": "20:00:00",
                     "evaluate": "3:00:00", "compare": "1:00:00"}
    assert "CHECKPOINTS=" in jobs["evaluate"]["export"]
    run = tmp_path / "run"
    listed = [line[4:] for line in result.stdout.splitlines() if line.startswith("#   ")]
    assert listed == [f"{run}/sft/adapters/fold_1 sft-fold_1",
                      f"{run}/grpo_exp7/checkpoint-2 grpo_exp7-ckpt-2",
                      f"{run}/grpo_exp10/checkpoint-2 grpo_exp10-ckpt-2",
                      f"{run}/grpo_exp7/checkpoint-4 grpo_exp7-ckpt-4",
                      f"{run}/grpo_exp10/checkpoint-4 grpo_exp10-ckpt-4"]
    assert not run.exists(), "a dry run writes nothing"


def test_pipeline_without_gpus_and_with_mail(tmp_path):
    result = dry_run(tmp_path, SITE_GPUS="0", SITE_MAIL_USER="someone.example")
    jobs = sbatch_lines(result.stdout)
    assert jobs["grpo_exp7"]["gres"] == "none"
    assert jobs["compare"]["mail-user"] == "someone.example"
    assert jobs["compare"]["mail-type"] == "END,FAIL"


def test_environment_wins_over_site_env(tmp_path):
    site = write_site_env(tmp_path / "site.env")
    env = clean_env(SITE_ENV=str(site), SITE_PARTITION="other", SCREEN_SHARDS="5")
    result = subprocess.run([str(SLURM / "pipeline.sh"), "--dry-run"], env=env,
                            capture_output=True, text=True, timeout=30)
    jobs = sbatch_lines(result.stdout)
    assert jobs["screen"]["partition"] == "other" and jobs["screen"]["array"] == "0-4"


@pytest.mark.parametrize("missing", ["SITE_PARTITION", "MODEL", "SFT_FOLDS"])
def test_pipeline_refuses_missing_setting(tmp_path, missing):
    result = dry_run(tmp_path, **{missing: ""})
    assert result.returncode == 2
    assert f"{missing} is not set" in result.stderr
    assert "sbatch" not in result.stdout


def test_pipeline_without_site_env(tmp_path):
    env = clean_env(SITE_ENV=str(tmp_path / "absent.env"))
    result = subprocess.run([str(SLURM / "pipeline.sh"), "--dry-run"], env=env,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "copy slurm/site.env.example to slurm/site.env" in result.stderr


def bare_checkout(tmp_path: Path) -> Path:
    """The slurm/ folder alone, as a fresh clone has it: site.env.example but no site.env."""
    import shutil

    root = tmp_path / "checkout"
    shutil.copytree(SLURM, root / "slurm", ignore=shutil.ignore_patterns("site.env"))
    return root


def test_dry_run_without_site_env_shows_the_jobs_with_the_example(tmp_path):
    root = bare_checkout(tmp_path)
    result = subprocess.run([str(root / "slurm" / "pipeline.sh"), "--dry-run"], cwd=tmp_path,
                            env=clean_env(), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "no slurm/site.env" in result.stderr and "site.env.example" in result.stderr
    jobs = sbatch_lines(result.stdout)
    assert list(jobs) == ["generate_data", "screen", "screen_merge", "sft_kfold", "grpo_exp7",
                          "grpo_exp10", "evaluate", "compare"]
    # the example's values: partition gpu, one GPU, its times; 4 screening shards, 5 folds
    assert (jobs["grpo_exp7"]["partition"], jobs["grpo_exp7"]["gres"]) == ("gpu", "gpu:1")
    assert jobs["grpo_exp7"]["time"] == "24:00:00" and jobs["compare"]["time"] == "02:00:00"
    assert jobs["screen"]["array"] == "0-3" and jobs["sft_kfold"]["array"] == "0-4"
    assert jobs["evaluate"]["array"] == "0-6"  # the SFT fold + 2 runs x EVAL_STEPS "80 100 200"
    assert not (root / "runs").exists() and not (root / "slurm" / "site.env").exists()
    one = subprocess.run([str(root / "slurm" / "submit.sh"), "--dry-run", "grpo"], cwd=tmp_path,
                         env=clean_env(), capture_output=True, text=True, timeout=30)
    assert one.returncode == 0 and "--partition=gpu" in one.stdout
    assert "site.env.example" in one.stderr


def test_a_real_submission_still_needs_site_env(tmp_path):
    root = bare_checkout(tmp_path)
    result = subprocess.run([str(root / "slurm" / "pipeline.sh")], cwd=tmp_path,
                            env=clean_env(PATH="/usr/bin:/bin"), capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2
    assert "copy slurm/site.env.example to slurm/site.env" in result.stderr


def test_submit_dry_run_passes_options_after_the_site_ones(tmp_path):
    site = write_site_env(tmp_path / "site.env", SITE_TIME_TRAIN="10:00:00")
    env = clean_env(SITE_ENV=str(site))
    result = subprocess.run([str(SLURM / "submit.sh"), "--dry-run", "grpo", "--time=1:00:00"],
                            env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    words = shlex.split(result.stdout)
    assert words[0] == "sbatch" and words[-1] == str(SLURM / "grpo.sbatch")
    assert words.index("--time=10:00:00") < words.index("--time=1:00:00")


# ------------------------------------------------------------------ bad input, no cluster
def test_job_stops_at_once_on_a_missing_setting(tmp_path):
    site = write_site_env(tmp_path / "site.env", MODEL="")
    result = run_job("screen", site)
    assert result.returncode == 2
    assert "MODEL is not set" in result.stderr and str(site) in result.stderr


def test_job_stops_at_once_on_a_missing_input(tmp_path):
    site = write_site_env(tmp_path / "site.env")
    result = run_job("screen", site)
    assert result.returncode == 2
    assert f"input missing: {tmp_path}/run/data/train.jsonl" in result.stderr


def test_evaluate_refuses_an_empty_checkpoint_list(tmp_path):
    site = write_site_env(tmp_path / "site.env")
    listing = tmp_path / "checkpoints.txt"
    listing.write_text("# nothing yet\n\n")
    result = run_job("evaluate", site, CHECKPOINTS=str(listing))
    assert result.returncode == 2
    assert f"the checkpoint list {listing} is empty" in result.stderr


def test_evaluate_checks_every_checkpoint_before_work(tmp_path):
    site = write_site_env(tmp_path / "site.env")
    (tmp_path / "ok").mkdir()
    data = tmp_path / "q.jsonl"
    data.write_text("{}\n")
    listing = tmp_path / "checkpoints.txt"
    listing.write_text(f"{tmp_path}/ok\n{tmp_path}/gone  # a later one\n")
    result = run_job("evaluate", site, CHECKPOINTS=str(listing), EVAL_DATASETS=str(data))
    assert result.returncode == 2
    assert f"input missing: {tmp_path}/gone" in result.stderr
    assert not (tmp_path / "run").exists()


def test_grpo_refuses_an_unknown_experiment(tmp_path):
    site = write_site_env(tmp_path / "site.env")
    data = tmp_path / "mixed.jsonl"
    data.write_text("{}\n")
    result = run_job("grpo", site, EXP="exp9", GRPO_DATASET=str(data))
    assert result.returncode == 2 and "EXP must be exp7 or exp10" in result.stderr


def recording_python(tmp_path: Path) -> Path:
    """A virtual environment whose python only prints the command line it was given."""
    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text('#!/bin/bash\necho "python $*"\n')
    (env / "bin" / "python").chmod(0o755)
    return env


@pytest.mark.parametrize("job, extra, script", [
    ("grpo", {"EXP": "exp10"}, "training/grpo_exp10_nosft.py"),
    ("sft_kfold", {}, "training/sft_qwen3_kfold.py"),
])
def test_training_jobs_pass_config_on_as_a_recipe(tmp_path, job, extra, script):
    recipe = {"grpo": "recipes/grpo_exp10.yaml", "sft_kfold": "recipes/sft_kfold.yaml"}[job]
    site = write_site_env(tmp_path / "site.env", SITE_PYTHON_ENV=str(recording_python(tmp_path)))
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    inputs = {"GRPO_DATASET": str(data), "SFT_DATASET": str(data)}
    result = run_job(job, site, CONFIG=recipe, **inputs, **extra)
    assert result.returncode == 0, result.stderr
    calls = [line for line in result.stdout.splitlines() if line.startswith("python ")]
    assert calls and all(f"{script} " in c and f" --config {recipe}" in c for c in calls)
    assert len(calls) == (2 if job == "sft_kfold" else 1)  # SFT_FOLDS=2, outside an array
    without = run_job(job, site, **inputs, **extra)
    assert without.returncode == 0 and "--config" not in without.stdout
    missing = run_job(job, site, CONFIG=str(tmp_path / "none.yaml"), **inputs, **extra)
    assert missing.returncode == 2 and f"input missing: {tmp_path}/none.yaml" in missing.stderr
    assert "python " not in missing.stdout


def test_api_baselines_want_the_key_in_the_environment_not_in_site_env(tmp_path):
    site = write_site_env(tmp_path / "site.env", API_MODELS="openai/o3-mini")
    result = run_job("api_baselines", site, unset=["OPENROUTER_API_KEY"])
    assert result.returncode == 2
    assert "OPENROUTER_API_KEY is not set: export the API key" in result.stderr


def test_gsm8k_needs_a_local_dataset_unless_told_to_use_the_hub(tmp_path):
    site = write_site_env(tmp_path / "site.env")
    result = run_job("gsm8k", site)
    assert result.returncode == 2 and "GSM8K_DATASET is not set" in result.stderr


def test_adapter_labels(tmp_path):
    site = write_site_env(tmp_path / "site.env")
    script = (f"ROOT={shlex.quote(str(ROOT))}; source \"$ROOT/slurm/prelude.sh\" >/dev/null; "
              "adapter_label runs/x/sft/adapters/fold_4; adapter_label runs/x/grpo_exp7/checkpoint-80")
    result = subprocess.run(["bash", "-c", script], env=clean_env(SITE_ENV=str(site)),
                            capture_output=True, text=True, timeout=30)
    assert result.stdout.split() == ["sft-fold_4", "grpo_exp7-checkpoint-80"], result.stderr


def test_bad_python_env_is_reported(tmp_path):
    site = write_site_env(tmp_path / "site.env", SITE_PYTHON_ENV=str(tmp_path / "no-env"))
    result = run_job("compare", site, PATH="/usr/bin:/bin")
    assert result.returncode == 2
    assert "is neither a virtual environment nor a conda environment" in result.stderr


# ------------------------------------------------------------------ USR1 -> checkpoint, requeue
STOPPED_EXIT = 75  # relrl.runtime.stop.STOPPED_EXIT, slurm/prelude.sh's STOPPED_EXIT

# A step standing in for a trainer: on USR1 it writes its "checkpoint" and exits with the
# status given (75: stopped, resume; 0: it finished anyway); "die": no handler, USR1 kills it.
STEP = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write("checkpoint")
    sys.exit(int(sys.argv[2]))
if sys.argv[2] != "die":
    signal.signal(signal.SIGUSR1, stop)
open(sys.argv[1] + ".ready", "w").close()
time.sleep(60)
sys.exit(5)
"""

BATCH = """
set -euo pipefail
ROOT={root}
source "$ROOT/slurm/prelude.sh"
run_resumable {step} {marker} {how}
echo "finished without a signal"
"""


def fake_scontrol(tmp_path: Path, status: int = 0) -> dict:
    """PATH with an scontrol that records its arguments and exits with `status`."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/scontrol.args\nexit {status}\n")
    scontrol.chmod(0o755)
    return {"PATH": f"{tmp_path}/bin:{os.environ['PATH']}", "SLURM_JOB_ID": "4242"}


def batch_job(tmp_path: Path, how: str, *, usr1: bool, scontrol_status: int = 0):
    """The batch shell running the STEP stand-in; with usr1, SLURM's warning reaches the shell
    once the step is ready. (returncode, stdout, stderr, the step's marker file)"""
    site = write_site_env(tmp_path / "site.env", SITE_PYTHON_ENV=str(Path(sys.prefix)))
    env = clean_env(SITE_ENV=str(site), **fake_scontrol(tmp_path, scontrol_status))
    step, marker = tmp_path / "step.py", tmp_path / "marker"
    step.write_text(STEP)
    batch = tmp_path / "batch.sh"
    batch.write_text(BATCH.format(root=shlex.quote(str(ROOT)), step=step, marker=marker, how=how))
    shell = subprocess.Popen(["bash", str(batch)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    if usr1:
        for _ in range(300):  # the step has installed its handler
            if Path(f"{marker}.ready").exists():
                break
            time.sleep(0.1)
        shell.send_signal(signal.SIGUSR1)
    out, err = shell.communicate(timeout=90)
    return shell.returncode, out, err, marker


@pytest.mark.parametrize("how", [str(STOPPED_EXIT), "die"])
def test_usr1_is_forwarded_and_a_stopped_step_requeues_the_job(tmp_path, how):
    """The batch shell passes USR1 to the step, which checkpoints and exits 75 (or dies of the
    signal before it could); the shell then asks SLURM to requeue the job (scontrol is a
    stand-in that records its arguments), and the job file goes no further."""
    code, out, err, marker = batch_job(tmp_path, how, usr1=True)
    assert code == 0, err
    assert marker.exists() == (how != "die")
    assert (tmp_path / "scontrol.args").read_text().split() == ["requeue", "4242"]
    assert "requeueing job 4242" in out and "finished without a signal" not in out


def test_a_step_that_finished_despite_the_signal_is_not_requeued(tmp_path):
    """Exit 0 is a finished step, even after USR1: the job goes on, nothing requeued."""
    code, out, err, marker = batch_job(tmp_path, "0", usr1=True)
    assert code == 0, err
    assert marker.read_text() == "checkpoint"
    assert not (tmp_path / "scontrol.args").exists()
    assert "requeueing" not in out and "finished without a signal" in out


def test_a_step_stopped_by_another_signal_requeues_the_job(tmp_path):
    """75 alone (a SIGTERM the job shell never saw) still means: stopped, resume."""
    site = write_site_env(tmp_path / "site.env", SITE_PYTHON_ENV=str(Path(sys.prefix)))
    step = tmp_path / "step.py"
    step.write_text(f"import sys; sys.exit({STOPPED_EXIT})\n")
    batch = tmp_path / "batch.sh"
    batch.write_text(BATCH.format(root=shlex.quote(str(ROOT)), step=step, marker="x", how=""))
    result = subprocess.run(["bash", str(batch)], capture_output=True, text=True, timeout=30,
                            env=clean_env(SITE_ENV=str(site), **fake_scontrol(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "requeueing job 4242" in result.stdout
    assert "finished without a signal" not in result.stdout


def test_a_failed_requeue_leaves_the_job_marked_unfinished(tmp_path):
    code, out, err, _ = batch_job(tmp_path, str(STOPPED_EXIT), usr1=True, scontrol_status=1)
    assert code == STOPPED_EXIT
    assert "scontrol requeue failed: resubmit this job to resume" in err
    assert "finished without a signal" not in out


def test_step_failure_without_a_signal_fails_the_job(tmp_path):
    site = write_site_env(tmp_path / "site.env", SITE_PYTHON_ENV=str(Path(sys.prefix)))
    step = tmp_path / "step.py"
    step.write_text("import sys; sys.exit(3)\n")
    batch = tmp_path / "batch.sh"
    batch.write_text(BATCH.format(root=shlex.quote(str(ROOT)), step=step, marker="x", how=""))
    result = subprocess.run(["bash", str(batch)], env=clean_env(SITE_ENV=str(site)),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 3
    assert "requeueing" not in result.stdout


def exiting_python(tmp_path: Path, status: int) -> Path:
    """A virtual environment whose python prints its command line and exits with `status`."""
    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text(f'#!/bin/bash\necho "python $*"\nexit {status}\n')
    (env / "bin" / "python").chmod(0o755)
    return env


@pytest.mark.parametrize("job, extra", [("grpo", {"EXP": "exp10"}), ("sft_kfold", {})])
def test_training_jobs_requeue_a_stopped_step_and_resume_when_requeued(tmp_path, job, extra):
    """The job files themselves: a training step that exits 75 requeues the job (the first
    fold's, for SFT: no later fold starts), and the requeued job (SLURM_RESTART_COUNT 1)
    passes --resume."""
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    inputs = {"GRPO_DATASET": str(data), "SFT_DATASET": str(data), **extra}
    site = write_site_env(tmp_path / "site.env",
                          SITE_PYTHON_ENV=str(exiting_python(tmp_path, STOPPED_EXIT)))
    stopped = run_job(job, site, **inputs, **fake_scontrol(tmp_path))
    assert stopped.returncode == 0, stopped.stderr
    calls = [line for line in stopped.stdout.splitlines() if line.startswith("python ")]
    assert len(calls) == 1 and "--resume" not in calls[0]
    assert "requeueing job 4242" in stopped.stdout
    assert (tmp_path / "scontrol.args").read_text().split() == ["requeue", "4242"]
    requeued = run_job(job, site, **inputs, **fake_scontrol(tmp_path), SLURM_RESTART_COUNT="1")
    calls = [line for line in requeued.stdout.splitlines() if line.startswith("python ")]
    assert calls and all(c.endswith(" --resume") or " --resume " in c for c in calls)


# ------------------------------------------------------------------ a CI cluster that is down
@pytest.mark.parametrize("sbatch", [False, True], ids=["no-sbatch", "sinfo-fails"])
def test_slurm_tests_fail_in_ci_when_the_cluster_is_down_and_skip_elsewhere(tmp_path, sbatch):
    """RELRL_CI_SLURM set (.ci/run tried to start a cluster: 1 it did, 0 it could not): a
    cluster that does not answer fails the SLURM tests; without it they skip, as on a laptop."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if sbatch:  # installed, but no partition answers
        for name in ("sbatch", "sinfo"):
            (bin_dir / name).write_text("#!/bin/sh\necho 'slurm_load_partitions: down' >&2\n"
                                        "exit 1\n")
            (bin_dir / name).chmod(0o755)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
           str(ROOT / "tests" / "test_slurm_cluster.py")]
    outcomes = {}
    for ci in ("1", "0", None):
        env = clean_env(PATH=str(bin_dir))
        env.pop("RELRL_CI_SLURM", None)
        if ci:
            env["RELRL_CI_SLURM"] = ci
        outcomes[ci] = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                                      timeout=300)
    reason = "slurm_load_partitions: down" if sbatch else "sbatch is absent"
    for ci, message in (("1", "RELRL_CI_SLURM=1 but the SLURM cluster is unusable"),
                        ("0", "RELRL_CI_SLURM=0: .ci/run could not start the SLURM cluster")):
        failed = outcomes[ci]
        assert failed.returncode == 1, failed.stdout[-2000:]
        assert message in failed.stdout and reason in failed.stdout
        assert " passed" not in failed.stdout and " skipped" not in failed.stdout
    skipped = outcomes[None]
    assert skipped.returncode == 0, skipped.stdout[-2000:]
    n_cluster_tests = (ROOT / "tests" / "test_slurm_cluster.py").read_text().count("\ndef test_")
    assert re.search(rf"\b{n_cluster_tests} skipped\b", skipped.stdout)
    assert " failed" not in skipped.stdout
    assert reason in skipped.stdout

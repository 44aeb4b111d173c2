"""Data-parallel training on SLURM without a cluster: the pipeline's multi-GPU sbatch lines,
the torchrun command a multi-GPU job runs, USR1 reaching every rank through the stop file, and
the verl DAPO launcher's settings."""
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_slurm_files import ROOT, SLURM, clean_env, dry_run, sbatch_lines, write_site_env

TRAIN_STAGES = {"sft_kfold", "grpo_exp7", "grpo_exp10"}


def test_pipeline_dry_run_sends_the_training_stages_to_several_nodes(tmp_path):
    result = dry_run(tmp_path, SITE_GPU_TYPE="h100", TRAIN_NODES="2", TRAIN_GPUS_PER_NODE="8")
    assert result.returncode == 0, result.stderr
    jobs = sbatch_lines(result.stdout)
    for name, options in jobs.items():
        if name in TRAIN_STAGES:
            assert options["nodes"] == "2" and options["ntasks-per-node"] == "1", name
            assert options["gres"] == "gpu:h100:8", name
        else:
            assert "nodes" not in options and options.get("gres") != "gpu:h100:8", name
    single = sbatch_lines(dry_run(tmp_path, SITE_GPU_TYPE="h100").stdout)
    assert all("nodes" not in options for options in single.values())


# A rank standing in for a trainer: when the stop file appears it "checkpoints", writes the
# stopped status 75 beside the stop file (relrl.runtime.stop.exit_status) and exits with the
# status its launcher would report: 75 (srun), 1 (torchrun, which turns any failure into 1),
# or 1 without the file (a crash while stopping).
STEP = """
import os, sys, time
stop = os.environ["RELRL_STOP_FILE"]
open(sys.argv[1] + ".ready", "w").close()
for _ in range(600):
    if os.path.exists(stop):
        open(sys.argv[1], "w").write("checkpoint after " + open(stop).read().strip())
        if sys.argv[2] != "crash":
            open(stop + ".exit", "w").write("75\\n")
        sys.exit(int(sys.argv[2]) if sys.argv[2] != "crash" else 1)
    time.sleep(0.1)
sys.exit(5)
"""

BATCH = """
set -euo pipefail
ROOT={root}
source "$ROOT/slurm/prelude.sh"
source "$ROOT/slurm/distributed.sh"
run_training {out} {step} {marker} {how}
echo "finished without a signal"
"""

# srun stand-in: records its arguments, then runs the training script itself (no torchrun)
SRUN = """#!/bin/sh
echo "$@" > {tmp}/srun.args
while [ "$#" -gt 0 ] && [ "${{1##*/}}" != step.py ]; do shift; done
exec {python} "$@"
"""


def multi_node_job(tmp_path, how):
    """The batch shell running the STEP stand-in on 2 nodes of 4 GPUs, SLURM's USR1 sent once
    it is ready: (returncode, stdout, stderr, marker file, output folder)."""
    site = write_site_env(tmp_path / "site.env", SITE_PYTHON_ENV=str(Path(sys.prefix)))
    (tmp_path / "bin").mkdir()
    for name, text in (("scontrol", f"#!/bin/sh\n[ \"$1\" = requeue ] && echo \"$@\" > "
                                    f"{tmp_path}/scontrol.args\n[ \"$1\" = show ] && "
                                    "echo node-a && echo node-b\nexit 0\n"),
                       ("srun", SRUN.format(tmp=tmp_path, python=sys.executable))):
        (tmp_path / "bin" / name).write_text(text)
        (tmp_path / "bin" / name).chmod(0o755)
    step, marker, out = tmp_path / "step.py", tmp_path / "marker", tmp_path / "out"
    step.write_text(STEP)
    out.mkdir()
    batch = tmp_path / "batch.sh"
    batch.write_text(BATCH.format(root=shlex.quote(str(ROOT)), out=out, step=step,
                                  marker=marker, how=how))
    env = clean_env(SITE_ENV=str(site), SLURM_JOB_ID="4242", SLURM_NNODES="2",
                    SLURM_JOB_NODELIST="node-[a-b]", SLURM_GPUS_ON_NODE="4",
                    PATH=f"{tmp_path}/bin:{os.environ['PATH']}")
    shell = subprocess.Popen(["bash", str(batch)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not Path(f"{marker}.ready").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    shell.send_signal(signal.SIGUSR1)
    stdout, err = shell.communicate(timeout=60)
    return shell.returncode, stdout, err, marker, out


@pytest.mark.parametrize("how", ["75", "1"])
def test_usr1_reaches_every_rank_through_the_stop_file_and_the_job_requeues(tmp_path, how):
    """75 from the launcher, or torchrun's 1 with the ranks' 75 in <stop file>.exit: requeue."""
    code, stdout, err, marker, out = multi_node_job(tmp_path, how)
    assert code == 0, err
    assert marker.read_text() == "checkpoint after SIGUSR1"
    assert (tmp_path / "scontrol.args").read_text().split() == ["requeue", "4242"]
    assert "requeueing job 4242" in stdout and "finished without a signal" not in stdout
    assert "2 node(s) x 4 ranks (torchrun)" in stdout
    words = (tmp_path / "srun.args").read_text().split()
    assert words[:2] == ["--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    launcher = words[words.index("-m") + 1:]
    assert launcher[:5] == ["torch.distributed.run", "--nnodes=2", "--nproc_per_node=4",
                            "--rdzv_backend=c10d", "--rdzv_endpoint=node-a:24242"]
    assert not list(out.glob(".stop-*"))  # the stop file (and its .exit) gone for the requeue


def test_a_rank_that_fails_while_stopping_fails_the_job(tmp_path):
    """torchrun's 1 without the ranks' 75: a failure, not a stop; nothing requeued."""
    code, stdout, err, marker, out = multi_node_job(tmp_path, "crash")
    assert code == 1
    assert not (tmp_path / "scontrol.args").exists() and "requeueing" not in stdout
    assert not list(out.glob(".stop-*"))


def rendezvous_host(tmp_path, scontrol):
    """The rendezvous host distributed.sh picks, under the job files' strict mode."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "scontrol").write_text(scontrol)
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    script = (f"set -euo pipefail\nsource {shlex.quote(str(SLURM / 'distributed.sh'))}\n"
              "rendezvous_host\necho done\n")
    env = clean_env(SLURM_JOB_NODELIST="node-[a-z]", PATH=f"{tmp_path}/bin:{os.environ['PATH']}")
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)


def test_rendezvous_host_survives_a_node_list_longer_than_a_pipe_buffer(tmp_path):
    # 200,000 host names: a reader that stops after the first line makes scontrol die of
    # SIGPIPE, and pipefail with set -e then kills the job (exit 141)
    many = "#!/bin/sh\necho node-a\nseq 200000 | sed 's/^/node-x/'\n"
    result = rendezvous_host(tmp_path, many)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["node-a", "done"]


def test_rendezvous_host_is_this_host_when_scontrol_fails(tmp_path):
    result = rendezvous_host(tmp_path, "#!/bin/sh\nexit 1\n")
    assert result.returncode == 0, result.stderr
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    assert result.stdout.split() == [host, "done"]


def test_verl_dapo_dry_run_carries_the_study_settings():
    run = subprocess.run([str(SLURM / "verl_dapo.sh"), "--dry-run", "trainer.nnodes=4"],
                         capture_output=True, text=True, env=clean_env(RUN_DIR="/data/run"),
                         timeout=30)
    assert run.returncode == 0, run.stderr
    words = shlex.split(run.stdout)
    assert words[:3] == ["python3", "-m", "recipe.dapo.main_dapo"]
    settings = dict(w.split("=", 1) for w in words[3:])
    expected = {
        "algorithm.filter_groups.enable": "True", "actor_rollout_ref.actor.clip_ratio_low": "0.2",
        "actor_rollout_ref.actor.clip_ratio_high": "0.28",
        "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
        "reward_model.overlong_buffer.enable": "True", "actor_rollout_ref.rollout.n": "4",
        "actor_rollout_ref.model.lora_rank": "32", "actor_rollout_ref.actor.optim.lr": "1e-5",
        "actor_rollout_ref.model.path": "Qwen/Qwen3-8B",
        "custom_reward_function.path": str(ROOT / "relrl" / "grading" / "rewards.py"),
        "custom_reward_function.name": "compute_score",
        "++custom_reward_function.reward_kwargs.tolerance_rule": "study",
        "data.train_files": "/data/run/verl/train.parquet",
        "+data.apply_chat_template_kwargs.enable_thinking": "False"}
    assert {k: settings.get(k) for k in expected} == expected
    assert words[-1] == "trainer.nnodes=4"  # overrides come last, so they win
    missing = subprocess.run([str(SLURM / "verl_dapo.sh")], capture_output=True, text=True,
                             env=clean_env(VERL_DATA="/nonexistent"), timeout=30)
    assert missing.returncode == 2 and "export-verl" in missing.stderr
    rule = subprocess.run([str(SLURM / "verl_dapo.sh"), "--dry-run"], capture_output=True,
                          text=True, env=clean_env(TOLERANCE_RULE="complement"), timeout=30)
    assert "++custom_reward_function.reward_kwargs.tolerance_rule=complement" in rule.stdout
    bad = subprocess.run([str(SLURM / "verl_dapo.sh"), "--dry-run"], capture_output=True,
                         text=True, env=clean_env(TOLERANCE_RULE="relative"), timeout=30)
    assert bad.returncode == 2 and "TOLERANCE_RULE must be study or complement" in bad.stderr

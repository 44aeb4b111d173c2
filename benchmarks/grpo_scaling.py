"""Useful GRPO steps per second at 1 and N data-parallel processes, side by side in one run.

The same exp10 run (tiny-random by default, the digit-share toy reward, fixed seeds) is started
as one process and under torchrun with N gloo ranks; both logs are checked to hold the same
questions and rewards, and the time is the trainer's own (sampling + update per optimiser step,
from train_log.jsonl), so start-up and model loading are left out. Scaling efficiency =
speed-up / N. On a CPU every rank needs its own cores: with fewer free cores than N x threads
the figure says how loaded the machine is, not how the method scales.

    python benchmarks/grpo_scaling.py --nproc 2 [--steps 8] [--max-new-tokens 32]
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from relrl.rl.grpo_metrics import trainer_seconds
from relrl.runtime.cli import ArgumentParser, positive_int, run_main

ROOT = Path(__file__).resolve().parents[1]


def train(nproc: int, out: Path, data: Path, args) -> list[dict]:
    runner = [sys.executable] if nproc == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc_per_node", str(nproc)]
    command = [*runner, str(ROOT / "training/grpo_exp10_nosft.py"), "--model", args.model,
               "--reward", "digit-share", "--dataset", str(data), "--output-dir", str(out),
               "--max-new-tokens", str(args.max_new_tokens), "--max-useful-steps",
               str(args.steps), "--grad-accum", str(args.grad_accum), "-G", str(args.G),
               "--save-every", str(10**6), "--max-total-steps", str(40 * args.steps)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    subprocess.run(command, check=True, capture_output=True, env=env, cwd=ROOT)
    return [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc", type=positive_int("--nproc"), default=2)
    p.add_argument("--model", default="tiny-random")
    p.add_argument("--steps", type=positive_int("--steps"), default=8, help="useful steps")
    p.add_argument("--grad-accum", type=positive_int("--grad-accum"), default=4)
    p.add_argument("-G", type=positive_int("-G"), default=4)
    p.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=32)
    p.add_argument("--threads", type=positive_int("--threads"), default=1,
                   help="torch threads per process (1)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "questions.jsonl"
        data.write_text("".join(json.dumps({"id": f"b{i}", "question": f"Compute {i} * 7.",
                                            "answer": str(7 * i)}) + "\n" for i in range(32)))
        logs = {n: train(n, Path(tmp) / f"n{n}", data, args) for n in (1, args.nproc)}
    keys = ("question_id", "attempt", "rewards")
    same = [[x[k] for k in keys] for x in logs[1]] == [[x[k] for k in keys] for x in logs[args.nproc]]
    print(f"{args.model}, G={args.G}, {args.grad_accum} groups per update, max_new_tokens "
          f"{args.max_new_tokens}, {args.steps} useful steps, {args.threads} thread(s) per "
          f"process, {os.cpu_count()} CPUs; same questions and rewards: {same}")
    print(f"{'processes':>9} {'trainer s':>10} {'useful steps/s':>15}")
    speed = {}
    for n, log in logs.items():
        seconds = trainer_seconds(log)
        speed[n] = len(log) / seconds
        print(f"{n:>9} {seconds:>10.2f} {speed[n]:>15.3f}")
    ratio = speed[args.nproc] / speed[1]
    print(f"speed-up {args.nproc} vs 1 process: {ratio:.2f}x, scaling efficiency "
          f"{ratio / args.nproc:.0%}")
    return 0 if same else 1


if __name__ == "__main__":
    run_main(main)

"""Peak memory and time of the completion log-probs (forward + backward through lm_head) for
several chunk sizes at Qwen3's 151,936-token vocabulary, side by side in one run.

    python benchmarks/logprob_chunking.py                      # CPU, float32, hidden 128
    python benchmarks/logprob_chunking.py --dtype bfloat16     # the GPU's dtype, on the CPU
    python benchmarks/logprob_chunking.py --device cuda --hidden 4096 --tokens 12288

Each chunk size runs in its own process (on the CPU, peak memory is the process's high-water
mark above what it held before the step; on CUDA, torch.cuda.max_memory_allocated). The last row
is the reference: one full-vocabulary log-softmax over every token, cast to float32 (what the
chunking avoids). "head reads" is how many times one forward reads all of lm_head; a chunk of n
tokens does n FLOPs per byte of a bf16 head (2nHV FLOPs over 2HV bytes), which is what makes a
GPU's matmul memory-bound below a few hundred tokens: that part a CPU run cannot show, the
memory column it shows as it is (logits bytes do not depend on the hidden size).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import torch

from relrl.modeling.logprobs import head_logprobs

FULL = 0  # the chunk size that stands for the full log-softmax reference


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(args) -> dict:
    """One chunk size in this process: seconds and peak MB of forward + backward."""
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(args.hidden, args.vocab, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=gen) / math.sqrt(args.hidden))
    head = head.to(device, dtype).requires_grad_(False)  # a frozen base model's head
    hidden = (torch.randn(args.tokens, args.hidden, generator=gen) * 2).to(device, dtype)
    hidden.requires_grad_(True)  # the decoder's output, which the gradient flows back to
    targets = torch.randint(0, args.vocab, (args.tokens,), generator=gen).to(device)
    weights = torch.rand(args.tokens, generator=gen).to(device)

    def step():
        hidden.grad = None
        if args.chunk == FULL:
            logp = torch.log_softmax(head(hidden).float(), dim=-1)
            token = logp.gather(-1, targets[:, None]).squeeze(-1)
        else:
            token, _ = head_logprobs(head, hidden, targets, args.chunk)
        (token * weights).sum().backward()

    # Peak memory on the first step, whose high-water mark nothing earlier has reached (the
    # setup holds only the head and the hidden states); then the times of warm steps.
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / 2**20
    else:
        before = _rss_mb()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else _rss_mb()) - before
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return {"chunk": args.chunk, "seconds": min(seconds), "peak_mb": peak}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=2048, help="completion tokens per micro-batch")
    parser.add_argument("--chunks", default="55,256,1024,2048", help="tokens per chunk")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--chunk", type=int, help=argparse.SUPPRESS)  # one child run
    args = parser.parse_args(argv)
    if args.chunk is not None:
        print(json.dumps(one(args)))
        return 0

    sizes = [int(c) for c in args.chunks.split(",")] + [FULL]
    print(f"vocab {args.vocab:,}, hidden {args.hidden}, {args.tokens:,} tokens, {args.dtype} on "
          f"{args.device}; forward + backward, best of {args.repeats}")
    print(f"{'chunk':>8} {'head reads':>10} {'FLOP/byte':>9} {'peak MB':>9} {'seconds':>8} "
          f"{'memory x':>9} {'time x':>7}")
    rows = []
    for chunk in sizes:
        cmd = [sys.executable, __file__, "--chunk", str(chunk), "--vocab", str(args.vocab),
               "--hidden", str(args.hidden), "--tokens", str(args.tokens), "--dtype", args.dtype,
               "--device", args.device, "--repeats", str(args.repeats)]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
        if done.returncode != 0:
            print(done.stderr.strip().splitlines()[-1], file=sys.stderr)
            return 1
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        first = rows[0]
        n = args.tokens if chunk == FULL else chunk
        label = "full" if chunk == FULL else str(chunk)
        print(f"{label:>8} {math.ceil(args.tokens / n):>10} {n:>9} {row['peak_mb']:>9.0f} "
              f"{row['seconds']:>8.2f} {row['peak_mb'] / max(first['peak_mb'], 1):>9.2f} "
              f"{row['seconds'] / first['seconds']:>7.2f}", flush=True)
    print("memory x, time x: relative to the first row (today's CPU default is 55 tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

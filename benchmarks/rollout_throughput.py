"""Rollout speed and log-prob memory, measured side by side in one run.

1. Completion tokens per second on the same model and prompts: the study's way (one
   `generate` call per completion, G calls per question) against the HF engine
   (relrl.engines.hf: all questions x G samples in micro-batches) and, when vLLM is installed,
   the vLLM engine (relrl.engines.vllm, engine start not counted), for G = 4 and 8.
2. Peak memory of one forward+backward of completion log-probs: relrl.modeling.logprobs (chunked,
   checkpointed) against a full-vocabulary log-softmax, on the model's own vocabulary and on
   Qwen3's 151,936 tokens. Each measurement runs in a fresh subprocess; on a CPU it is the peak
   resident memory above the process's memory before the computation, on CUDA the allocator's
   peak.

    python benchmarks/rollout_throughput.py [--model tiny] [--questions 8] [--max-new-tokens 96]
        [--engines hf,vllm] [--skip-memory]
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from relrl.data.prompting import build_prompt
from relrl.engines import SamplingConfig, stop_token_ids, vllm_installed
from relrl.modeling.loading import device_of
from relrl.modeling.logprobs import completion_logprobs, naive_logprobs
from relrl.modeling.tiny_models import new_model
from relrl.models.by_name import load_model, make_engine
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES
from relrl.runtime.cli import ArgumentParser, positive_int, run_main

QWEN3_VOCAB = 151_936


def _questions(n: int, seed: int) -> list[str]:
    return [row["question"] for row in generate_rows(list(FAMILIES.values()), n, seed, paraphrases=0)]


def _study_way(model, tok, prompts, g, config):
    """One generate call per completion, HF's own sampling (what the study's scripts did)."""
    stops = stop_token_ids(tok)
    tokens = 0
    for prompt in prompts:
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"].to(device_of(model))
        for _ in range(g):
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                 temperature=config.temperature, top_p=config.top_p, top_k=0,
                                 max_new_tokens=config.max_new_tokens, eos_token_id=stops,
                                 pad_token_id=tok.pad_token_id)
            tokens += out.shape[1] - ids.shape[1]
    return tokens


def _engine_way(engine, prompts, g, config):
    rows = engine.generate(prompts, g, list(range(len(prompts))), config)
    return sum(len(c.token_ids) for row in rows for c in row)


def _timed(fn):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    tokens = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return tokens, time.perf_counter() - start


def throughput(model, tok, prompts, groups, config, engines: dict):
    """Tokens/s of each way; ratios against the study's one call per completion."""
    print(f"rollout throughput: {len(prompts)} questions, max_new_tokens {config.max_new_tokens}, "
          f"temperature {config.temperature}, top_p {config.top_p}, micro-batch {config.micro_batch}")
    names = list(engines)
    print(f"{'G':>3} {'one call/completion tok/s':>26} " +
          " ".join(f"{n + ' tok/s':>12} {'ratio':>7}" for n in names))
    ratios = {}
    for g in groups:
        torch.manual_seed(0)
        study_tokens, study_s = _timed(lambda: _study_way(model, tok, prompts, g, config))
        study_rate = study_tokens / study_s
        cells = []
        for name, engine in engines.items():
            tokens, seconds = _timed(lambda: _engine_way(engine, prompts, g, config))
            ratios[(name, g)] = tokens / seconds / study_rate
            cells.append(f"{tokens / seconds:>12.0f} {ratios[(name, g)]:>6.2f}x")
        print(f"{g:>3} {study_rate:>26.0f} " + " ".join(cells))
    return ratios


# ---------------------------------------------------------------- memory probes

def _rss_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _probe(args) -> None:
    """In a fresh process: one forward+backward of completion log-probs, print peak bytes."""
    model, tok = load_model(args.model)
    if args.wide_vocab:
        config = copy.deepcopy(model.config)
        config.vocab_size = QWEN3_VOCAB
        model = new_model(config, 0, "wide").to(device_of(model))
    model.train()
    gen = torch.Generator().manual_seed(0)
    vocab = min(len(tok), model.config.vocab_size)
    ids = torch.randint(0, vocab, (args.batch, args.prompt_len + args.completion_len), generator=gen)
    ids = ids.to(device_of(model))
    mask = torch.ones_like(ids)
    fn = completion_logprobs if args.memory_probe == "lean" else naive_logprobs
    cuda = ids.is_cuda
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS mark
        before = _rss_bytes("VmRSS")
    fn(model, ids, mask, args.prompt_len).sum().backward()
    peak = torch.cuda.max_memory_allocated() if cuda else _rss_bytes("VmHWM")
    print(json.dumps({"peak_bytes": peak - before}))


def _measure(method: str, args, wide: bool) -> int:
    command = [sys.executable, __file__, "--model", args.model, "--memory-probe", method,
               "--batch", str(args.batch), "--prompt-len", str(args.prompt_len),
               "--completion-len", str(args.completion_len)] + (["--wide-vocab"] if wide else [])
    # Small mmap threshold: freed tensors go back to the OS, so resident memory tracks live tensors.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_bytes"]


def memory(args, vocab: int) -> dict:
    print(f"\nlog-prob peak memory, forward+backward: batch {args.batch}, prompt {args.prompt_len}, "
          f"completion {args.completion_len} tokens")
    print(f"{'vocabulary':>12} {'full log-softmax MB':>20} {'relrl.modeling.logprobs MB':>18} {'ratio':>7}")
    ratios = {}
    for wide in (False, True):
        naive = _measure("naive", args, wide)
        lean = _measure("lean", args, wide)
        size = QWEN3_VOCAB if wide else vocab
        ratios[size] = naive / max(lean, 1)
        print(f"{size:>12} {naive / 2**20:>20.1f} {lean / 2**20:>18.1f} {ratios[size]:>6.2f}x")
    return ratios


def main() -> None:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--questions", type=positive_int("--questions"), default=8)
    parser.add_argument("--groups", default="4,8", help="comma-separated G values")
    parser.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=160)
    parser.add_argument("--micro-batch", type=positive_int("--micro-batch"), default=64)
    parser.add_argument("--batch", type=positive_int("--batch"), default=2)
    parser.add_argument("--prompt-len", type=positive_int("--prompt-len"), default=128)
    parser.add_argument("--completion-len", type=positive_int("--completion-len"), default=512)
    parser.add_argument("--threads", type=positive_int("--threads"), default=2)
    parser.add_argument("--engines", default="hf,vllm" if vllm_installed() else "hf",
                        help="engines beside the one-call loop (default hf, and vllm when installed)")
    parser.add_argument("--skip-memory", action="store_true", help="throughput only")
    parser.add_argument("--memory-probe", choices=("lean", "naive"), help=argparse.SUPPRESS)
    parser.add_argument("--wide-vocab", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_probe:
        _probe(args)
        return
    groups = [int(g) for g in args.groups.split(",")]
    config = SamplingConfig(temperature=1.0, top_p=0.95, max_new_tokens=args.max_new_tokens,
                            micro_batch=args.micro_batch)
    model, tok = load_model(args.model)
    prompts = [build_prompt(tok, q) for q in _questions(args.questions, seed=2024)]
    engines = {name: make_engine(name, model, tok, source=args.model,
                                 max_new_tokens=args.max_new_tokens)
               for name in args.engines.split(",")}
    # one warm-up call each, so the first G does not pay for lazy initialisation
    for engine in engines.values():
        engine.generate(prompts[:1], 1, [0], SamplingConfig(max_new_tokens=4))
    ratios = throughput(model, tok, prompts, groups, config, engines)
    for engine in engines.values():
        engine.close()
    print("\nsummary: engine/one-call tokens per second " +
          ", ".join(f"{name} G={g}: {r:.2f}x" for (name, g), r in ratios.items()))
    if not args.skip_memory:
        mem = memory(args, len(tok))
        print("full/lean log-prob peak memory " +
              ", ".join(f"vocab {v}: {r:.2f}x" for v, r in mem.items()))


if __name__ == "__main__":
    run_main(main)

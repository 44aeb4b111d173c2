"""The GRPO trainer with DAPO dynamic sampling: one loop, readable top to bottom.

One optimiser update (`GRPOTrainer.run`):
  1. draw questions and sample G completions for each in one call to the rollout engine
     (relrl.engines: batched HF generate, or vLLM with the adapter synced after every update);
  2. score them (relrl.grading, or an injected reward) and keep only groups with some answers
     right and some wrong (relrl.dynamic_sampling; --informative-by reward: whose rewards
     differ, the study's rule) until the training batch holds `grad_accum` groups: each kept
     group is one "useful step", as the study counted them;
  3. advantages within each group (relrl.grpo_loss.group_advantages);
  4. `num_iterations` passes over the batch: clipped surrogate against the rollout policy (the
     trainer's own log-probs, with truncated importance sampling on trainer/sampler when the
     engine reports sampler log-probs) plus beta * k3 KL to the reference (adapter off),
     gradients summed over the batch's groups, gradient clipping, one AdamW step per pass
     (warmup then cosine schedule);
  5. one JSON log line per useful step; validation every `val_every` useful steps (best/ kept);
     checkpoint-N/ every `save_every`; SIGTERM/SIGUSR1 -> checkpoint and exit 0 (a rollout
     in progress ends within one decoding step and is redrawn on resume).
Everything a resumed run needs is in the checkpoint, and rollout seeds derive from (run seed,
question id, attempt number), so a resumed run ends exactly where an uninterrupted one does.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm

from relrl import distributed
from relrl.checkpointing import (StopFlag, load_checkpoint, prepare_output_dir, run_fingerprint,
                                 save_checkpoint)
from relrl.cli import (ArgumentParser, UsageError, add_load_args, add_tolerance_rule_arg,
                       env_default, load_in_4bit_flag, positive_int)
from relrl.data import atomic_write_json, atomic_write_jsonl, load_dataset, questions_fingerprint
from relrl.dynamic_sampling import (INFORMATIVE_BY, SCHEMES, WASTE_KINDS, CollectionStopped,
                                    DynamicSampler, Group, QuestionSampler)
from relrl.engines import (DEFAULT_VLLM_MEMORY, ENGINES, TOP_K_HELP, Engine, SamplingConfig,
                           add_engine_args, add_sleep_arg, check_memory_fraction, question_seed,
                           require_vllm, sample_seed)
from relrl.grading import TOLERANCE_RULES, grade, target_kind_of
from relrl.grpo_loss import (ADVANTAGE_MODES, AGGREGATIONS, LossConfig, batch_counts,
                             group_advantages, importance_weights, overlong_penalty,
                             policy_loss)
from relrl.logprobs import completion_logprobs, pack_sequences
from relrl.modeling import (attach_lora, check_adapter_dir, check_model_source, device_of,
                            load_adapter, reference_policy)
from relrl.models import load_model, make_engine, vllm_sleep
from relrl.prompting import build_prompt
from relrl.tracking import RUN_FILES as TRACKING_FILES, Tracker, add_report_to_arg, open_tracker

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"
LOG_FILE, STATS_FILE = "train_log.jsonl", "statistics.json"
# (completion text, dataset row) -> (reward, correct)
RewardFn = Callable[[str, dict], tuple[float, bool]]


@dataclass
class GRPOConfig:
    """Every setting of a run; defaults are the study's (exp7)."""
    model: str = DEFAULT_MODEL
    dataset: str = ""
    val_dataset: str | None = None
    sft_adapter: str | None = None  # warm start: this adapter is trained further
    output_dir: str = "outputs/grpo_exp7"
    seed: int = 0
    lora_r: int = 32  # a new LoRA's rank and alpha (a warm-start adapter keeps its own)
    lora_alpha: int = 32
    load_in_4bit: bool | None = None
    unsloth: bool = False
    # rollouts
    num_generations: int = 4
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 0  # 0: off (the study's generate inherited Qwen3's 20: see the README)
    max_new_tokens: int = 3072
    gen_micro_batch: int = 32
    tolerance: float = 0.05
    tolerance_rule: str = "study"  # or "complement" (relrl.grading)
    reward: str = "grader"  # or "digit-share", a toy reward for smoke tests
    rollout_engine: str = "hf"  # or "vllm"
    vllm_gpu_memory_utilization: float = DEFAULT_VLLM_MEMORY
    # dynamic sampling
    sampling_mode: str = "step"  # "step": one question per call; "batch": gen_batch per call
    gen_batch: int = 8
    max_resample: int = 10  # draws (step mode) or rounds (batch mode) before a step gives up
    max_total_attempts: int = 1000  # groups generated over the whole run
    pass_rate_sampler: bool = False
    pass_rate_scheme: str = "plug-in"  # or "predictive" (relrl.dynamic_sampling.SCHEMES)
    # which groups train (relrl.dynamic_sampling): "correct", or "reward" (the study's rule);
    # None: "correct", but "reward" for the toy digit-share reward, which is never right
    informative_by: str | None = None
    # optimisation
    max_useful_steps: int = 200
    learning_rate: float = 1e-5
    weight_decay: float = 0.1
    warmup_ratio: float = 0.1
    grad_accum: int = 4  # informative groups per optimiser update
    train_micro_batch: int = 4  # completions per forward/backward pass: memory, not maths
    max_grad_norm: float = 0.1
    num_iterations: int = 1
    # loss
    advantage: str = "group_norm"
    clip_low: float = 0.2
    clip_high: float = 0.28
    beta: float = 0.0
    aggregation: str = "token_mean"
    overlong_buffer: int = 0  # DAPO soft overlong penalty over the last N tokens (0: off)
    mask_truncated: bool = False  # truncated completions add nothing to the loss
    tis_cap: float = 2.0  # truncated importance sampling cap on trainer/sampler (0: off)
    # validation and checkpoints
    save_every: int = 20
    val_every: int = 20
    val_samples: int = 1  # completions per validation question (accuracy over all of them)
    patience: int = 0  # stop after this many validations without a new best (0: never)

    def __post_init__(self):
        if self.informative_by is None:
            self.informative_by = "reward" if self.reward == "digit-share" else "correct"

    def check(self) -> None:
        """Refuse impossible settings, naming the flag, before anything is loaded."""
        def need(ok, flag, why):
            if not ok:
                raise UsageError(f"{flag}: {why}")
        need(self.num_generations >= 2, "--num-generations", "GRPO compares completions within "
             f"a group, so G must be >= 2, got {self.num_generations}")
        need(self.clip_low >= 0, "--clip-low", f"must be >= 0, got {self.clip_low}")
        need(self.clip_low < 1, "--clip-low", f"must be < 1, got {self.clip_low}")
        need(self.clip_high >= 0, "--clip-high", f"must be >= 0, got {self.clip_high}")
        need(self.beta >= 0, "--beta", f"must be >= 0, got {self.beta}")
        need(self.learning_rate > 0, "--learning-rate", f"must be > 0, got {self.learning_rate}")
        need(0 <= self.warmup_ratio < 1, "--warmup-ratio",
             f"must be in [0, 1), got {self.warmup_ratio}")
        need(self.max_grad_norm > 0, "--max-grad-norm", f"must be > 0, got {self.max_grad_norm}")
        need(self.weight_decay >= 0, "--weight-decay", f"must be >= 0, got {self.weight_decay}")
        need(self.temperature > 0, "--temperature", f"must be > 0, got {self.temperature}")
        need(0 < self.top_p <= 1, "--top-p", f"must be in (0, 1], got {self.top_p}")
        need(self.top_k >= 0, "--top-k", f"must be >= 1 (or 0: off), got {self.top_k}")
        need(0 <= self.overlong_buffer < self.max_new_tokens, "--overlong-buffer",
             f"must be in [0, max_new_tokens), got {self.overlong_buffer}")
        need(self.tolerance >= 0, "--tolerance", f"must be >= 0, got {self.tolerance}")
        need(self.tolerance_rule in TOLERANCE_RULES, "--tolerance-rule", "study or complement")
        need(self.advantage in ADVANTAGE_MODES, "--advantage", f"one of {ADVANTAGE_MODES}")
        need(self.aggregation in AGGREGATIONS, "--aggregation", f"one of {AGGREGATIONS}")
        need(self.sampling_mode in ("step", "batch"), "--sampling-mode", "step or batch")
        need(self.informative_by in INFORMATIVE_BY, "--informative-by", "correct or reward")
        need(self.reward in ("grader", "digit-share"), "--reward", "grader or digit-share")
        for name in ("max_new_tokens", "gen_micro_batch", "gen_batch", "max_resample",
                     "max_total_attempts", "max_useful_steps", "grad_accum", "num_iterations",
                     "train_micro_batch", "save_every", "val_every", "val_samples", "lora_r",
                     "lora_alpha"):
            flag = "--max-total-steps" if name == "max_total_attempts" else \
                "--" + name.replace("_", "-")
            need(getattr(self, name) >= 1, flag, f"must be >= 1, got {getattr(self, name)}")
        need(self.patience >= 0, "--patience", f"must be >= 0, got {self.patience}")
        need(self.tis_cap >= 0, "--tis-cap", f"must be >= 0 (0: off), got {self.tis_cap}")
        need(self.rollout_engine in ENGINES, "--rollout-engine", f"one of {ENGINES}")
        check_memory_fraction(self.vllm_gpu_memory_utilization)

    def settings(self) -> dict:
        """The settings that make two runs the same run. Left out: the output folder, the
        micro-batch sizes and vLLM's memory share (speed and memory only) and the cap on
        generated groups."""
        out = dataclasses.asdict(self)
        for key in ("output_dir", "max_total_attempts", "gen_micro_batch", "train_micro_batch",
                    "vllm_gpu_memory_utilization"):
            out.pop(key)
        # Added later: left out at their defaults, so runs from before still resume.
        for key, default in (("pass_rate_scheme", "plug-in"), ("val_samples", 1),
                             ("tolerance_rule", "study"), ("top_k", 0)):
            if out[key] == default:
                out.pop(key)
        if out["informative_by"] == "reward":  # as runs from before the option judged groups
            out.pop("informative_by")
        if self.sft_adapter:  # the warm-start adapter brings its own rank and alpha
            out.pop("lora_r"), out.pop("lora_alpha")
        return out


def warmup_cosine(total: int, warmup_ratio: float) -> Callable[[int], float]:
    """lr factor for update u: linear warmup over the first warmup_ratio of updates, then a
    cosine decay to 0 at `total`."""
    warmup = math.ceil(warmup_ratio * total)

    def factor(u: int) -> float:
        if u < warmup:
            return (u + 1) / warmup
        progress = (u - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def grader_reward(tolerance: float, rule: str = "study") -> RewardFn:
    """The study's reward: the shared grader against the row's answer, by the tolerance rule
    (the row's target kind decides what "complement" does)."""
    def reward(text: str, row: dict) -> tuple[float, bool]:
        g = grade(text, row["answer"], tolerance=tolerance, rule=rule,
                  target_kind=target_kind_of(row))
        return g.reward, bool(g.correct)

    return reward


def digit_share_reward(text: str, row: dict) -> tuple[float, bool]:
    """A toy reward for smoke tests on tiny-random, which the grader never rewards: the share
    of digits among the completion's visible characters."""
    chars = [c for c in text if not c.isspace()]
    share = sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0
    return share, share == 1.0


class GRPOTrainer:
    def __init__(self, cfg: GRPOConfig, model, tokenizer, rows: list[dict],
                 val_rows: list[dict] | None = None, *, reward_fn: RewardFn | None = None,
                 settings: dict | None = None, fingerprint: str = "",
                 advantage_hook: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 engine: Engine | None = None, tracker: Tracker | None = None):
        self.cfg, self.model, self.tokenizer = cfg, model, tokenizer
        self.engine = engine or make_engine("hf", model, tokenizer)
        self.engine_synced = False  # the engine samples from the adapter as it is now
        self.should_stop: Callable[[], bool] = lambda: False  # asked every decoding step
        self.rows, self.val_rows = rows, val_rows or []
        self.reward_fn = reward_fn or (digit_share_reward if cfg.reward == "digit-share"
                                       else grader_reward(cfg.tolerance, cfg.tolerance_rule))
        self.advantage_hook = advantage_hook  # tests flip the sign to prove the direction
        self.tracker = tracker or Tracker()  # --report-to: TensorBoard / W&B curves
        self.settings = settings if settings is not None else cfg.settings()
        self.fingerprint = fingerprint
        self.out = Path(cfg.output_dir)
        self.prompts = [build_prompt(tokenizer, row["question"]) for row in rows]
        self.sampling = SamplingConfig(temperature=cfg.temperature, top_p=cfg.top_p,
                                       top_k=cfg.top_k, max_new_tokens=cfg.max_new_tokens,
                                       micro_batch=cfg.gen_micro_batch)
        self.loss_cfg = LossConfig(clip_low=cfg.clip_low, clip_high=cfg.clip_high, beta=cfg.beta,
                                   aggregation=cfg.aggregation, constant=cfg.max_new_tokens)

        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise UsageError("the model has no trainable parameters (no adapter attached?)")
        self.optimizer = torch.optim.AdamW(self.params, lr=cfg.learning_rate,
                                           weight_decay=cfg.weight_decay)
        total = math.ceil(cfg.max_useful_steps / cfg.grad_accum) * cfg.num_iterations
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, warmup_cosine(total, cfg.warmup_ratio))

        self.questions = QuestionSampler(len(rows), cfg.seed, cfg.pass_rate_sampler,
                                         group_size=cfg.num_generations,
                                         scheme=cfg.pass_rate_scheme)
        if cfg.pass_rate_sampler:  # the screening pass counts are the first evidence
            for i, row in enumerate(rows):
                if isinstance(row.get("base_score"), int):
                    self.questions.record(i, row["base_score"], int(row.get("base_samples", 4)))
        self.sampler = DynamicSampler(
            self.rollout, self.questions, mode=cfg.sampling_mode, gen_batch=cfg.gen_batch,
            max_attempts_per_step=cfg.max_resample, max_total_attempts=cfg.max_total_attempts,
            informative_by=cfg.informative_by)
        self.updates = 0
        self.stats = {"losses": [], "rewards_per_step": [], "n_correct_per_step": [],
                      "val_history": []}
        self.best: dict | None = None  # {"step", "val_accuracy"}
        self.last_val_step = self.last_save_step = 0

    # ------------------------------------------------------------------ rollouts and reward
    def rollout(self, indices: list[int], first_attempt: int) -> list[Group]:
        """G completions for each question in one batched call, scored. Under torch.distributed
        each rank generates and scores its share of the questions (by position) and the scored
        groups are gathered back in order, so every rank keeps and drops the same groups."""
        G = self.cfg.num_generations
        # A question drawn again gets new completions: its seed also depends on the attempt.
        seeds = [sample_seed(question_seed(self.cfg.seed, str(self.rows[i]["id"])),
                             first_attempt + k) for k, i in enumerate(indices)]
        positions = distributed.share(list(range(len(indices))))
        mine = [indices[k] for k in positions]
        self.sync_engine()
        try:
            completions = self.engine.generate(
                [self.prompts[i] for i in mine], G, [seeds[k] for k in positions],
                self.sampling, should_stop=self.should_stop) if mine else []
            stopped = False
        except CollectionStopped:  # this rank's signal, within one decoding step
            completions, stopped = [], True
        if distributed.any_rank(stopped):  # every rank drops the call, or none does
            raise CollectionStopped
        groups = []
        for k, index, group in zip(positions, mine, completions):
            row = self.rows[index]
            scored = [self.reward_fn(c.text, row) for c in group]
            rewards = [reward + self.length_penalty(c) for (reward, _), c in zip(scored, group)]
            groups.append(Group(index, first_attempt + k, rewards, [ok for _, ok in scored], group))
        return distributed.gather_shares(groups, len(indices))

    def sync_engine(self) -> None:
        """Hand the adapter to the engine once after each change (update or restore)."""
        if not self.engine_synced:
            self.engine.sync_adapter(self.model)
            self.engine_synced = True

    def length_penalty(self, completion) -> float:
        if not self.cfg.overlong_buffer:
            return 0.0
        length = len(completion.token_ids) + (1 if completion.truncated else 0)
        return overlong_penalty(length, self.cfg.max_new_tokens, self.cfg.overlong_buffer)

    # ------------------------------------------------------------------ the update
    def pack(self, rows: list[tuple[int, object, float]]):
        """Model inputs, the sampler's log-probs (None unless every completion has them),
        loss mask, advantages and owning group of (group, completion, advantage) rows:
        prompts left-padded, completions right-padded after them."""
        ids, attention, start = pack_sequences([c.prompt_ids for _, c, _ in rows],
                                               [c.token_ids for _, c, _ in rows],
                                               self.tokenizer.pad_token_id)
        mask = attention[:, start:].float()
        if self.cfg.mask_truncated:
            keep = torch.tensor([0.0 if c.truncated else 1.0 for _, c, _ in rows])
            mask = mask * keep.unsqueeze(1)
        advantages = torch.tensor([a for _, _, a in rows])
        owner = torch.tensor([k for k, _, _ in rows])
        sampler = None
        if all(c.logprobs is not None for _, c, _ in rows):
            sampler = torch.zeros_like(mask)
            for r, (_, c, _) in enumerate(rows):
                sampler[r, :len(c.logprobs)] = torch.tensor(c.logprobs)
        return ids, attention, start, sampler, mask, advantages, owner

    def logprobs(self, ids, attention, start, entropy=False):
        device = device_of(self.model)
        return completion_logprobs(self.model, ids.to(device), attention.to(device), start,
                                   micro_batch=ids.shape[0], return_entropy=entropy)

    def update(self, groups: list[Group]) -> list[dict]:
        """num_iterations optimiser steps on one training batch; per-group metrics."""
        cfg, device, n = self.cfg, device_of(self.model), len(groups)
        advantages = group_advantages(torch.tensor([g.rewards for g in groups]), cfg.advantage)
        if self.advantage_hook is not None:
            advantages = self.advantage_hook(advantages)
        rows = [(k, c, float(advantages[k, j]))
                for k, g in enumerate(groups) for j, c in enumerate(g.payload)]
        # Micro-batches of similar lengths pad less; the loss uses batch-wide normalisers, so
        # the order changes only the order of float sums.
        rows.sort(key=lambda row: len(row[1].token_ids))
        size = cfg.train_micro_batch
        chunks = [self.pack(rows[i:i + size]) for i in range(0, len(rows), size)]
        counts = [batch_counts(chunk[4]) for chunk in chunks]
        batch_tokens, batch_seqs = sum(t for t, _ in counts), sum(s for _, s in counts)
        old, ref, tis = [None] * len(chunks), [None] * len(chunks), [None] * len(chunks)
        keys = ("loss", "tokens", "clipped", "kl", "entropy", "tis_ratio", "tis_capped")
        sums = {key: torch.zeros(n) for key in keys}
        with_sampler = all(chunk[3] is not None for chunk in chunks)
        # Data parallel: each rank runs its share of the micro-batches (the loss already uses
        # the whole batch's counts), then the gradients are summed and every rank steps alike.
        mine = distributed.share(list(range(len(chunks))))
        with self.engine.updating():
            self.model.train()
            for iteration in range(cfg.num_iterations):
                parts = []  # (chunk, per-row metrics) of this rank's micro-batches
                for c in mine:
                    ids, attention, start, sampler, mask, adv, owner = chunks[c]
                    mask, rows_out = mask.to(device), {}
                    if iteration == 0:
                        logp, entropy = self.logprobs(ids, attention, start, entropy=True)
                        old[c] = logp.detach()  # the trainer's log-probs of the rollouts
                        rows_out["entropy"] = (entropy.detach() * mask).sum(1).cpu()
                        if cfg.beta > 0:
                            with torch.no_grad(), reference_policy(self.model):
                                ref[c] = self.logprobs(ids, attention, start)
                        if with_sampler:
                            tis[c] = self.importance_weights(old[c], sampler.to(device), mask,
                                                             rows_out)
                    else:
                        logp = self.logprobs(ids, attention, start)
                    terms = policy_loss(logp, old[c], adv.to(device), mask, self.loss_cfg,
                                        ref_logp=ref[c], batch_tokens=batch_tokens,
                                        batch_seqs=batch_seqs, tis_weight=tis[c])
                    terms.loss.backward()
                    rows_out.update(loss=terms.row_loss.cpu(), tokens=terms.row_tokens.cpu(),
                                    clipped=(terms.row_clip_low + terms.row_clip_high).cpu())
                    if terms.row_kl is not None:
                        rows_out["kl"] = terms.row_kl.cpu()
                    parts.append((c, rows_out))
                # metrics added up in micro-batch order, as one process adds them
                for c, rows_out in sorted((p for part in distributed.all_gather_object(parts)
                                           for p in part), key=lambda p: p[0]):
                    for key, values in rows_out.items():
                        sums[key].index_add_(0, chunks[c][6], values)
                distributed.all_reduce_grads(self.params)
                torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.updates += 1
            self.model.eval()
        self.engine_synced = False  # the adapter changed: the next rollout hands it over
        tokens = sums["tokens"].clamp(min=1)
        per_token = cfg.num_iterations / tokens  # the TIS sums count iteration 0's tokens only
        return [{
            # this group's share of the batch loss, scaled so the groups' mean is the batch's
            "loss": float(sums["loss"][k]) * n / cfg.num_iterations,
            "kl": float(sums["kl"][k] / tokens[k]) if cfg.beta > 0 else None,
            "clip_frac": float(sums["clipped"][k] / tokens[k]),
            "entropy": float(sums["entropy"][k] / tokens[k] * cfg.num_iterations),
            "advantages": advantages[k].tolist(),
            # trainer/sampler probability ratio: mean over tokens, share above the cap
            "tis_ratio_mean": float(sums["tis_ratio"][k] * per_token[k]) if with_sampler else None,
            "tis_capped_frac": float(sums["tis_capped"][k] * per_token[k])
            if with_sampler and cfg.tis_cap > 0 else None,
        } for k in range(n)]

    def importance_weights(self, old, sampler, mask, rows_out: dict):
        """Truncated importance sampling (TIS): per token min(p_trainer / p_sampler, cap),
        detached, multiplying the surrogate; None (no correction) when the cap is 0. The
        per-row ratio statistics go into `rows_out` either way."""
        weights = importance_weights(old, sampler, mask, self.cfg.tis_cap)
        rows_out["tis_ratio"] = weights.row_ratio.cpu()
        if weights.weight is None:
            return None
        rows_out["tis_capped"] = weights.row_capped.cpu()
        return weights.weight

    # ------------------------------------------------------------------ validation
    def validate(self) -> list[int]:
        """Pass counts of val_samples completions per validation row, seeded per question."""
        rows = distributed.share(self.val_rows)  # each rank scores its share
        prompts = [build_prompt(self.tokenizer, row["question"]) for row in rows]
        seeds = [question_seed(self.cfg.seed, str(row["id"])) for row in rows]
        k = self.cfg.val_samples
        self.sync_engine()
        completions = self.engine.generate(prompts, k, seeds, self.sampling) if rows else []
        correct = [sum(bool(self.reward_fn(c.text, row)[1]) for c in group)
                   for group, row in zip(completions, rows)]
        return distributed.gather_shares(correct, len(self.val_rows))

    # ------------------------------------------------------------------ bookkeeping
    @property
    def useful_steps(self) -> int:
        return self.sampler.counters.useful_steps

    def state(self) -> dict:
        return {"useful_steps": self.useful_steps, "updates": self.updates,
                "sampler": self.sampler.state_dict(), "stats": self.stats, "best": self.best,
                "last_val_step": self.last_val_step, "settings": self.settings}

    def save(self) -> Path:
        folder = self.out / f"checkpoint-{self.useful_steps}"
        if distributed.is_main():  # every rank holds the same weights and state
            save_checkpoint(folder, model=self.model, optimizer=self.optimizer,
                            scheduler=self.scheduler, state=self.state(),
                            fingerprint=self.fingerprint)
        distributed.barrier()  # no rank goes on (or ends the job) before it is written
        self.last_save_step = self.useful_steps
        return folder

    def restore(self, checkpoint: Path) -> None:
        state = load_checkpoint(checkpoint, model=self.model, optimizer=self.optimizer,
                                scheduler=self.scheduler)
        self.sampler.load_state_dict(state["sampler"])
        self.updates, self.stats, self.best = state["updates"], state["stats"], state["best"]
        self.last_val_step = state["last_val_step"]
        self.last_save_step = self.useful_steps
        self.engine_synced = False
        log = self.out / LOG_FILE
        if log.exists() and distributed.is_main():  # keep lines up to the checkpoint
            kept = []
            for line in log.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by the kill
                    continue
                if record["step"] <= self.useful_steps:
                    kept.append(record)
            atomic_write_jsonl(log, kept)

    def statistics(self, stopped_by: str) -> dict:
        counters = self.sampler.counters.to_dict()
        return {
            "useful_steps": counters["useful_steps"],
            "wasted_steps": counters["wasted_steps"],
            "total_attempts": counters["total_attempts"],
            "resample_events": counters["resample_events"],
            "exhausted_steps": counters["exhausted_steps"],
            "surplus_groups": counters["surplus_groups"],
            "waste_by_kind": {kind: counters[kind] for kind in WASTE_KINDS},
            "waste_rate": counters["waste_rate"],
            "optimizer_updates": self.updates,
            **self.stats,
            "best_step": self.best["step"] if self.best else None,
            "best_val_accuracy": self.best["val_accuracy"] if self.best else None,
            "stopped_by": stopped_by,
            "settings": self.settings,
        }

    def log_steps(self, groups, metrics, lr, t_sample, t_update, val_accuracy):
        counters = self.sampler.counters.to_dict()
        first = self.useful_steps - len(groups) + 1
        lines = []
        for k, (group, m) in enumerate(zip(groups, metrics)):
            lengths = [len(c.token_ids) for c in group.payload]
            record = {
                "step": first + k, "question_id": self.rows[group.index]["id"],
                "attempt": group.attempt, "rewards": group.rewards,
                "reward_mean": statistics.fmean(group.rewards),
                "reward_std": statistics.pstdev(group.rewards),
                "n_correct": sum(group.correct), **m,
                "completion_lengths": lengths, "mean_length": statistics.fmean(lengths),
                "truncated": sum(c.truncated for c in group.payload), "lr": lr,
                "t_sample": t_sample, "t_update": t_update,
                "waste": {kind: counters[kind] for kind in WASTE_KINDS},
                "total_attempts": counters["total_attempts"], "waste_rate": counters["waste_rate"],
            }
            if val_accuracy is not None and k == len(groups) - 1:
                record["val_accuracy"] = val_accuracy
            self.stats["losses"].append(m["loss"])
            self.stats["rewards_per_step"].append(record["reward_mean"])
            self.stats["n_correct_per_step"].append(record["n_correct"])
            lines.append(record)
            if not distributed.is_main():
                continue
            tqdm.write(
                f"step {record['step']}/{self.cfg.max_useful_steps} "
                f"reward {record['reward_mean']:.3f}±{record['reward_std']:.3f} "
                f"correct {record['n_correct']}/{len(group.rewards)} loss {m['loss']:+.4f} "
                f"clip {m['clip_frac']:.2f} entropy {m['entropy']:.2f} "
                f"len {record['mean_length']:.0f} lr {lr:.2e} "
                f"waste {counters['waste_rate']:.0%} of {counters['total_attempts']}",
                file=sys.stdout)
        if not distributed.is_main():
            return
        with open(self.out / LOG_FILE, "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(x) + "\n" for x in lines)
        for x in lines:  # validation accuracy goes from record_validation
            self.tracker.log({k: v for k, v in x.items() if k != "val_accuracy"}, x["step"])
        if val_accuracy is not None:
            tqdm.write(self.validation_line(), file=sys.stdout)

    def due(self, every: int, last: int) -> bool:
        """Whether the last update passed a multiple of `every` useful steps."""
        return self.useful_steps // every > last // every

    def record_validation(self) -> float:
        passes = self.validate()
        accuracy = sum(passes) / (self.cfg.val_samples * len(passes))
        # pass counts by paraphrase group, so a report can resample groups and say how often
        # another draw of the validation set would have chosen the same best step
        by_group: dict[str, list[int]] = {}
        for row, count in zip(self.val_rows, passes):
            by_group.setdefault(str(row.get("group", row["id"])), []).append(count)
        self.last_val_step = self.useful_steps
        self.stats["val_history"].append({"step": self.useful_steps, "accuracy": accuracy,
                                          "group_passes": by_group})
        if self.best is None or accuracy > self.best["val_accuracy"]:
            self.best = {"step": self.useful_steps, "val_accuracy": accuracy}
            if distributed.is_main():
                save_checkpoint(self.out / "best", model=self.model, state=dict(self.best),
                                fingerprint=self.fingerprint)
            distributed.barrier()
        self.tracker.log({"val_accuracy": accuracy, "best_val_accuracy": self.best["val_accuracy"]},
                         self.useful_steps)
        return accuracy

    def validation_line(self) -> str:
        last = self.stats["val_history"][-1]
        note = " (new best, saved to best/)" if self.best["step"] == last["step"] else \
            f" (best {self.best['val_accuracy']:.3f} at step {self.best['step']})"
        return f"validation at step {last['step']}: accuracy {last['accuracy']:.3f}{note}"

    def stop_reason(self) -> str | None:
        if self.useful_steps >= self.cfg.max_useful_steps:
            return "max_useful_steps"
        if self.sampler.attempts_left <= 0:
            return "max_total_attempts"
        history = self.stats["val_history"]
        if self.cfg.patience and self.best and history:
            since = sum(1 for v in history if v["step"] > self.best["step"])
            if since >= self.cfg.patience:
                return "early_stopping"
        return None

    # ------------------------------------------------------------------ the loop
    def run(self, resume_from: Path | None = None) -> dict:
        cfg = self.cfg
        self.out.mkdir(parents=True, exist_ok=True)
        if resume_from is not None:
            self.restore(resume_from)
            if distributed.is_main():
                print(f"resumed from {resume_from} at useful step {self.useful_steps}",
                      flush=True)
        elif distributed.is_main():
            (self.out / LOG_FILE).unlink(missing_ok=True)
        distributed.barrier()
        signal_name = None  # a stop every rank agrees on (any rank's signal stops them all)

        def stop_requested() -> bool:
            nonlocal signal_name
            signal_name = distributed.agreed_signal(stop.signal if stop.requested else None)
            return signal_name is not None

        with StopFlag() as stop, tqdm(total=cfg.max_useful_steps, initial=self.useful_steps,
                                      desc="grpo", file=sys.stderr,
                                      disable=None if distributed.is_main() else True) as bar:
            # A rollout ends within one decoding step on this rank's own signal; the ranks
            # then agree on the stop between generation calls.
            self.should_stop = lambda: stop.requested
            while (stopped_by := self.stop_reason()) is None and not stop_requested():
                wanted = min(cfg.grad_accum, cfg.max_useful_steps - self.useful_steps)
                t0 = time.perf_counter()
                # A long collect (up to grad_accum x max_resample rollouts) must not outlast
                # SLURM's warning: stop between (and within) generation calls, forgetting the
                # partial draw.
                before = copy.deepcopy(self.sampler.state_dict())
                try:
                    groups = self.sampler.collect(wanted, should_stop=stop_requested)
                except CollectionStopped:
                    self.sampler.load_state_dict(before)
                    stop_requested()  # every rank learns which signal stopped the call
                    break
                t_sample = time.perf_counter() - t0
                if not groups:
                    continue
                lr = self.scheduler.get_last_lr()[0]
                t0 = time.perf_counter()
                metrics = self.update(groups)
                t_update = time.perf_counter() - t0
                accuracy = None
                if self.val_rows and self.due(cfg.val_every, self.last_val_step):
                    accuracy = self.record_validation()
                self.log_steps(groups, metrics, lr, t_sample, t_update, accuracy)
                bar.update(len(groups))
                if self.due(cfg.save_every, self.last_save_step):
                    self.save()
        self.should_stop = lambda: False
        if signal_name is not None:
            return self.finish(signal_name)
        if self.val_rows and self.useful_steps and self.last_val_step != self.useful_steps:
            self.record_validation()
            if distributed.is_main():
                print(self.validation_line(), flush=True)
        return self.finish(stopped_by)

    def finish(self, stopped_by: str) -> dict:
        """Final checkpoint and statistics, and a closing line for the log."""
        missing = self.last_save_step != self.useful_steps or not (
            self.out / f"checkpoint-{self.useful_steps}").exists()
        if distributed.broadcast_object(missing):  # rank 0's view of the shared folder
            self.save()
        result = self.statistics(stopped_by)
        where = self.out / f"checkpoint-{self.useful_steps}"
        if not distributed.is_main():
            return result
        atomic_write_json(self.out / STATS_FILE, result)
        if stopped_by.startswith("SIG"):
            print(f"stopped by {stopped_by} at useful step {self.useful_steps}: wrote {where}; "
                  "run again with --resume to continue", flush=True)
            return result
        best = (f", best validation {self.best['val_accuracy']:.3f} at step {self.best['step']}"
                if self.best else "")
        print(f"done ({stopped_by}): {self.useful_steps} useful steps, {result['wasted_steps']} "
              f"wasted of {result['total_attempts']} groups ({result['waste_rate']:.0%}){best}; "
              f"last checkpoint {where}", flush=True)
        return result


# ---------------------------------------------------------------------- command line
VARIANTS = {
    "exp7": {"output_dir": "outputs/grpo_exp7", "warm_start": True,
             "about": "GRPO with DAPO dynamic sampling from an SFT warm start (the study's exp7)"},
    "exp10": {"output_dir": "outputs/grpo_exp10", "warm_start": False,
              "about": "GRPO with DAPO dynamic sampling from a fresh LoRA (the study's exp10)"},
}


def build_parser(variant: str):
    spec, d = VARIANTS[variant], GRPOConfig()
    script = "training/grpo_exp7_dynamic.py" if spec["warm_start"] else \
        "training/grpo_exp10_nosft.py"
    p = ArgumentParser(description=spec["about"], epilog=distributed.launch_help(script),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("--model", default=d.model, help=f"base model: hub id, folder, tiny or tiny-random "
      f"(default {d.model})")
    a("--dataset", default=env_default("DATASET_PATH", None),
      help="training questions, JSONL (env DATASET_PATH; the study: the 266 mixed questions)")
    a("--val-dataset", default=None, help="validation questions: accuracy every --val-every "
      "useful steps, best adapter kept in best/")
    if spec["warm_start"]:
        a("--sft-adapter", default=env_default("SFT_LORA_PATH", None),
          help="SFT LoRA to start from and train further (env SFT_LORA_PATH); required")
        a("--fold", type=int, default=env_default("FOLD", None, int),
          help="use fold_<k> in --sft-adapter or in its adapters/ folder, as the k-fold "
          "SFT run writes them (env FOLD)")
    else:
        a("--lora-r", type=positive_int("--lora-r"), default=d.lora_r, help="LoRA rank (32)")
        a("--lora-alpha", type=positive_int("--lora-alpha"), default=d.lora_alpha,
          help="LoRA alpha (32)")
    a("--output-dir", default=env_default("OUTPUT_DIR", spec["output_dir"]),
      help=f"checkpoints, logs, statistics (env OUTPUT_DIR; default {spec['output_dir']})")
    a("--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
      help="continue from CHECKPOINT, or from the output folder's latest when none is named")
    a("--overwrite", action="store_true", help="delete the output folder's checkpoints first")
    a("--seed", type=int, default=d.seed, help="run seed (0)")
    add_load_args(p)
    g = p.add_argument_group("rollouts")
    add_engine_args(g)
    add_sleep_arg(g)
    g.add_argument("--num-generations", "-G", type=int, default=d.num_generations,
                   help="completions per question (4)")
    g.add_argument("--temperature", type=float, default=d.temperature, help="(1.0)")
    g.add_argument("--top-p", type=float, default=d.top_p, help="(0.95)")
    g.add_argument("--top-k", type=int, default=d.top_k, help=TOP_K_HELP)
    g.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=None,
                   help="max completion length (3072 on CUDA, 256 on the CPU)")
    g.add_argument("--gen-micro-batch", type=positive_int("--gen-micro-batch"),
                   default=d.gen_micro_batch, help="sequences per generate call (32): speed only")
    g.add_argument("--tolerance", type=float, default=d.tolerance,
                   help="relative error counted correct (0.05)")
    add_tolerance_rule_arg(g)
    g.add_argument("--reward", choices=("grader", "digit-share"), default=d.reward,
                   help="grader: the study's graded answer reward; digit-share: a toy reward "
                   "(share of digits) for smoke tests with tiny-random")
    g.add_argument("--overlong-buffer", type=int, default=d.overlong_buffer,
                   help="DAPO soft overlong penalty over the last N tokens (0: off)")
    g.add_argument("--mask-truncated", action="store_true",
                   help="truncated completions add nothing to the loss (DAPO overlong filtering)")
    g = p.add_argument_group("dynamic sampling")
    g.add_argument("--sampling-mode", choices=("step", "batch"), default=None,
                   help="step: one question per generation call, redrawn until informative (the "
                   "study); batch: --gen-batch questions per call (the DAPO paper). Default batch "
                   "on CUDA (fewer generation calls per update: docs/engines.md), step on the CPU")
    g.add_argument("--gen-batch", type=positive_int("--gen-batch"), default=d.gen_batch,
                   help="questions per generation call in batch mode (8)")
    g.add_argument("--max-resample", type=positive_int("--max-resample"), default=d.max_resample,
                   help="draws (batch mode: rounds) before a step gives up (10)")
    g.add_argument("--max-total-steps", type=positive_int("--max-total-steps"),
                   default=env_default("MAX_TOTAL_STEPS", d.max_total_attempts, int),
                   help="cap on groups generated, useful or not (env MAX_TOTAL_STEPS; 1000)")
    g.add_argument("--informative-by", choices=INFORMATIVE_BY, default=None,
                   help="which groups train: correct (default): some of the G answers right and "
                   "some wrong; reward: any two rewards differ, the study's rule, under which a "
                   "group told apart only by format or partial credit trains too (the default "
                   "with --reward digit-share, whose answers are never right)")
    g.add_argument("--pass-rate-sampler", action="store_true",
                   help="prefer questions whose recent pass rate makes an informative group likely")
    g.add_argument("--pass-rate-scheme", choices=SCHEMES, default=d.pass_rate_scheme,
                   help="with --pass-rate-sampler: plug-in (v1, weighted draws) or predictive "
                   "(v2, the likeliest informative; benchmarks/sampler_simulation.py)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--max-useful-steps", type=positive_int("--max-useful-steps"),
                   default=env_default("MAX_USEFUL_STEPS", d.max_useful_steps, int),
                   help="informative groups to train on (env MAX_USEFUL_STEPS; 200)")
    g.add_argument("--learning-rate", type=float,
                   default=env_default("LEARNING_RATE", d.learning_rate, float),
                   help="(env LEARNING_RATE; 1e-5)")
    g.add_argument("--weight-decay", type=float, default=d.weight_decay, help="AdamW (0.1)")
    g.add_argument("--warmup-ratio", type=float, default=d.warmup_ratio,
                   help="share of updates with linear warmup, then cosine (0.1)")
    g.add_argument("--grad-accum", type=positive_int("--grad-accum"), default=d.grad_accum,
                   help="informative groups per optimiser update (4)")
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm, help="(0.1)")
    g.add_argument("--train-micro-batch", type=positive_int("--train-micro-batch"),
                   default=d.train_micro_batch,
                   help="completions per forward/backward pass (4): memory only, the same update")
    g.add_argument("--num-iterations", type=positive_int("--num-iterations"),
                   default=d.num_iterations, help="updates per rollout batch (1)")
    g = p.add_argument_group("loss")
    g.add_argument("--advantage", choices=ADVANTAGE_MODES, default=d.advantage,
                   help="group_norm: (r - mean) / (std + eps); mean_only: r - mean (Dr. GRPO)")
    g.add_argument("--clip-low", type=float, default=d.clip_low, help="(0.2)")
    g.add_argument("--clip-high", type=float, default=d.clip_high, help="clip-higher (0.28)")
    g.add_argument("--beta", type=float, default=env_default("BETA", d.beta, float),
                   help="k3 KL coefficient to the adapter-off reference (env BETA; 0.0)")
    g.add_argument("--aggregation", choices=AGGREGATIONS, default=d.aggregation,
                   help="token_mean (DAPO), seq_mean_token_mean (GRPO), "
                   "seq_sum_constant (Dr. GRPO)")
    g.add_argument("--tis-cap", type=float, default=d.tis_cap,
                   help="truncated importance sampling: each token's surrogate weighted by "
                   "min(p_trainer / p_sampler, C), with the vLLM engine's sampler log-probs "
                   "(2.0; 0: off; the hf engine samples from the trainer itself: no weight)")
    g = p.add_argument_group("validation and checkpoints")
    g.add_argument("--save-every", type=positive_int("--save-every"), default=d.save_every,
                   help="checkpoint every N useful steps (20)")
    g.add_argument("--val-every", type=positive_int("--val-every"), default=d.val_every,
                   help="validate every N useful steps (20)")
    g.add_argument("--val-samples", type=positive_int("--val-samples"), default=d.val_samples,
                   help="completions per validation question (1); more steadies the choice of "
                   "the best checkpoint")
    g.add_argument("--val-limit", type=positive_int("--val-limit"), default=None,
                   help="validate on the first N validation questions only")
    g.add_argument("--patience", type=int, default=d.patience,
                   help="stop after N validations without a new best (0: never)")
    add_report_to_arg(p)
    return p


def resolve_sft_adapter(args) -> str:
    if not args.sft_adapter:
        raise UsageError("--sft-adapter: required (or set SFT_LORA_PATH); "
                         "use grpo_exp10_nosft.py to start from a fresh LoRA")
    path = Path(args.sft_adapter)
    if args.fold is not None:  # sft_qwen3_kfold.py writes <output>/adapters/fold_<k>/
        found = [p / f"fold_{args.fold}" for p in (path, path / "adapters")]
        found = [p for p in found if p.is_dir()]
        if not found:
            raise UsageError(f"--fold: no fold_{args.fold} adapter folder in {path} "
                             f"or {path / 'adapters'}")
        path = found[0]
    check_adapter_dir(path, "--sft-adapter")
    return str(path)


def config_from_args(args, variant: str) -> GRPOConfig:
    cuda = torch.cuda.is_available()
    cfg = GRPOConfig(
        model=args.model, dataset=args.dataset or "", val_dataset=args.val_dataset,
        output_dir=args.output_dir, seed=args.seed,
        load_in_4bit=load_in_4bit_flag(args),
        unsloth=args.unsloth, num_generations=args.num_generations,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        max_new_tokens=args.max_new_tokens or (3072 if cuda else 256),
        gen_micro_batch=args.gen_micro_batch, tolerance=args.tolerance,
        tolerance_rule=args.tolerance_rule, reward=args.reward,
        rollout_engine=args.rollout_engine, tis_cap=args.tis_cap,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        sampling_mode=args.sampling_mode or ("batch" if cuda else "step"),
        gen_batch=args.gen_batch,
        max_resample=args.max_resample, max_total_attempts=args.max_total_steps,
        pass_rate_sampler=args.pass_rate_sampler, pass_rate_scheme=args.pass_rate_scheme,
        informative_by=args.informative_by,
        max_useful_steps=args.max_useful_steps,
        learning_rate=args.learning_rate, weight_decay=args.weight_decay,
        warmup_ratio=args.warmup_ratio, grad_accum=args.grad_accum,
        max_grad_norm=args.max_grad_norm, num_iterations=args.num_iterations,
        train_micro_batch=args.train_micro_batch,
        advantage=args.advantage, clip_low=args.clip_low, clip_high=args.clip_high,
        beta=args.beta, aggregation=args.aggregation, overlong_buffer=args.overlong_buffer,
        mask_truncated=args.mask_truncated, save_every=args.save_every,
        val_every=args.val_every, val_samples=args.val_samples, patience=args.patience)
    if not VARIANTS[variant]["warm_start"]:
        cfg.lora_r, cfg.lora_alpha = args.lora_r, args.lora_alpha
    return cfg


def main(variant: str, argv=None, *, reward_fn: RewardFn | None = None) -> int:
    """Validate everything (flags, datasets, adapter, output folder), then load and train."""
    args = build_parser(variant).parse_args(argv)
    cfg = config_from_args(args, variant)
    cfg.check()
    if not cfg.dataset:
        raise UsageError("--dataset: required (or set DATASET_PATH)")
    if VARIANTS[variant]["warm_start"]:
        cfg.sft_adapter = resolve_sft_adapter(args)
    check_model_source(cfg.model)
    if cfg.rollout_engine == "vllm":
        require_vllm()  # before anything is loaded
    rows = load_dataset(cfg.dataset)
    val_rows = load_dataset(cfg.val_dataset)[: args.val_limit] if cfg.val_dataset else []
    settings = {**cfg.settings(), "dataset_fingerprint": questions_fingerprint(rows),
                "val_fingerprint": questions_fingerprint(val_rows) if val_rows else None}
    fingerprint = run_fingerprint(settings)
    distributed.setup()  # torchrun / srun: one rank per process; else a no-op
    resume_from = distributed.on_main(lambda: prepare_output_dir(
        cfg.output_dir, fingerprint, resume=args.resume, overwrite=args.overwrite,
        run_files=(LOG_FILE, STATS_FILE, *TRACKING_FILES)))
    # a missing package stops every rank before the model loads; rank 0 alone reports
    tracker = open_tracker(args.report_to, cfg.output_dir, run_name=Path(cfg.output_dir).name,
                           config=settings, main=distributed.is_main())

    torch.manual_seed(cfg.seed)  # a new LoRA's initial weights (the same on every rank)
    model, tokenizer = load_model(cfg.model, load_in_4bit=cfg.load_in_4bit,
                                  use_unsloth=cfg.unsloth, seed=cfg.seed)
    if cfg.sft_adapter:
        model = load_adapter(model, cfg.sft_adapter, trainable=True, flag="--sft-adapter")
    else:
        model = attach_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha)
    world = distributed.world()
    if distributed.is_main():
        ranks = f", {world} ranks" if world > 1 else ""
        # nothing has to divide, but ranks without a share only wait: say so
        per_call = cfg.grad_accum if cfg.sampling_mode == "step" else cfg.gen_batch
        chunks = math.ceil(cfg.grad_accum * cfg.num_generations / cfg.train_micro_batch)
        if world > per_call:
            print(f"warning: {world} ranks but at most {per_call} questions per generation call "
                  f"({'--grad-accum' if cfg.sampling_mode == 'step' else '--gen-batch'}): "
                  "some ranks will wait; --sampling-mode batch with --gen-batch >= the number "
                  "of ranks keeps them all busy", file=sys.stderr, flush=True)
        if world > chunks:
            print(f"warning: {world} ranks but {chunks} micro-batches per update: lower "
                  "--train-micro-batch to give every rank one", file=sys.stderr, flush=True)
        print(f"GRPO {variant}: {cfg.model}"
              f"{' + ' + cfg.sft_adapter if cfg.sft_adapter else ''}, {len(rows)} questions, "
              f"G={cfg.num_generations}, {cfg.rollout_engine} rollouts, "
              f"{cfg.max_useful_steps} useful steps{ranks}, fingerprint {fingerprint}", flush=True)
    try:
        sleep = vllm_sleep(args.vllm_sleep, model, cfg.vllm_gpu_memory_utilization,
                           cfg.train_micro_batch, cfg.max_new_tokens)
        with make_engine(cfg.rollout_engine, model, tokenizer, source=cfg.model, seed=cfg.seed,
                         max_new_tokens=cfg.max_new_tokens, sleep=sleep,
                         gpu_memory_utilization=cfg.vllm_gpu_memory_utilization) as engine:
            trainer = GRPOTrainer(cfg, model, tokenizer, rows, val_rows, reward_fn=reward_fn,
                                  settings=settings, fingerprint=fingerprint, engine=engine,
                                  tracker=tracker)
            trainer.run(resume_from)
    finally:
        tracker.close()
        distributed.cleanup()
    return 0

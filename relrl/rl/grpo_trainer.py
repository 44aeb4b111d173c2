"""The GRPO trainer with DAPO dynamic sampling: one loop, readable top to bottom.

One optimiser update (`GRPOTrainer.run`):
  1. draw questions and sample G completions for each in one call to the rollout engine
     (relrl.engines: batched HF generate, or vLLM with the adapter synced after every update);
     with --tools calculator the engine answers the model's calls between turns, and the
     tokens it inserts stay out of the loss, the KL, the entropy, the importance ratio, the
     overlong penalty and the length metrics (only the model's own tokens count);
  2. score them (relrl.grading.scoring, or an injected reward) and keep only groups with some answers
     right and some wrong (relrl.rl.dynamic_sampling; --informative-by reward: whose rewards
     differ, the study's rule) until the training batch holds `grad_accum` groups: each kept
     group is one "useful step", as the study counted them;
  3. advantages within each group (relrl.rl.grpo_loss.group_advantages), the batch's
     completions packed into micro-batches (relrl.rl.grpo_batch);
  4. `num_iterations` passes over the batch (`update`): clipped surrogate against the rollout
     policy (the trainer's own log-probs on the first pass, with truncated importance sampling
     on trainer/sampler when the engine reports sampler log-probs) plus beta * k3 KL to the
     reference (adapter off), gradients summed over the batch's groups, gradient clipping, one
     AdamW step per pass (warmup then cosine schedule); per-group metrics
     (relrl.rl.grpo_metrics);
  5. one JSON log line per useful step; validation every `val_every` useful steps (best/ kept);
     checkpoint-N/ every `save_every`;
  6. the health check (relrl.rl.health) on every sampling round: one warning line when most
     completions are truncated or most groups carry no signal, and past its stop limits the
     run ends with a checkpoint and stopped_by "unhealthy:<share>" (the scripts exit 3).
A stop flag (relrl.runtime.stop.StopFlag: SIGTERM/SIGUSR1, SLURM's notice) handed to `run` ends
the run at a safe point with a checkpoint (the scripts exit 75, STOPPED_EXIT): a rollout in
progress ends within one decoding step (the engine raises GenerationStopped), the sampler
forgets the partial draw, and a resumed run draws it again. Everything a resumed run needs is
in the checkpoint, and rollout seeds derive from (run seed, question id, attempt number), so a
resumed run ends exactly where an uninterrupted one does.
"""
from __future__ import annotations

import contextlib
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from relrl.data.dataset_io import atomic_write_json
from relrl.data.prompting import build_prompt
from relrl.engines import (
    Engine,
    GenerationStopped,
    SamplingConfig,
    question_seed,
    sample_seed,
)
from relrl.grading.rewards import RewardFn, digit_share_reward, grader_reward
from relrl.modeling.loading import (
    device_of,
    reference_policy,
)
from relrl.modeling.logprobs import completion_logprobs
from relrl.models.by_name import make_engine
from relrl.rl.dynamic_sampling import DynamicSampler, Group, QuestionSampler
from relrl.rl.grpo_batch import MicroBatch, batch_normalisers, micro_batches
from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_loss import (
    LossConfig,
    group_advantages,
    importance_weights,
    overlong_penalty,
    policy_loss,
)
from relrl.rl.grpo_metrics import (
    group_metrics,
    pass_rows,
    progress_line,
    run_statistics,
    step_record,
    trim_log,
)
from relrl.rl.health import HealthCheck, Limits
from relrl.runtime import distributed
from relrl.runtime.checkpointing import (
    load_checkpoint,
    save_checkpoint,
)
from relrl.runtime.cli import (
    UsageError,
)
from relrl.runtime.lr_schedule import warmup_cosine
from relrl.runtime.stop import StopFlag
from relrl.runtime.tracking import Tracker

LOG_FILE, STATS_FILE = "train_log.jsonl", "statistics.json"


@dataclass
class FirstPass:
    """What an update measures on its first pass over a micro-batch, before any optimiser step,
    and holds fixed for every pass."""
    old_logp: torch.Tensor  # the trainer's log-probs of the rollouts: the rollout policy's
    ref_logp: torch.Tensor | None  # the reference policy's (adapter off), when beta > 0
    tis_weight: torch.Tensor | None  # trainer/sampler weights (None: no correction)
    rows: dict[str, torch.Tensor]  # per-row sums of the rollouts (grpo_metrics.FIRST_PASS)


class GRPOTrainer:
    """GRPO with dynamic sampling on a model with a trainable adapter (module docstring)."""

    def __init__(self, cfg: GRPOConfig, model, tokenizer, rows: list[dict],
                 val_rows: list[dict] | None = None, *, reward_fn: RewardFn | None = None,
                 settings: dict | None = None, fingerprint: str = "",
                 engine: Engine | None = None, tracker: Tracker | None = None):
        self.cfg, self.model, self.tokenizer = cfg, model, tokenizer
        self.engine = engine or make_engine("hf", model, tokenizer)
        self.engine_synced = False  # the engine samples from the adapter as it is now
        self.stop = StopFlag.never()  # run() hands in the run's own
        self.rows, self.val_rows = rows, val_rows or []
        self.reward_fn = reward_fn or (digit_share_reward if cfg.reward == "digit-share"
                                       else grader_reward(cfg.tolerance, cfg.tolerance_rule))
        self.tracker = tracker or Tracker()  # --report-to: TensorBoard / W&B curves
        self.settings = settings if settings is not None else cfg.settings()
        self.fingerprint = fingerprint
        self.out = Path(cfg.output_dir)
        self.prompts = [build_prompt(tokenizer, row["question"], tools=cfg.tools) for row in rows]
        self.sampling = SamplingConfig(temperature=cfg.temperature, top_p=cfg.top_p,
                                       top_k=cfg.top_k, max_new_tokens=cfg.max_new_tokens,
                                       micro_batch=cfg.gen_micro_batch, tools=cfg.tools,
                                       max_tool_calls=cfg.max_tool_calls)
        self.loss_cfg = LossConfig(clip_low=cfg.clip_low, clip_high=cfg.clip_high, beta=cfg.beta,
                                   aggregation=cfg.aggregation, constant=cfg.max_new_tokens,
                                   loss=cfg.loss, tis_mode=cfg.tis_mode)

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
            informative_by=cfg.informative_by, drop_uninformative=cfg.dynamic_sampling)
        self.health = HealthCheck(Limits.of(cfg)) if cfg.health_check else None
        self.generated = [0, 0]  # completions sampled for training so far, and truncated ones
        self.updates = 0
        self.stats = {"losses": [], "rewards_per_step": [], "n_correct_per_step": [],
                      "val_history": []}
        self.best: dict | None = None  # {"step", "val_accuracy"}
        self.last_val_step = self.last_save_step = 0

    # ------------------------------------------------------------------ rollouts and reward
    def rollout(self, indices: list[int], first_attempt: int) -> list[Group]:
        """G completions for each question in one batched call, scored. Under torch.distributed
        each rank generates and scores its share of the questions (by position) and the scored
        groups are gathered back in order, so every rank keeps and drops the same groups. A stop
        (this rank's within a decoding step, any rank's between calls) raises GenerationStopped
        on every rank."""
        if self.stop.agreed():  # a collective call: every rank asks before every call
            raise GenerationStopped
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
                self.sampling, should_stop=lambda: self.stop.requested) if mine else []
            stopped = False
        except GenerationStopped:  # this rank's signal, within one decoding step
            completions, stopped = [], True
        if distributed.any_rank(stopped):  # every rank drops the call, or none does
            raise GenerationStopped
        groups = []
        for k, index, group in zip(positions, mine, completions):
            row = self.rows[index]
            scored = [self.reward_fn(c.text, row) for c in group]
            rewards = [reward + self.length_penalty(c) for (reward, _), c in zip(scored, group)]
            groups.append(Group(index, first_attempt + k, rewards, [ok for _, ok in scored], group))
        groups = distributed.gather_shares(groups, len(indices))
        for group in groups:  # every rank counts every group: the health check agrees
            self.generated[0] += len(group.payload)
            self.generated[1] += sum(bool(c.truncated) for c in group.payload)
        return groups

    def sync_engine(self) -> None:
        """Hand the adapter to the engine once after each change (update or restore)."""
        if not self.engine_synced:
            self.engine.sync_adapter(self.model)
            self.engine_synced = True

    def length_penalty(self, completion) -> float:
        """DAPO's overlong penalty on the model's own tokens (tool answers are not its length)."""
        if not self.cfg.overlong_buffer:
            return 0.0
        length = completion.sampled_tokens + (1 if completion.truncated else 0)
        return overlong_penalty(length, self.cfg.max_new_tokens, self.cfg.overlong_buffer)

    # ------------------------------------------------------------------ the update
    def update(self, groups: list[Group]) -> list[dict]:
        """num_iterations optimiser steps on one training batch; per-group metrics."""
        cfg, device = self.cfg, device_of(self.model)
        advantages = group_advantages(torch.tensor([g.rewards for g in groups]), cfg.advantage)
        batches = micro_batches([g.payload for g in groups], advantages, cfg.train_micro_batch,
                                self.tokenizer.pad_token_id, cfg.mask_truncated)
        batch_tokens, batch_seqs = batch_normalisers(batches)
        # Data parallel: each rank runs its share of the micro-batches (the loss already uses
        # the whole batch's counts), then the gradients are summed and every rank steps alike.
        mine = distributed.share(list(range(len(batches))))
        fixed: dict[int, FirstPass] = {}
        parts = []  # (pass, micro-batch, per-row sums) of this rank's micro-batches
        with self.training():
            for iteration in range(cfg.num_iterations):
                for c in mine:
                    batch = batches[c]
                    if iteration == 0:
                        logp, fixed[c] = self.first_pass(batch)
                    else:
                        logp = self.logprobs(batch)
                    terms = policy_loss(logp, fixed[c].old_logp, batch.advantages.to(device),
                                        batch.mask.to(device), self.loss_cfg,
                                        ref_logp=fixed[c].ref_logp, batch_tokens=batch_tokens,
                                        batch_seqs=batch_seqs, tis_weight=fixed[c].tis_weight)
                    terms.loss.backward()
                    rows = pass_rows(terms)
                    if iteration == 0:
                        rows.update(fixed[c].rows)
                    parts.append((iteration, c, rows))
                self.optimizer_step()
        every_rank = [part for rank in distributed.all_gather_object(parts) for part in rank]
        with_sampler = batches[0].sampler_logp is not None
        return group_metrics(every_rank, [b.owner for b in batches], len(groups),
                             cfg.num_iterations, advantages, kl=cfg.beta > 0,
                             tis_ratio=with_sampler, tis_capped=with_sampler and cfg.tis_cap > 0)

    def first_pass(self, batch: MicroBatch) -> tuple[torch.Tensor, FirstPass]:
        """The log-probs of a micro-batch (with grad: the first pass's loss uses them) and what
        every pass holds fixed: the same log-probs detached (the rollout policy), the
        reference's, the trainer/sampler weights, and the rollouts' per-row sums."""
        mask = batch.mask.to(device_of(self.model))
        logp, entropy = self.logprobs(batch, entropy=True)
        old = logp.detach()
        rows = {"tokens": batch.mask.sum(1), "entropy": (entropy.detach() * mask).sum(1).cpu()}
        ref = weight = None
        if self.cfg.beta > 0:
            with torch.no_grad(), reference_policy(self.model):
                ref = self.logprobs(batch)
        if batch.sampler_logp is not None:
            weight, tis_rows = self.importance_weights(old, batch.sampler_logp.to(mask.device),
                                                       mask)
            rows.update(tis_rows)
        return logp, FirstPass(old, ref, weight, rows)

    def importance_weights(self, old, sampler, mask) -> tuple[torch.Tensor | None, dict]:
        """Truncated importance sampling (TIS): per token min(p_trainer / p_sampler, cap), or
        with --tis-mode sequence-mask the completion's ratio, 0 above the cap; detached,
        multiplying the surrogate; None (no correction) when the cap is 0. With the
        per-row sums of the ratio (reported with the correction off too) and of capped tokens."""
        weights = importance_weights(old, sampler, mask, self.cfg.tis_cap, self.cfg.tis_mode)
        rows = {"tis_ratio": weights.row_ratio.cpu()}
        if weights.weight is not None:
            rows["tis_capped"] = weights.row_capped.cpu()
        return weights.weight, rows

    def logprobs(self, batch: MicroBatch, entropy: bool = False):
        device = device_of(self.model)
        return completion_logprobs(self.model, batch.ids.to(device), batch.attention.to(device),
                                   batch.start, micro_batch=batch.ids.shape[0],
                                   return_entropy=entropy)

    @contextlib.contextmanager
    def training(self):
        """Around an update: the engine may free its memory (vLLM's sleep mode), dropout is on,
        and afterwards the next rollout hands the changed adapter to the engine."""
        with self.engine.updating():
            self.model.train()
            yield
            self.model.eval()
        self.engine_synced = False

    def optimizer_step(self) -> None:
        """The ranks' gradients summed, clipped, one AdamW step and one schedule step."""
        distributed.all_reduce_grads(self.params)
        torch.nn.utils.clip_grad_norm_(self.params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.updates += 1

    # ------------------------------------------------------------------ validation
    def validate(self) -> list[int]:
        """Pass counts of val_samples completions per validation row, seeded per question."""
        rows = distributed.share(self.val_rows)  # each rank scores its share
        prompts = [build_prompt(self.tokenizer, row["question"], tools=self.cfg.tools)
                   for row in rows]
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
                "last_val_step": self.last_val_step, "settings": self.settings,
                "generated": list(self.generated),
                **({"health": self.health.state_dict()} if self.health else {})}

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
        self.generated = list(state.get("generated", [0, 0]))
        if self.health and state.get("health"):
            self.health.load_state_dict(state["health"])
        self.last_save_step = self.useful_steps
        self.engine_synced = False
        if distributed.is_main():
            trim_log(self.out / LOG_FILE, self.useful_steps)

    def statistics(self, stopped_by: str) -> dict:
        return run_statistics(self.sampler.counters.to_dict(), updates=self.updates,
                              stats=self.stats, best=self.best, stopped_by=stopped_by,
                              settings=self.settings, tools=self.cfg.tools,
                              max_tool_calls=self.cfg.max_tool_calls, loss=self.cfg.loss,
                              tis_mode=self.cfg.tis_mode,
                              health_warnings=self.health.warnings if self.health else None)

    def log_steps(self, groups, metrics, val_accuracy, **timing) -> None:
        """The batch's useful steps to train_log.jsonl, the terminal and the tracker (rank 0)."""
        if not distributed.is_main():
            return
        counters = self.sampler.counters.to_dict()
        first = self.useful_steps - len(groups) + 1
        records = [step_record(first + k, self.rows[group.index]["id"], group, m, counters,
                               tools=self.cfg.tools != "none", **timing)
                   for k, (group, m) in enumerate(zip(groups, metrics))]
        if val_accuracy is not None:
            records[-1]["val_accuracy"] = val_accuracy
        for record in records:
            tqdm.write(progress_line(record, self.cfg.max_useful_steps), file=sys.stdout)
        with open(self.out / LOG_FILE, "a", encoding="utf-8") as handle:
            handle.writelines(json.dumps(x) + "\n" for x in records)
        for x in records:  # validation accuracy goes from record_validation
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

    def check_health(self, before: dict, generated: list[int]) -> None:
        """One sampling round (counters and generated counts from before it) to the health
        check; its lines to the log (rank 0)."""
        if self.health is None:
            return
        now = self.sampler.counters.to_dict()
        lines = self.health.observe(
            groups=now["total_attempts"] - before["total_attempts"],
            zero_signal=(now["all_correct"] + now["all_wrong"])
            - (before["all_correct"] + before["all_wrong"]),
            wasted=now["wasted_steps"] - before["wasted_steps"],
            completions=self.generated[0] - generated[0],
            truncated=self.generated[1] - generated[1], step=self.useful_steps)
        if distributed.is_main():
            for line in lines:
                tqdm.write(line, file=sys.stderr)

    def stop_reason(self) -> str | None:
        if self.health is not None and self.health.stopped:
            return f"unhealthy:{self.health.stopped}"
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
    def run(self, resume_from: Path | None = None, stop: StopFlag | None = None) -> dict:
        """Train until a cap, early stopping or a stop signal; write the last checkpoint and
        statistics.json and return the statistics. `stop`: the flag whose signal ends the run
        at a safe point; without one, run() listens for SIGTERM and SIGUSR1 itself."""
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
        listening = StopFlag() if stop is None else contextlib.nullcontext(stop)
        with listening as self.stop, tqdm(total=cfg.max_useful_steps, initial=self.useful_steps,
                                          desc="grpo", file=sys.stderr,
                                          disable=None if distributed.is_main() else True) as bar:
            while (stopped_by := self.stop_reason()) is None and \
                    (signal_name := self.stop.agreed()) is None:
                wanted = min(cfg.grad_accum, cfg.max_useful_steps - self.useful_steps)
                t0 = time.perf_counter()
                before, generated = self.sampler.counters.to_dict(), list(self.generated)
                try:
                    groups = self.sampler.collect(wanted)
                except GenerationStopped:  # the sampler has put back its partial draw
                    signal_name = self.stop.agreed()  # every rank learns which signal it was
                    break
                t_sample = time.perf_counter() - t0
                self.check_health(before, generated)
                if not groups:
                    continue
                lr = self.scheduler.get_last_lr()[0]
                t0 = time.perf_counter()
                metrics = self.update(groups)
                t_update = time.perf_counter() - t0
                self.stats["losses"] += [m["loss"] for m in metrics]
                self.stats["rewards_per_step"] += [statistics.fmean(g.rewards) for g in groups]
                self.stats["n_correct_per_step"] += [sum(g.correct) for g in groups]
                accuracy = None
                if self.val_rows and self.due(cfg.val_every, self.last_val_step):
                    accuracy = self.record_validation()
                self.log_steps(groups, metrics, accuracy, lr=lr, t_sample=t_sample,
                               t_update=t_update)
                bar.update(len(groups))
                if self.due(cfg.save_every, self.last_save_step):
                    self.save()
        self.stop = StopFlag.never()  # a rollout after the run is not this run's to stop
        if signal_name is not None:
            return self.finish(signal_name)
        if self.val_rows and self.useful_steps and self.last_val_step != self.useful_steps \
                and not stopped_by.startswith("unhealthy"):  # a stopped run spends no more
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
        if stopped_by.startswith("unhealthy"):
            print(f"stopped ({stopped_by}) at useful step {self.useful_steps}: wrote {where}; "
                  f"exit status 3 (the health line above says what to change)", flush=True)
            return result
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

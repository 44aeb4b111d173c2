"""What a GRPO run reports: per-group metrics of an update, the log line of a useful step (and
the log cut back to a checkpoint on resume), and the run's statistics.

An update measures each completion (row) of its micro-batches and adds the rows up by group,
in one place (group_metrics). Two kinds of row sums:
  of the rollouts, measured on the first pass, before any optimiser step: tokens under the mask,
      entropy of the policy, the trainer/sampler ratio and how many tokens its cap changed;
  of every pass (num_iterations of them): the loss, clipped tokens, KL to the reference.
A group's metric is its sum per token (per token and pass for the second kind); its loss is its
share of the batch loss, averaged over the passes and scaled so that the groups' mean is the
batch's.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import torch

from relrl.data.dataset_io import atomic_write_jsonl
from relrl.rl.dynamic_sampling import WASTE_KINDS, Group
from relrl.rl.grpo_loss import LossTerms
from relrl.untrusted import UntrustedInputError, loads_json

FIRST_PASS = ("tokens", "entropy", "tis_ratio", "tis_capped")
EVERY_PASS = ("loss", "clipped", "kl")


def pass_rows(terms: LossTerms) -> dict[str, torch.Tensor]:
    """One pass's per-row sums of a micro-batch (EVERY_PASS), from its loss terms."""
    rows = {"loss": terms.row_loss.cpu(),
            "clipped": (terms.row_clip_low + terms.row_clip_high).cpu()}
    if terms.row_kl is not None:
        rows["kl"] = terms.row_kl.cpu()
    return rows


def group_metrics(parts: list[tuple[int, int, dict]], owners: list[torch.Tensor], n_groups: int,
                  passes: int, advantages: torch.Tensor, *, kl: bool, tis_ratio: bool,
                  tis_capped: bool) -> list[dict]:
    """Per-group metrics from (pass, micro-batch, {name: per-row sums}) parts of every rank;
    owners[c] maps micro-batch c's rows to their groups. kl, tis_ratio and tis_capped say which
    optional metrics were measured (None in the result otherwise)."""
    sums = {name: torch.zeros(n_groups) for name in FIRST_PASS + EVERY_PASS}
    # in (pass, micro-batch) order whatever rank measured them: the float sums of one process
    for _, c, rows in sorted(parts, key=lambda part: part[:2]):
        for name, values in rows.items():
            sums[name].index_add_(0, owners[c], values)
    tokens = sums["tokens"].clamp(min=1)
    token_passes = tokens * passes
    return [{
        "loss": float(sums["loss"][k]) * n_groups / passes,
        "kl": float(sums["kl"][k] / token_passes[k]) if kl else None,
        "clip_frac": float(sums["clipped"][k] / token_passes[k]),
        "entropy": float(sums["entropy"][k] / tokens[k]),
        "advantages": advantages[k].tolist(),
        # trainer/sampler probability ratio: mean over tokens, share above the cap
        "tis_ratio_mean": float(sums["tis_ratio"][k] / tokens[k]) if tis_ratio else None,
        "tis_capped_frac": float(sums["tis_capped"][k] / tokens[k]) if tis_capped else None,
    } for k in range(n_groups)]


def tool_metrics(completions) -> dict:
    """A group's tool use: mean calls per completion, and the share of calls answered with an
    error (None when no call was made)."""
    calls = sum(c.tool_calls for c in completions)
    errors = sum(c.tool_errors for c in completions)
    return {"tool_calls_mean": calls / len(completions),
            "tool_error_share": errors / calls if calls else None}


def step_record(step: int, question_id, group: Group, metrics: dict, counters: dict, *,
                lr: float, t_sample: float, t_update: float, tools: bool = False) -> dict:
    """One useful step's line of train_log.jsonl: its group, its update's metrics, the waste so
    far (counters: WasteCounters.to_dict()); with `tools`, its tool use. Lengths count the
    model's own tokens, not a tool loop's inserted ones."""
    lengths = [c.sampled_tokens for c in group.payload]
    return {
        "step": step, "question_id": question_id, "attempt": group.attempt,
        "rewards": group.rewards, "reward_mean": statistics.fmean(group.rewards),
        "reward_std": statistics.pstdev(group.rewards), "n_correct": sum(group.correct),
        **metrics,
        "completion_lengths": lengths, "mean_length": statistics.fmean(lengths),
        "truncated": sum(c.truncated for c in group.payload),
        **(tool_metrics(group.payload) if tools else {}), "lr": lr,
        "t_sample": t_sample, "t_update": t_update,
        "waste": {kind: counters[kind] for kind in WASTE_KINDS},
        "total_attempts": counters["total_attempts"], "waste_rate": counters["waste_rate"],
    }


def trainer_seconds(log: list[dict]) -> float:
    """Sampling + update time over a train_log's optimiser steps: every group of one step
    carries that step's timings, so each step is counted once."""
    per_update = {(x["t_sample"], x["t_update"], x["total_attempts"]) for x in log}
    return sum(s + u for s, u, _ in per_update)


def progress_line(record: dict, max_steps: int) -> str:
    """A step's record as one line for the terminal."""
    calls = f"calls {record['tool_calls_mean']:.1f} " if "tool_calls_mean" in record else ""
    return (f"step {record['step']}/{max_steps} "
            f"reward {record['reward_mean']:.3f}±{record['reward_std']:.3f} "
            f"correct {record['n_correct']}/{len(record['rewards'])} loss {record['loss']:+.4f} "
            f"clip {record['clip_frac']:.2f} entropy {record['entropy']:.2f} "
            f"len {record['mean_length']:.0f} {calls}lr {record['lr']:.2e} "
            f"waste {record['waste_rate']:.0%} of {record['total_attempts']}")


def run_statistics(counters: dict, *, updates: int, stats: dict, best: dict | None,
                   stopped_by: str, settings: dict, tools: str = "none",
                   max_tool_calls: int | None = None, loss: str = "grpo",
                   tis_mode: str = "token", health_warnings: list | None = None) -> dict:
    """statistics.json: the study's counters, the per-step curves and validations, the best
    validation, why the run stopped (a stop by the health check: "unhealthy:<share>") and its
    settings; which tools the rollouts had, the objective and the TIS mode (recorded even at
    their defaults, which the settings leave out to keep old runs' fingerprints); the health
    check's warnings (None when it was off)."""
    return {
        "useful_steps": counters["useful_steps"],
        "wasted_steps": counters["wasted_steps"],
        "total_attempts": counters["total_attempts"],
        "resample_events": counters["resample_events"],
        "exhausted_steps": counters["exhausted_steps"],
        "surplus_groups": counters["surplus_groups"],
        "waste_by_kind": {kind: counters[kind] for kind in WASTE_KINDS},
        "waste_rate": counters["waste_rate"],
        "optimizer_updates": updates,
        **stats,
        "best_step": best["step"] if best else None,
        "best_val_accuracy": best["val_accuracy"] if best else None,
        "stopped_by": stopped_by,
        "tools": tools,
        "max_tool_calls": max_tool_calls,
        "loss": loss,
        "tis_mode": tis_mode,
        "health_warnings": health_warnings,
        "settings": settings,
    }


def trim_log(log: Path, last_step: int) -> None:
    """Keep the lines of train_log.jsonl up to a checkpoint's step, for a run resumed from it."""
    if not log.exists():
        return
    kept = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            record = loads_json(line, str(log))
        except UntrustedInputError:  # a line cut short by the kill
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and \
                record["step"] <= last_step:
            kept.append(record)
    atomic_write_jsonl(log, kept)

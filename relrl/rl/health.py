"""A loud health check for the GRPO loop: a run that trains on nothing says so and stops.

"loss 0, grad-norm 0 for hours" has two usual causes: every completion is cut at the length
limit, or every group is all right or all wrong, so dynamic sampling drops it. The loop hands
each sampling round's counts to `HealthCheck.observe`; over the last `window` groups generated
it measures three shares:
  truncated    completions cut at --max-new-tokens, of all completions generated
  zero_signal  groups all right or all wrong, of all groups generated
  wasted       groups that gave no useful step (zero-signal, or one reward throughout), of all
Above a warn limit the log gets one line with the numbers and the flag to change (again only
after the share has fallen back below it); past a stop limit the run stops with a checkpoint,
stopped_by "unhealthy:<share>" and exit status 3 (UNHEALTHY_EXIT), which demo.py and the SLURM
jobs treat as a failed stage. Nothing is judged before a full window of groups.

The defaults leave every committed training log under results/ alone (tests/test_health.py
replays them): their worst 64-group windows have 48% zero-signal groups, 58% without a useful
step and 28% truncated completions (of the useful groups', the only ones the logs record),
against warn limits of 80%, 85% and 50%.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

UNHEALTHY_EXIT = 3
KINDS = ("truncated", "zero_signal", "wasted")
HEALTH_DEFAULTS = {"window": 64, "warn_truncated": 0.5, "stop_truncated": 0.95,
                   "warn_zero_signal": 0.8, "stop_zero_signal": 0.98,
                   "warn_wasted": 0.85, "stop_wasted": 0.98}
WHAT = {"truncated": "of completions were cut at --max-new-tokens",
        "zero_signal": "of groups were all right or all wrong",
        "wasted": "of groups gave no useful step"}
ADVICE = {
    "truncated": "raise --max-new-tokens (or ask for shorter answers)",
    "zero_signal": "the questions are too hard or too easy for the policy: screen the dataset "
                   "by base pass rate, try --pass-rate-sampler, or lower --learning-rate if it "
                   "collapsed",
    "wasted": "rewards do not tell the answers apart: check --reward, --overlong-buffer and "
              "--informative-by, or try --pass-rate-sampler",
}


@dataclass(frozen=True)
class Limits:
    window: int = HEALTH_DEFAULTS["window"]
    warn: tuple[float, float, float] = tuple(HEALTH_DEFAULTS[f"warn_{k}"] for k in KINDS)
    stop: tuple[float, float, float] = tuple(HEALTH_DEFAULTS[f"stop_{k}"] for k in KINDS)

    @classmethod
    def of(cls, cfg) -> "Limits":
        """From GRPOConfig's health_* settings."""
        return cls(cfg.health_window, tuple(getattr(cfg, f"health_warn_{k}") for k in KINDS),
                   tuple(getattr(cfg, f"health_stop_{k}") for k in KINDS))


class HealthCheck:
    """Shares over the last `limits.window` groups generated; warnings and a stop verdict."""

    def __init__(self, limits: Limits = Limits()):
        self.limits = limits
        # one entry per sampling round: [groups, zero_signal, wasted, completions, truncated]
        self.rounds: deque[list[int]] = deque()
        self.above: set[str] = set()  # kinds warned about and not yet back below the limit
        self.warnings: list[dict] = []  # every warning, for statistics.json
        self.stopped: str | None = None  # the kind past its stop limit

    def observe(self, *, groups: int, zero_signal: int, wasted: int, completions: int,
                truncated: int, step: int = 0) -> list[str]:
        """Add one sampling round; return the lines to print (warnings, then a stop)."""
        if groups <= 0:
            return []
        self.rounds.append([groups, zero_signal, wasted, completions, truncated])
        # keep the fewest recent rounds that still cover a full window of groups
        while len(self.rounds) > 1 and \
                sum(r[0] for r in self.rounds) - self.rounds[0][0] >= self.limits.window:
            self.rounds.popleft()
        shares = self.shares()
        if shares is None:
            return []
        lines = []
        for kind, warn, stop in zip(KINDS, self.limits.warn, self.limits.stop):
            share = shares[kind]
            if share >= stop and self.stopped is None:
                self.stopped = kind
                lines.append(self.line(kind, share, "stopping the run", step))
            elif share >= warn and kind not in self.above:
                self.above.add(kind)
                self.warnings.append({"step": step, "kind": kind, "share": share})
                lines.append(self.line(kind, share, "warning", step))
            elif share < warn:
                self.above.discard(kind)
        return lines

    def shares(self) -> dict[str, float] | None:
        """Each kind's share over the current window; None before a full window."""
        groups, zero, wasted, completions, truncated = (sum(col) for col in zip(*self.rounds)) \
            if self.rounds else (0, 0, 0, 0, 0)
        if groups < self.limits.window:
            return None
        return {"truncated": truncated / completions if completions else 0.0,
                "zero_signal": zero / groups, "wasted": wasted / groups}

    def line(self, kind: str, share: float, what: str, step: int) -> str:
        i = KINDS.index(kind)
        groups = sum(r[0] for r in self.rounds)
        flag = "--health-" + ("stop-" if what.startswith("stop") else "warn-") + \
            kind.replace("_", "-")
        return (f"health {what} at useful step {step}: in the last {groups} groups generated, "
                f"{share:.0%} {WHAT[kind]} (warn at {self.limits.warn[i]:.0%}, stop at "
                f"{self.limits.stop[i]:.0%}); {ADVICE[kind]} ({flag} moves this limit; "
                "--no-health-check turns the check off)")

    def state_dict(self) -> dict:
        return {"rounds": [list(r) for r in self.rounds], "above": sorted(self.above),
                "warnings": list(self.warnings), "stopped": self.stopped}

    def load_state_dict(self, state: dict) -> None:
        """The window and warnings of a checkpoint; a stop is judged again on the next round,
        under the limits of the resumed run."""
        self.rounds = deque(list(r) for r in state["rounds"])
        self.above = set(state["above"])
        self.warnings = list(state["warnings"])


def rounds_from_log(records: list[dict]) -> list[dict]:
    """The sampling rounds of a train_log.jsonl, as observe() takes them: the log's steps
    grouped by their cumulative attempt count (one update each). Truncation is known only for
    the useful groups the log records, so those are the completions counted."""
    rounds: list[dict] = []
    seen = {"total": 0, "zero": 0, "wasted": 0}
    for record in records:
        total = record["total_attempts"]
        if not rounds or rounds[-1]["_total"] != total:
            waste = record["waste"]
            zero = waste["all_correct"] + waste["all_wrong"]
            wasted = sum(waste.values())
            rounds.append({"_total": total, "groups": total - seen["total"],
                           "zero_signal": zero - seen["zero"], "wasted": wasted - seen["wasted"],
                           "completions": 0, "truncated": 0, "step": record["step"]})
            seen = {"total": total, "zero": zero, "wasted": wasted}
        rounds[-1]["completions"] += len(record["rewards"])
        rounds[-1]["truncated"] += record["truncated"]
        rounds[-1]["step"] = record["step"]
    return [{k: v for k, v in r.items() if k != "_total"} for r in rounds]

"""Training curves while a run goes: TensorBoard or Weights & Biases behind one interface.

`--report-to none|tensorboard|wandb` (default none) on the GRPO, SFT and DPO trainers. The
trainers call `tracker.log(metrics, step)` where they write a train_log.jsonl line (and with
validation accuracy), so the curves hold exactly the log's numbers: every numeric field, nested
ones as "waste/all_correct"; lists (per-completion rewards, lengths) and text are left out.

- tensorboard: event files in `<output_dir>/tensorboard/` (`tensorboard --logdir runs/`). A
  resumed run purges the events after its checkpoint, as it cuts train_log.jsonl there.
- wandb: one run per trainer invocation, project `$WANDB_PROJECT` (default "relrl"), files in
  `<output_dir>/wandb/`, the run settings as its config. W&B's own variables apply: with
  `WANDB_MODE=offline` nothing leaves the machine (`wandb sync` uploads later).
Both packages are optional (requirements-dev.txt lists them): a missing one is a one-line
error naming it, raised when the tracker is opened, before any model is loaded. Open the
tracker only on the process that writes the logs (rank 0 of a distributed run).
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from relrl.runtime.cli import UsageError

REPORT_TO = ("none", "tensorboard", "wandb")
RUN_FILES = ("tensorboard", "wandb")  # what --overwrite clears with the logs


def scalars(metrics: dict, prefix: str = "") -> dict[str, float]:
    """The numeric fields of a log record, nested dicts flattened to "outer/inner"."""
    out = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(scalars(value, f"{name}/"))
        elif isinstance(value, (int, float)) and math.isfinite(value):  # bools count as 0/1
            out[name] = float(value)
    return out


class Tracker:
    """Logs nothing: what --report-to none gives, and the trainers' default."""

    def log(self, metrics: dict, step: int) -> None:
        pass

    def close(self) -> None:
        pass


def _missing(package: str) -> UsageError:
    return UsageError(f"--report-to {package}: the {package} package is not installed "
                      f"(pip install {package})")


class TensorBoardTracker(Tracker):
    def __init__(self, log_dir: str | os.PathLike):
        try:  # optional and heavy: imported only when asked for
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise _missing("tensorboard") from None
        self.log_dir, self._writer_class, self.writer = Path(log_dir), SummaryWriter, None

    def log(self, metrics: dict, step: int) -> None:
        if self.writer is None:  # opened at the first step: purge what a killed run left after it
            self.writer = self._writer_class(log_dir=str(self.log_dir), purge_step=step,
                                             flush_secs=30)
        for name, value in scalars(metrics).items():
            self.writer.add_scalar(name, value, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class WandbTracker(Tracker):
    def __init__(self, output_dir: str | os.PathLike, run_name: str, config: dict):
        try:  # optional and heavy: imported only when asked for
            import wandb
        except ImportError:
            raise _missing("wandb") from None
        self.wandb, self.run = wandb, None
        self.dir, self.name, self.config = Path(output_dir), run_name, config

    def log(self, metrics: dict, step: int) -> None:
        if self.run is None:  # WANDB_MODE, WANDB_PROJECT and the like are read by wandb itself
            self.dir.mkdir(parents=True, exist_ok=True)
            self.run = self.wandb.init(project=os.environ.get("WANDB_PROJECT", "relrl"),
                                       name=self.name, dir=str(self.dir), config=self.config)
            # x-axis "step" (useful steps): validation is logged after its step's update, so
            # W&B's own call counter would not give the training step
            self.run.define_metric("step")
            self.run.define_metric("*", step_metric="step")
        self.run.log({**scalars(metrics), "step": step})

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()


def open_tracker(report_to: str, output_dir: str | os.PathLike, *, run_name: str,
                 config: dict | None = None, main: bool = True) -> Tracker:
    """The tracker --report-to asks for, writing under `output_dir`. Nothing is created on disk
    until the first step is logged. Under data parallelism only rank 0 (`main`) reports; the
    other ranks get a tracker that logs nothing, after the same check that the package is
    there, so a missing package stops every rank alike."""
    if report_to == "tensorboard":
        tracker = TensorBoardTracker(Path(output_dir) / "tensorboard")
    elif report_to == "wandb":
        tracker = WandbTracker(output_dir, run_name, config or {})
    elif report_to == "none":
        tracker = Tracker()
    else:
        raise UsageError(f"--report-to: one of {', '.join(REPORT_TO)}, got {report_to!r}")
    return tracker if main else Tracker()

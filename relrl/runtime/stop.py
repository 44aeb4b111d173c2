"""One stop object for a training run: SLURM's notice becomes a flag the loop polls.

SLURM sends SIGTERM (time limit) or SIGUSR1 (the job file's --signal, before a time limit or
a preemption) shortly before it kills a job. While a StopFlag is active those signals set
`.signal` instead of ending the process, so the trainer can write a checkpoint at a safe point
and exit STOPPED_EXIT (75, sysexits' EX_TEMPFAIL: stopped before the end, run it again with
--resume), never 0, which says the run finished. Under torchrun SLURM's signal reaches the
launcher, not the workers: the multi-node job file writes the file named by $RELRL_STOP_FILE
instead, and its appearing counts as the signal it names. torchrun reports any worker's
non-zero status as its own 1, so a stopped run also leaves <stop file>.exit holding 75 there.

Two questions a loop asks:
  requested   this process alone, cheap: asked once per decoding step inside a generation call;
  agreed()    every rank together (a collective call, made at the same point on every rank):
              the signal every rank acts on, so all of them stop at the same step.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from relrl.runtime import distributed

STOP_FILE_ENV = "RELRL_STOP_FILE"
# The exit status of a run a signal stopped after writing its checkpoint: not finished, resume
# with --resume. 0 is a finished run; 2 bad input; 3 the GRPO health check (relrl.rl.health).
STOPPED_EXIT = 75  # sysexits.h EX_TEMPFAIL: "temporary failure, try again later"


def exit_status(stopped_by: str) -> int:
    """A trainer's exit status from its statistics' stopped_by: STOPPED_EXIT when a signal
    (SIGTERM, SIGUSR1, the stop file) stopped it, else 0. With $RELRL_STOP_FILE set (a
    data-parallel job, whose launcher loses the workers' status) the stopped status is also
    written to <stop file>.exit for the job file to read."""
    if not stopped_by.startswith("SIG"):
        return 0
    stop_file = os.environ.get(STOP_FILE_ENV)
    if stop_file:
        try:  # every rank writes the same text; the job file reads it once they have all ended
            Path(f"{stop_file}.exit").write_text(f"{STOPPED_EXIT}\n", encoding="utf-8")
        except OSError as exc:
            print(f"warning: cannot write {stop_file}.exit ({exc})", file=sys.stderr, flush=True)
    return STOPPED_EXIT


class StopFlag:
    """While active (a `with` block), SIGTERM and SIGUSR1 set `.signal` instead of ending the
    process. So does the file named by $RELRL_STOP_FILE appearing (its text names the signal)."""

    def __init__(self, signals=(signal.SIGTERM, signal.SIGUSR1)):
        self.signals, self.signal, self._previous = signals, None, {}
        self.stop_file = os.environ.get(STOP_FILE_ENV) or None

    @classmethod
    def never(cls) -> StopFlag:
        """A flag nothing sets: for a trainer's methods called outside a run."""
        flag = cls(signals=())
        flag.stop_file = None
        return flag

    @property
    def requested(self) -> bool:
        if self.signal is None and self.stop_file and os.path.exists(self.stop_file):
            try:
                name = Path(self.stop_file).read_text(encoding="utf-8").strip()
            except OSError:
                name = ""
            self.signal = name if name.startswith("SIG") else "SIGUSR1"
        return self.signal is not None

    def agreed(self) -> str | None:
        """The signal every rank stops for: this rank's or another's (None: go on). Every rank
        must call it at the same point, since it is a collective call under torch.distributed."""
        return distributed.agreed_signal(self.signal if self.requested else None)

    def _handle(self, signum, _frame):
        self.signal = signal.Signals(signum).name
        print(f"received {self.signal}: will write a checkpoint and exit at the next safe point",
              file=sys.stderr, flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        return False

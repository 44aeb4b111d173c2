"""A running stage's progress line: how much of its work its own files hold, and how long the
rest should take at the pace so far.

The scripts append finished work to files as they go (screening's and evaluation's progress
files, one line a question; a GRPO run's train_log.jsonl, one line a useful step), so counting
those lines while a script runs shows how far it is without the script knowing about the demo.

  [demo] grpo_exp10: 24/60 useful steps (40%), 3:10 so far, about 4:45 left
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from relrl.evaluation.runner import HEADER_ID

EVERY_S = 30.0  # seconds between a running stage's progress lines


@dataclass(frozen=True)
class Work:
    """A stage's work: `total` items, each a line of one of `files` once finished."""
    files: tuple[Path, ...]
    total: int
    unit: str

    def done(self) -> int:
        count = 0
        for path in self.files:
            try:
                with open(path, "rb") as handle:
                    count += sum(1 for line in handle
                                 if line.endswith(b"\n") and HEADER_ID.encode() not in line[:40])
            except FileNotFoundError:
                continue
        return min(count, self.total)


def clock(seconds: float) -> str:
    """A duration as m:ss, or h:mm:ss from an hour."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def line(stage: str, work: Work, done: int, done_at_start: int, elapsed: float) -> str:
    """The progress line; the time left comes from this attempt's pace (a resumed stage's
    earlier work took no time here), and is left out until an item has finished."""
    share = f"{done}/{work.total} {work.unit} ({100 * done / max(work.total, 1):.0f}%)"
    text = f"{stage}: {share}, {clock(elapsed)} so far"
    if done > done_at_start:
        left = elapsed / (done - done_at_start) * (work.total - done)
        text += f", about {clock(left)} left"
    return text


class Monitor:
    """Prints `line` every EVERY_S seconds through `say` while a stage runs (a daemon thread,
    stopped by `stop`)."""

    def __init__(self, stage: str, work: Work, say: Callable[[str], None],
                 every: float = EVERY_S):
        self.stage, self.work, self.say, self.every = stage, work, say, every
        self.start, self.done_at_start = time.time(), work.done()
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Monitor:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.finished.set()
        self.thread.join()

    def _loop(self) -> None:
        while not self.finished.wait(self.every):
            self.say(line(self.stage, self.work, self.work.done(), self.done_at_start,
                          time.time() - self.start))

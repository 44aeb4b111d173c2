"""Many chat calls at once: `run_jobs` runs one request a job on a pool of threads, saves each
answer in the calling thread as it arrives, and stops sending on a fatal error, on a run of
failures or when told to (a budget), while the answers already paid for are still saved.
"""
from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable

from relrl.evaluation.api_client import APIError, FatalAPIError, log


@dataclass
class RunReport:
    done: int = 0
    failures: list = field(default_factory=list)  # (job, reason): retried on the next run
    stopped: str = ""  # why submission stopped early, "" when every job was tried


_NO_MORE = object()


def run_jobs(jobs: Iterable, work: Callable, on_result: Callable, *, workers: int,
             should_stop: Callable[[int], bool] = lambda in_flight: False,
             max_consecutive_failures: int = 5) -> RunReport:
    """Run work(job) for each job on at most `workers` threads; on_result(job, result) runs in
    the calling thread (where progress is saved) as each finishes.

    Jobs are drawn lazily, so nothing is sent once should_stop(in_flight) says so. A
    FatalAPIError stops submission, lets the requests in flight finish and be saved (they are
    paid for), then is raised. Other APIErrors are recorded as failures; a run of
    `max_consecutive_failures` of them stops submission (the service is down, not the item).
    """
    report = RunReport()
    source = iter(jobs)
    pending: dict = {}
    fatal: FatalAPIError | None = None
    consecutive = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # Ctrl-C can land anywhere in the loop (while a request is being submitted or an answer
        # saved, not only while waiting): the answers already requested are saved either way
        try:
            while True:
                while (fatal is None and not report.stopped and len(pending) < workers
                       and not should_stop(len(pending))):
                    job = next(source, _NO_MORE)
                    if job is _NO_MORE:
                        break
                    pending[pool.submit(work, job)] = job
                if not pending:
                    break
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    job = pending.pop(future)
                    try:
                        result = future.result()
                    except FatalAPIError as exc:
                        fatal = fatal or exc
                        continue
                    except APIError as exc:
                        report.failures.append((job, str(exc)))
                        consecutive += 1
                        if consecutive >= max_consecutive_failures and not report.stopped:
                            report.stopped = (f"{consecutive} requests in a row failed "
                                              f"(last: {exc})")
                        continue
                    consecutive = 0
                    report.done += 1
                    on_result(job, result)
        except KeyboardInterrupt:
            _save_in_flight(pending, on_result)
            raise
    if fatal is not None:
        raise fatal
    return report


def _save_in_flight(pending: dict, on_result: Callable) -> None:
    """On Ctrl-C, wait for the answers already requested (they are paid for) and save them."""
    log(f"interrupted: saving the {len(pending)} answers in flight (Ctrl-C again drops them)")
    for future, job in pending.items():
        try:
            result = future.result()
        except APIError:
            continue
        on_result(job, result)

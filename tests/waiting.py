"""Waiting on a child process without racing it: poll for a file or a line with a deadline, so
a child that never gets there fails the test with a reason instead of hanging it."""
import threading
import time


def wait_until(condition, *, timeout: float, what: str, poll: float = 0.01) -> None:
    """Return once condition() is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(poll)


class LineWatcher:
    """Reads a text stream on a thread; `.seen(text)` is an Event set once a line contains
    text. `.text()` is everything read (complete once the stream has closed, after join())."""

    def __init__(self, stream):
        self._lines, self._wanted, self._lock = [], {}, threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def seen(self, text: str) -> threading.Event:
        with self._lock:
            event = self._wanted.setdefault(text, threading.Event())
            if any(text in line for line in self._lines):
                event.set()
        return event

    def _read(self, stream) -> None:
        for line in stream:
            with self._lock:
                self._lines.append(line)
                for text, event in self._wanted.items():
                    if text in line:
                        event.set()

    def join(self, timeout: float = 60) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        with self._lock:
            return "".join(self._lines)

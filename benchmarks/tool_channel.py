"""Worst cases of the tool channel's text processing, timed at growing input sizes: the
calculator's postfix factorials (`1` then n `!`), a sum of n terms, comb(1e300, n), and the
tool-call parser on a turn of n `<tool_call>` openings that never close. Each time is the best
of 3 in CPU time (a shared machine's wait for a core left out); the last column is the time per
character (flat when the work is linear).

Run: python benchmarks/tool_channel.py
"""

import time

from relrl.tools.calculator import calculator
from relrl.tools.protocol import tool_call_bodies


def best_of(f, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        f()
        best = min(best, time.process_time() - start)
    return best


CASES = [
    ("calculator: 1 then n '!'", lambda n: "1" + "!" * n, (250, 500, 999)),
    ("calculator: 1+1+...+1, n chars", lambda n: "+".join(["1"] * ((n + 1) // 2)), (250, 500, 999)),
    ("calculator: comb(1e300, n) (one call; n is not a length)", lambda n: f"comb(1e300, {n})",
     (250, 500, 1000)),
    ("parser: n chars of unclosed <tool_call>", lambda n: "<tool_call>" * (n // 11),
     (10_000, 40_000, 160_000)),
]


def main():
    calculator("gammainc(1, 1)")  # scipy's first import is not the calculator's time
    for title, make, sizes in CASES:
        print(title)
        for n in sizes:
            text = make(n)
            parse = title.startswith("parser")
            run = (lambda: tool_call_bodies(text)) if parse else (lambda: calculator(text))
            seconds = best_of(run)
            print(f"  n={n:>7,}  {seconds * 1000:9.2f} ms  {seconds / len(text) * 1e6:8.2f} us/char")


if __name__ == "__main__":
    main()

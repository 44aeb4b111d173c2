"""The paired bootstrap of every evaluation comparison (10,000 resamples of the per-question
differences): relrl.evaluation.stats, on scipy.stats.bootstrap, beside a plain numpy resampling loop (the
hand-rolled version it replaced), on the same data and seed. Prints times and the ratio.

Run: python benchmarks/bootstrap_speed.py
"""

import time

import numpy as np

from relrl.evaluation.stats import paired_bootstrap_ci


def numpy_loop(base, ft, n_boot=10_000, seed=0):
    """Percentile bootstrap of mean(ft - base) with numpy alone, chunked like relrl.evaluation.stats."""
    diff = np.asarray(ft, float) - np.asarray(base, float)
    rng, means = np.random.default_rng(seed), np.empty(n_boot)
    chunk = max(1, 2_000_000 // diff.size)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        means[start:stop] = diff[rng.integers(0, diff.size, (stop - start, diff.size))].mean(1)
    low, high = np.quantile(means, [0.025, 0.975])
    return {"low": float(low), "high": float(high)}


def best_of(f, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - start)
    return best, out


def main():
    print("paired bootstrap, 10,000 resamples, best of 5")
    for n in (54, 219, 500, 1500):
        rng = np.random.default_rng(n)
        base, ft = (rng.random(n) < 0.5).astype(float), (rng.random(n) < 0.6).astype(float)
        t_scipy, ours = best_of(lambda: paired_bootstrap_ci(base, ft))
        t_numpy, loop = best_of(lambda: numpy_loop(base, ft))
        same = all(np.isclose(ours[k], loop[k], rtol=1e-12, atol=1e-15) for k in ("low", "high"))
        print(f"  {n:5} questions: scipy {t_scipy * 1e3:7.1f} ms, numpy loop {t_numpy * 1e3:7.1f} "
              f"ms, scipy/numpy {t_scipy / t_numpy:.2f}x, same interval: {same}")


if __name__ == "__main__":
    main()

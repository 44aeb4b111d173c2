"""The figures of a comparison: one bar chart per evaluated set, one figure per training run.

Legends name models and runs by the labels the caller gives (base, SFT, exp7 ...), never by
file paths. Each function returns the legend labels it drew, so a test can read them back.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

MEAN_WINDOW = 20  # steps in the moving mean drawn over per-step curves (one group a step)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def compact_png(png: bytes) -> bytes:
    """The PNG with its colours reduced to a 256-entry palette (no dithering): a chart of flat
    colours and anti-aliased lines looks the same at under half the bytes, which keeps the
    plots results/ commits small."""
    from PIL import Image  # matplotlib's own dependency

    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    image.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out, "PNG", optimize=True)
    return out.getvalue()


def save_figure(fig, path: str | Path) -> None:
    """The figure as a compact PNG at `path` (compact_png)."""
    raw = io.BytesIO()
    fig.savefig(raw, format="png", dpi=120)
    Path(path).write_bytes(compact_png(raw.getvalue()))


def _legend_labels(fig) -> list[str]:
    return [text.get_text() for ax in fig.axes if ax.get_legend() is not None
            for text in ax.get_legend().get_texts()]


def plot_set(rows: list[dict], path: str | Path, *, best_guess: dict | None = None,
             title: str | None = None) -> list[str]:
    """One bar per model (rows: model, accuracy, ci_low, ci_high, as compare_results writes
    them) with its 95% interval, and a horizontal line at the best guess's accuracy
    (best_guess: {"label", "accuracy"})."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.1 * len(rows) + 5, 4))  # room for the legend on the right
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(rows):
        err = [[100 * (r["accuracy"] - r["ci_low"])], [100 * (r["ci_high"] - r["accuracy"])]]
        ax.bar(i, 100 * r["accuracy"], yerr=err, capsize=4, color=colors[i % len(colors)],
               label=r["model"])
    if best_guess is not None:
        ax.axhline(100 * best_guess["accuracy"], color="black", linestyle="--",
                   label=f"{best_guess['label']} ({100 * best_guess['accuracy']:.1f}%)")
    ax.set_xticks(range(len(rows)), [r["model"] for r in rows], rotation=20, ha="right")
    ax.set_ylabel("accuracy (%), 95% CI")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    save_figure(fig, path)
    labels = _legend_labels(fig)
    plt.close(fig)
    return labels


def validation_points(history: list[dict], val_samples: int = 1, *, n_boot: int = 2_000,
                      seed: int = 0) -> list[tuple[int, float, float | None, float | None]]:
    """(step, accuracy, low, high) per validation: a 95% percentile bootstrap over the
    validation groups (paraphrases of one problem resampled together) when the history holds
    per-group pass counts (`group_passes`: group -> passes per question out of val_samples);
    low and high None for a history without them."""
    points = []
    rng = np.random.default_rng(seed)
    for h in history:
        groups = h.get("group_passes")
        if not groups:
            points.append((h["step"], h["accuracy"], None, None))
            continue
        passes = np.array([sum(p) for p in groups.values()], dtype=float)
        tries = np.array([len(p) * val_samples for p in groups.values()], dtype=float)
        picks = rng.integers(0, len(passes), size=(n_boot, len(passes)))
        boot = passes[picks].sum(axis=1) / tries[picks].sum(axis=1)
        low, high = np.percentile(boot, [2.5, 97.5])
        points.append((h["step"], h["accuracy"], float(low), float(high)))
    return points


def _moving_mean(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def _step_curve(log: list[dict], value) -> tuple[list[int], list[float]]:
    points = [(row["step"], value(row)) for row in log]
    points = [(s, v) for s, v in points if v is not None]
    return [s for s, _ in points], [float(v) for _, v in points]


def _truncated_share(row: dict) -> float | None:
    n = len(row.get("rewards") or [])
    return row["truncated"] / n if n and row.get("truncated") is not None else None


def plot_run(name: str, log: list[dict], path: str | Path, *, val_history: list[dict] | None = None,
             val_samples: int = 1) -> list[str]:
    """One training run's curves by step: reward, validation accuracy with its interval,
    entropy, waste share (zero-signal groups / groups generated, cumulative), and the share of
    the step's completions that hit the token limit. Per-step curves get a moving mean."""
    plt = _pyplot()
    panels = [("mean reward", lambda r: r.get("reward_mean")),
              ("validation accuracy", None),
              ("entropy", lambda r: r.get("entropy")),
              ("waste share", lambda r: r.get("waste_rate")),
              ("truncated share", _truncated_share)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 1.9 * len(panels)), sharex=True)
    for ax, (title, value) in zip(axes, panels):
        ax.set_ylabel(title, fontsize=8)
        if value is None:
            _validation_panel(ax, name, log, val_history, val_samples)
            continue
        steps, values = _step_curve(log, value)
        if not steps:
            ax.text(0.5, 0.5, "not in this log", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8)
            continue
        if title == "waste share":  # already a running share
            ax.plot(steps, values, label=name)
        else:
            ax.plot(steps, values, alpha=0.35, linewidth=0.8, label=f"{name}, per step")
            ax.plot(steps, _moving_mean(values, MEAN_WINDOW),
                    label=f"{name}, {MEAN_WINDOW}-step mean")
        ax.legend(fontsize=7)
    axes[0].set_title(name)
    axes[-1].set_xlabel("useful step")
    fig.tight_layout()
    save_figure(fig, path)
    labels = _legend_labels(fig)
    plt.close(fig)
    return labels


def _validation_panel(ax, name: str, log: list[dict], history: list[dict] | None,
                      val_samples: int) -> None:
    if history:
        points = validation_points(history, val_samples)
    else:
        points = [(s, v, None, None) for s, v in zip(*_step_curve(log, lambda r: r.get("val_accuracy")))]
    if not points:
        ax.text(0.5, 0.5, "no validation", ha="center", va="center", transform=ax.transAxes,
                fontsize=8)
        return
    steps = [p[0] for p in points]
    acc = [p[1] for p in points]
    if all(p[2] is not None for p in points):
        err = [[p[1] - p[2] for p in points], [p[3] - p[1] for p in points]]
        ax.errorbar(steps, acc, yerr=err, marker="o", capsize=3,
                    label=f"{name} (95% CI over validation groups)")
    else:
        ax.plot(steps, acc, marker="o", label=f"{name} (no interval: per-group counts not recorded)")
    ax.legend(fontsize=7)

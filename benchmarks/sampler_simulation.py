"""Generation waste of the question samplers, simulated at the study's scale, side by side.

The real DynamicSampler and QuestionSampler run against a simulated policy instead of a model:
  - 266 mixed questions, as the study screened: true base pass rates are drawn from a Beta
    prior fitted to the miniature's screening histogram (seed 0, holdout, G=4: 1/4 14.1%,
    2/4 7.3%, 3/4 5.8%, mean near 15%), and a question enters the set when 4 screening draws
    give 1-3 right, so many "mixed" questions are in truth nearly always wrong or right;
  - G=4 completions per group, batch mode (gen_batch 16), 4 informative groups per update,
    300 useful steps, the demo's settings;
  - pass rates drift as the policy learns: after every update each question's logit moves by
    a random walk step (--noise), all move by --global-gain (transfer), and the questions in the
    update by --self-gain (GRPO pushes them towards their right answers).
Each simulated world is run with every sampler (same initial pass rates), so the waste ratio
is paired. Printed: waste per sampler (mean over runs, 95% interval), the ratio of each sampler's
waste to uniform's with a bootstrap interval over worlds, and the study's measure: the share of
zero-gradient updates a plain loop (uniform draws, no dynamic sampling) would have had.

  python benchmarks/sampler_simulation.py [--runs 200] [--self-gain 0.3] [--noise 0.15]
  python benchmarks/sampler_simulation.py --scenarios     # no drift / the default / fast drift
"""
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from relrl.rl.dynamic_sampling import DynamicSampler, Group, QuestionSampler
from relrl.runtime.cli import ArgumentParser, positive_int, run_main

# Beta prior of the base model's pass rate, fitted (least squares) to the screening histogram
# above; it gives P(0/4) 68.9%, P(1/4) 13.8%, P(2/4) 8.0%, P(3/4) 5.5%, P(4/4) 3.9%.
PRIOR = (0.207, 1.135)
SAMPLERS = ("uniform", "pass-rate (v1)", "pass-rate", "oracle")
SCENARIOS = {"no drift": dict(self_gain=0.0, global_gain=0.0, noise=0.0),
             "default": dict(self_gain=0.3, global_gain=0.01, noise=0.15),
             "fast drift": dict(self_gain=0.6, global_gain=0.02, noise=0.3)}


@dataclass(frozen=True)
class Setup:
    questions: int = 266
    group_size: int = 4
    screen_samples: int = 4
    useful_steps: int = 300
    grad_accum: int = 4
    gen_batch: int = 16
    max_resample: int = 10
    max_total_attempts: int = 1000
    self_gain: float = 0.3
    global_gain: float = 0.01
    noise: float = 0.15
    no_answer: float = 0.1  # share of wrong completions without an answer (reward 0, not 0.01)


def world(seed: int, s: Setup) -> tuple[np.ndarray, np.ndarray]:
    """(initial logits, screening pass counts) of `s.questions` screened-mixed questions."""
    rng = np.random.default_rng([seed, 0])
    p, counts = [], []
    while len(p) < s.questions:
        q = rng.beta(*PRIOR, size=4 * s.questions)
        c = rng.binomial(s.screen_samples, q)
        keep = (c > 0) & (c < s.screen_samples)
        p.extend(q[keep]), counts.extend(c[keep])
    p = np.clip(np.asarray(p[:s.questions]), 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p)), np.asarray(counts[:s.questions])


class Oracle(QuestionSampler):
    """Knows every question's true pass rate now and draws the k likeliest to be informative
    (ties broken at random): a bound no sampler that learns from groups can beat."""

    def __init__(self, n, seed, logits, group_size):
        super().__init__(n, seed)
        self.logits, self.group_size = logits, group_size

    def draw(self, k):
        p = 1 / (1 + np.exp(-self.logits))
        informative = 1 - p**self.group_size - (1 - p) ** self.group_size
        order = np.lexsort((self.rng.random(self.n_questions), -informative))
        return [int(i) for i in order[:k]]


def make_sampler(name: str, n: int, seed: int, s: Setup, counts: np.ndarray,
                 logits: np.ndarray) -> QuestionSampler:
    if name == "oracle":
        return Oracle(n, seed, logits, s.group_size)
    if name == "uniform":
        return QuestionSampler(n, seed)
    qs = QuestionSampler(n, seed, pass_rate_aware=True, group_size=s.group_size,
                         scheme="plug-in" if name == "pass-rate (v1)" else "predictive")
    for i, c in enumerate(counts):  # as the trainer does: screening is the first evidence
        qs.record(i, int(c), s.screen_samples)
    return qs


def simulate(seed: int, name: str, s: Setup) -> dict:
    """One training run of one sampler in world `seed`; the counters, as statistics.json."""
    logits, counts = world(seed, s)
    logits = logits.copy()
    rng = np.random.default_rng([seed, 1])  # the policy's draws: same stream for every sampler

    def rollout(indices, first_attempt):
        p = 1 / (1 + np.exp(-logits[indices]))
        right = rng.random((len(indices), s.group_size)) < p[:, None]
        # the study's tiers: a wrong number earns 0.01, no answer 0, so an all-wrong group
        # with an unanswered completion still carries signal (as in the demo's runs)
        silent = rng.random((len(indices), s.group_size)) < s.no_answer
        rewards = np.where(right, 1.0, np.where(silent, 0.0, 0.01))
        return [Group(int(i), first_attempt + k, rewards[k].tolist(), list(map(bool, right[k])))
                for k, i in enumerate(indices)]

    # groups judged by reward, as the study's runs were and as results/sampler-simulation/ has it
    sampler = DynamicSampler(rollout, make_sampler(name, s.questions, seed, s, counts, logits),
                             mode="batch", gen_batch=s.gen_batch,
                             max_attempts_per_step=s.max_resample,
                             max_total_attempts=s.max_total_attempts, informative_by="reward")
    drift = np.random.default_rng([seed, 2])
    while sampler.counters.useful_steps < s.useful_steps and sampler.attempts_left > 0:
        kept = sampler.collect(s.grad_accum)
        # the update: every pass rate drifts, the trained questions move towards right
        logits += s.global_gain + s.noise * drift.standard_normal(s.questions)
        for g in kept:
            logits[g.index] += s.self_gain
    return sampler.counters.to_dict()


def interval(values: np.ndarray, seed: int = 0, n_boot: int = 5000) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean over simulated worlds."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, (n_boot, values.size))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def study(runs: int, s: Setup, first_seed: int = 0) -> dict:
    """Waste of every sampler over `runs` worlds, and each one's ratio to uniform."""
    rates = {name: np.array([simulate(first_seed + r, name, s)["waste_rate"] for r in range(runs)])
             for name in SAMPLERS}
    out = {"setup": s.__dict__, "runs": runs, "samplers": {}}
    for name, x in rates.items():
        row = {"waste_rate": float(x.mean()), "waste_ci": interval(x)}
        if name != "uniform":
            ratio = x / rates["uniform"]
            row.update(ratio=float(ratio.mean()), ratio_ci=interval(ratio),
                       pooled_ratio=float(x.sum() / rates["uniform"].sum()))
        out["samplers"][name] = row
    # A plain loop draws uniformly and updates on every group: its zero-gradient share is
    # the uniform sampler's waste rate (the trajectories differ only in which groups update).
    out["plain_loop_zero_gradient_share"] = out["samplers"]["uniform"]["waste_rate"]
    return out


def show(title: str, out: dict) -> None:
    print(f"\n{title}: {out['runs']} simulated runs, {out['setup']['questions']} mixed questions, "
          f"G={out['setup']['group_size']}, {out['setup']['useful_steps']} useful steps")
    print(f"  {'sampler':<16} {'waste (95% CI)':<24} {'ratio to uniform (95% CI)':<28}")
    for name, r in out["samplers"].items():
        waste = f"{100 * r['waste_rate']:.1f}% ({100 * r['waste_ci'][0]:.1f}-{100 * r['waste_ci'][1]:.1f})"
        ratio = "-" if "ratio" not in r else \
            f"{r['ratio']:.2f} ({r['ratio_ci'][0]:.2f}-{r['ratio_ci'][1]:.2f})"
        print(f"  {name:<16} {waste:<24} {ratio:<28}")
    print(f"  zero-gradient updates a plain loop would have had: "
          f"{100 * out['plain_loop_zero_gradient_share']:.1f}%")


def parse_args(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=positive_int("--runs"), default=200)
    d = Setup()
    p.add_argument("--self-gain", type=float, default=d.self_gain)
    p.add_argument("--global-gain", type=float, default=d.global_gain)
    p.add_argument("--noise", type=float, default=d.noise)
    p.add_argument("--scenarios", action="store_true", help="the three drift scenarios")
    p.add_argument("--json", default=None, help="also write the numbers to this file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.scenarios:
        results = {k: study(args.runs, Setup(**v)) for k, v in SCENARIOS.items()}
    else:
        results = {"custom": study(args.runs, Setup(self_gain=args.self_gain,
                                                    global_gain=args.global_gain, noise=args.noise))}
    for title, out in results.items():
        show(title, out)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)

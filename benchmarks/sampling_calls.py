"""Generation calls per update and sequences per call, step mode against batch mode.

The real DynamicSampler draws from 266 questions; a simulated rollout makes each group
informative with probability p (G=4, 4 informative groups per update, --gen-batch 8, 10 draws
per step), so the figures are what the sampler's own logic asks of the rollout engine. On a GPU
a call lasts about as long as its longest completion, so calls per update is what rollout time
scales with (docs/engines.md, "GPU memory, sleep mode and batch mode").

  python benchmarks/sampling_calls.py [--updates 4000] [--rates 0.77 0.58]
"""
import argparse
import random
import sys

from relrl.rl.dynamic_sampling import DynamicSampler, Group, QuestionSampler

GROUPS_PER_UPDATE, G = 4, 4


def calls_per_update(mode: str, rate: float, updates: int, seed: int = 0) -> tuple[float, float]:
    """(generation calls per update, sequences per call) of `updates` updates."""
    rng = random.Random(seed)
    sizes = []

    def rollout(indices, first):
        sizes.append(G * len(indices))
        groups = []
        for k, index in enumerate(indices):
            rewards = [1.0] + [0.0] * (G - 1) if rng.random() < rate else [0.0] * G
            groups.append(Group(index, first + k, rewards, [r > 0 for r in rewards]))
        return groups

    sampler = DynamicSampler(rollout, QuestionSampler(266, seed), mode=mode, gen_batch=8,
                             max_attempts_per_step=10, max_total_attempts=10**9)
    for _ in range(updates):
        sampler.collect(GROUPS_PER_UPDATE)
    return len(sizes) / updates, sum(sizes) / len(sizes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=4000)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.77, 0.58],
                        help="informative rates (the study: 0.77 with dynamic sampling)")
    args = parser.parse_args(argv)
    print("rate  mode   calls/update  sequences/call")
    for rate in args.rates:
        for mode in ("step", "batch"):
            calls, seqs = calls_per_update(mode, rate, args.updates)
            print(f"{rate:.2f}  {mode:5}  {calls:12.2f}  {seqs:14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

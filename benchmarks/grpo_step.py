"""Seconds per useful GRPO step, generated tokens per second and waste, side by side in one run.

1. Speed on the same model, questions, G, lengths, reward and LoRA:
   - the study's loop: one question per step, one `generate` call per completion (HF sampling),
     redraw while the rewards are all equal, REINFORCE on group-normalised rewards with a full
     log-softmax and one backward pass per completion, an optimiser step every 4 useful steps;
   - this loop (relrl.rl.grpo_trainer), step mode (the study's dynamic sampling) and batch mode,
     the latter also with the `hf-merged` engine (rollouts on a copy of the policy with its
     LoRA merged; TRL, like `hf`, generates through peft's unmerged layers);
   - TRL's GRPOTrainer (no dynamic sampling: its useful steps are its informative groups), when
     `trl` is installed (pip install -r benchmarks/requirements.txt); it generates as many
     groups as this loop's batch mode did under the rule (--trl-groups to fix the number), so
     both amortise their start over as much work and TRL's useful share rests on as many groups.
   A "useful step" is one informative group, as the study counted them. Which groups are
   informative is a rule (relrl.rl.dynamic_sampling.waste_kind): `correct` (some answers right
   and some wrong: this loop's default with the grader) or `reward` (any two rewards differ:
   the study's and TRL's). Every loop runs under each rule in --rules, and ratios are printed
   only between loops under the same rule, so they measure speed, not the rule.
2. Waste (dropped groups / groups generated) with and without the pass-rate-aware sampler: on
   the model, and on a simulated question set whose pass rates are mostly 0 or 1 (as after the
   study's screening once training moves on).

    python benchmarks/grpo_step.py [--model tiny-random] [--reward digit-share] [--steps 16]
    python benchmarks/grpo_step.py --only waste --model tiny --reward grader --max-new-tokens 160
    python benchmarks/grpo_step.py --model tiny --reward grader --rules correct reward
"""


import contextlib
import importlib.util
import io
import math
import random
import tempfile
import time

import numpy as np
import torch

from relrl.data.prompting import build_prompt
from relrl.engines import make_engine, stop_token_ids
from relrl.grading.rewards import digit_share_reward, grader_reward
from relrl.modeling.loading import attach_lora, device_of
from relrl.models.by_name import load_model
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES
from relrl.rl.dynamic_sampling import INFORMATIVE_BY, DynamicSampler, Group, QuestionSampler, waste_kind
from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_loss import group_advantages
from relrl.rl.grpo_trainer import GRPOTrainer
from relrl.runtime.cli import ArgumentParser, positive_int, run_main


def question_rows(n: int) -> list[dict]:
    rows = generate_rows(list(FAMILIES.values()), n, seed=0, paraphrases=0)
    return [{"id": f"b{i}", "question": r["question"], "answer": str(r["answer"])}
            for i, r in enumerate(rows)]


def policy(args):
    torch.manual_seed(0)
    model, tokenizer = load_model(args.model)
    return attach_lora(model, r=32, alpha=32), tokenizer


def timed(fn):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def informative(scores: list[tuple[float, bool]], rule: str) -> bool:
    """Whether a group of (reward, correct) carries signal under `rule` (waste_kind's)."""
    return waste_kind([r for r, _ in scores], [c for _, c in scores], informative_by=rule) is None


def study_loop(args, rows, reward_fn, rule):
    """(useful steps, generated tokens, groups generated) of the study's loop, re-implemented
    from its description; a group trains when it is informative under `rule`."""
    model, tok = policy(args)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.learning_rate, weight_decay=0.1)
    stops, device, draw = stop_token_ids(tok), device_of(model), random.Random(0)
    useful = tokens = attempts = 0
    while useful < args.steps and attempts < args.max_attempts:
        row = draw.choice(rows)
        attempts += 1
        ids = tok(build_prompt(tok, row["question"]), return_tensors="pt",
                  add_special_tokens=False)["input_ids"].to(device)
        completions = []
        for _ in range(args.G):  # one generate call per completion
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 do_sample=True, temperature=1.0, top_p=0.95, top_k=0,
                                 max_new_tokens=args.max_new_tokens, eos_token_id=stops,
                                 pad_token_id=tok.pad_token_id)
            completions.append(out[0, ids.shape[1]:])
        tokens += sum(len(c) for c in completions)
        scores = [reward_fn(tok.decode(c, skip_special_tokens=True), row) for c in completions]
        if not informative(scores, rule):
            continue  # dynamic sampling: draw another question
        rewards = [r for r, _ in scores]
        advantages = group_advantages(torch.tensor([rewards]))[0]
        model.train()
        for completion, advantage in zip(completions, advantages):
            full = torch.cat([ids[0], completion]).unsqueeze(0)
            logits = model(input_ids=full).logits[0, ids.shape[1] - 1:-1].float()
            logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).mean()
            (-(advantage * logp) / (args.G * 4)).backward()
        model.eval()
        useful += 1
        if useful % 4 == 0:
            torch.nn.utils.clip_grad_norm_(params, 0.1)
            optimizer.step()
            optimizer.zero_grad()
    return useful, tokens, attempts


def our_loop(args, rows, reward_fn, **overrides):
    model, tok = policy(args)
    tokens = {"n": 0}
    with tempfile.TemporaryDirectory() as out:
        settings = dict(model=args.model, reward=args.reward, output_dir=out,
                        num_generations=args.G, max_new_tokens=args.max_new_tokens,
                        max_useful_steps=args.steps,
                        max_total_attempts=args.max_attempts, learning_rate=args.learning_rate,
                        save_every=10**6, train_micro_batch=args.train_micro_batch)
        cfg = GRPOConfig(**{**settings, **overrides})
        trainer = GRPOTrainer(cfg, model, tok, rows, reward_fn=reward_fn,
                              engine=make_engine(cfg.rollout_engine, model, tok))
        rollout = trainer.sampler.rollout

        def counting(indices, first):
            groups = rollout(indices, first)
            tokens["n"] += sum(len(c.token_ids) for g in groups for c in g.payload)
            return groups

        trainer.sampler.rollout = counting
        with contextlib.redirect_stdout(io.StringIO()):
            stats = trainer.run()
    return stats["useful_steps"], tokens["n"], stats["total_attempts"], stats["waste_rate"]


def trl_loop(args, rows, reward_fn, rule, groups: int):
    from datasets import Dataset
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer as TRLTrainer

    model, tok = policy(args)
    seen, tokens = [], {"n": 0}

    def reward(completions, completion_ids, answer, **_):
        out = [reward_fn(c, {"answer": a}) for c, a in zip(completions, answer)]
        seen.extend(out)
        tokens["n"] += sum(len(ids) for ids in completion_ids)
        return [r for r, _ in out]

    data = Dataset.from_list([{"prompt": build_prompt(tok, r["question"]), "answer": r["answer"]}
                              for r in rows])
    with tempfile.TemporaryDirectory() as out:
        config = TRLConfig(
            output_dir=out, use_cpu=not torch.cuda.is_available(), bf16=False,
            per_device_train_batch_size=args.G, num_generations=args.G,
            gradient_accumulation_steps=4, max_steps=math.ceil(groups / 4),
            max_completion_length=args.max_new_tokens, learning_rate=args.learning_rate,
            weight_decay=0.1, warmup_steps=0.1, max_grad_norm=0.1, beta=0.0, epsilon=0.2,
            epsilon_high=0.28, loss_type="dapo", temperature=1.0, top_p=0.95,
            gradient_checkpointing=False, save_strategy="no", report_to="none",
            logging_steps=10**6, disable_tqdm=True, seed=0)
        trainer = TRLTrainer(model=model, reward_funcs=reward, args=config, train_dataset=data,
                             processing_class=tok)
        with contextlib.redirect_stdout(io.StringIO()):
            trainer.train()
    groups = [seen[i:i + args.G] for i in range(0, len(seen), args.G)]
    # no dynamic sampling: its useful steps are the groups informative under the rule
    return sum(informative(g, rule) for g in groups), tokens["n"], len(groups)


def speed(args, rows, reward_fn):
    print(f"speed: {args.model}, {len(rows)} questions, G={args.G}, max_new_tokens "
          f"{args.max_new_tokens}, {args.steps} useful steps, 4 groups per update, LoRA r=32, "
          f"this loop's micro-batch {args.train_micro_batch}, torch threads "
          f"{torch.get_num_threads()}")
    trl = importlib.util.find_spec("trl") is not None
    if not trl:
        print("(trl not installed: pip install -r benchmarks/requirements.txt to compare)")
    for rule in args.rules:
        if rule == "correct" and args.reward == "digit-share":
            print("\nrule correct: skipped (the toy reward is never correct; use --reward grader)")
            continue
        speed_under(args, rows, reward_fn, rule, trl)


MERGED = "this loop, batch, hf-merged"


def speed_under(args, rows, reward_fn, rule, trl):
    """Every loop with groups judged by `rule`, and the ratios between them."""
    print(f"\nrule {rule}: a group is informative when "
          + ("some answers are right and some wrong" if rule == "correct" else "its rewards differ"))
    print(f"{'loop':<28} {'useful':>6} {'groups':>6} {'s/useful step':>14} {'gen tok/s':>10}")
    runs = {"study: 1 call per completion": lambda: study_loop(args, rows, reward_fn, rule)[:3],
            "this loop, step mode": lambda: our_loop(args, rows, reward_fn,
                                                     informative_by=rule)[:3],
            "this loop, batch mode": lambda: our_loop(args, rows, reward_fn, informative_by=rule,
                                                      sampling_mode="batch", gen_batch=8)[:3],
            MERGED: lambda: our_loop(args, rows, reward_fn, informative_by=rule,
                                     sampling_mode="batch", gen_batch=8,
                                     rollout_engine="hf-merged")[:3]}
    if trl:
        runs["TRL GRPOTrainer"] = lambda: trl_loop(args, rows, reward_fn, rule, trl_groups)
    per_step, trl_groups = {}, args.trl_groups
    for name, run in runs.items():
        (useful, tokens, groups), seconds = timed(run)
        if name == "this loop, batch mode" and not args.trl_groups:
            trl_groups = groups  # read when TRL's run starts, after this one
        per_step[name] = seconds / useful if useful else None  # no useful step: no ratio
        shown = f"{per_step[name]:>14.3f}" if useful else f"{'-':>14}"
        print(f"{name:<28} {useful:>6} {groups:>6} {shown} {tokens / seconds:>10.1f}")

    def ratio(label, slow, fast):
        if per_step.get(slow) and per_step.get(fast):
            print(f"rule {rule}: {label}: {per_step[slow] / per_step[fast]:.2f}x")
        elif slow in per_step and fast in per_step:
            print(f"rule {rule}: {label}: - (a loop made no useful step; raise --max-attempts "
                  "or --max-new-tokens)")

    study = "study: 1 call per completion"
    for name in list(per_step)[1:]:
        ratio(f"speed-up per useful step, {name} vs the study's loop", study, name)
    for name in ("this loop, step mode", "this loop, batch mode", MERGED):
        ratio(f"{name} vs TRL GRPOTrainer", "TRL GRPOTrainer", name)
    ratio("hf-merged vs hf rollouts, batch mode", "this loop, batch mode", MERGED)


def simulated_waste(pass_rate_aware: bool, seed: int = 0) -> float:
    """Waste over 400 groups of 4 on 100 questions, 70 of which are never or always solved."""
    true_p = np.array([0.0] * 35 + [1.0] * 35 + [0.3, 0.5, 0.7] * 10)
    world = np.random.default_rng(seed)

    def rollout(indices, first):
        groups = []
        for k, i in enumerate(indices):
            correct = list(world.random(4) < true_p[i])
            groups.append(Group(i, first + k, [float(c) for c in correct], correct))
        return groups

    sampler = DynamicSampler(rollout, QuestionSampler(100, seed, pass_rate_aware=pass_rate_aware),
                             max_attempts_per_step=100, max_total_attempts=400)
    while sampler.attempts_left > 0:
        sampler.collect(4)
    return sampler.counters.waste_rate


def waste(args, rows, reward_fn):
    print(f"\nwaste rate (dropped groups / groups generated), {args.waste_attempts} groups each, "
          f"{len(rows)} questions")
    for label, fn in (
            ("simulated, 70% of questions at pass rate 0 or 1",
             lambda aware: np.mean([simulated_waste(aware, s) for s in range(5)])),
            (f"{args.model}, {args.reward} reward",
             lambda aware: our_loop(args, rows, reward_fn, max_useful_steps=10**6,
                                    max_total_attempts=args.waste_attempts,
                                    pass_rate_sampler=aware)[3])):
        uniform, aware = fn(False), fn(True)
        print(f"{label}: uniform {uniform:.1%}, pass-rate sampler {aware:.1%}, "
              f"ratio {aware / uniform if uniform else float('nan'):.2f}")
    if args.reward == "digit-share":
        print("(the toy reward is never 'correct', so pass rates cannot tell questions apart: "
              "expect no gain on the model here; run --model tiny --reward grader)")


def main(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny-random", help="tiny-random (default), tiny, or a path")
    p.add_argument("--reward", choices=("digit-share", "grader"), default="digit-share",
                   help="digit-share (a random model never earns the grader's reward) or grader")
    p.add_argument("--questions", type=positive_int("--questions"), default=16)
    p.add_argument("--steps", type=positive_int("--steps"), default=16,
                   help="useful steps per loop")
    p.add_argument("-G", type=positive_int("-G"), default=4)
    p.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=32)
    p.add_argument("--max-attempts", type=positive_int("--max-attempts"), default=400)
    p.add_argument("--waste-attempts", type=positive_int("--waste-attempts"), default=64)
    p.add_argument("--learning-rate", type=float, default=1e-5)
    p.add_argument("--train-micro-batch", type=positive_int("--train-micro-batch"), default=4,
                   help="completions per forward/backward pass in this loop (4, its default)")
    p.add_argument("--threads", type=positive_int("--threads"), default=None,
                   help="torch CPU threads (default: torch's choice)")
    p.add_argument("--rules", nargs="+", choices=INFORMATIVE_BY, default=list(INFORMATIVE_BY),
                   help="informative-group rules to run every loop under (default both)")
    p.add_argument("--trl-groups", type=positive_int("--trl-groups"), default=None,
                   help="groups TRL generates (default: as many as this loop's batch mode did "
                        "under the rule; rounded up to 4 a step)")
    p.add_argument("--only", choices=("speed", "waste"), default=None,
                   help="run one of the two parts")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = question_rows(args.questions)
    reward_fn = digit_share_reward if args.reward == "digit-share" else grader_reward(0.05)
    if args.only != "waste":
        speed(args, rows, reward_fn)
    if args.only != "speed":
        waste(args, rows, reward_fn)
    return 0


if __name__ == "__main__":
    run_main(main)

"""--val-samples K (validation accuracy over K completions per question) and
--pass-rate-scheme, on tiny-random."""
from test_grpo_trainer import ROWS, config, letters, tiny_policy

from relrl.data.prompting import build_prompt
from relrl.engines import question_seed
from relrl.engines.hf import generate
from relrl.rl.grpo_main import build_parser
from relrl.rl.grpo_trainer import GRPOTrainer


def test_validation_accuracy_counts_every_one_of_k_samples(tmp_path):
    model, tokenizer = tiny_policy()
    t = GRPOTrainer(config(tmp_path, val_samples=3), model, tokenizer, ROWS, ROWS[:3],
                    reward_fn=letters)
    prompts = [build_prompt(tokenizer, r["question"]) for r in ROWS[:3]]
    seeds = [question_seed(0, r["id"]) for r in ROWS[:3]]
    groups = generate(model, tokenizer, prompts, 3, seeds, t.sampling)  # the same seeds, K=3
    passes = [sum(bool(letters(c.text, r)[1]) for c in g) for g, r in zip(groups, ROWS[:3])]
    assert t.validate() == passes
    t.record_validation()
    entry = t.stats["val_history"][-1]
    assert entry["accuracy"] == sum(passes) / 9
    assert entry["group_passes"] == {str(r.get("group", r["id"])): [c] for r, c in zip(ROWS[:3], passes)}


def test_new_settings_leave_old_run_fingerprints_alone(tmp_path):
    assert "val_samples" not in config(tmp_path).settings()
    assert "pass_rate_scheme" not in config(tmp_path).settings()
    new = config(tmp_path, val_samples=4, pass_rate_scheme="predictive").settings()
    assert new["val_samples"] == 4 and new["pass_rate_scheme"] == "predictive"


def test_flags_reach_the_config_and_the_sampler(tmp_path):
    cfg, _ = build_parser("exp10").parse(
        ["--model", "tiny-random", "--dataset", "x.jsonl", "--output-dir", str(tmp_path),
         "--val-samples", "4", "--pass-rate-sampler", "--pass-rate-scheme", "predictive"])
    assert (cfg.val_samples, cfg.pass_rate_scheme) == (4, "predictive")
    model, tokenizer = tiny_policy()
    rows = [{**ROWS[0], "base_score": 2, "base_samples": 4}, *ROWS[1:]]
    t = GRPOTrainer(config(tmp_path, pass_rate_sampler=True, pass_rate_scheme="predictive"),
                    model, tokenizer, rows, reward_fn=letters)
    assert t.questions.scheme == "predictive" and t.questions.history == {"0": [[2, 4]]}
    assert t.questions.draw(1) == [0]  # a 2/4 question beats three unseen ones

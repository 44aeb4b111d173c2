"""demo.py passes --tolerance-rule to every stage that grades (the tiny model's check,
screening, SFT, the three GRPO runs, every evaluation); under the study's rule the commands stay
as they were, and a run under another rule keeps out of the study-rule run's folders."""
import pytest

import demo

GRADING = ("relrl.models.tiny_build", "screen_v4.py", "sft_qwen3_kfold.py", "grpo_exp7_dynamic.py",
           "grpo_exp10_nosft.py", "evaluate_single.py", "evaluate_finetuned_only.py")


def commands(tmp_path, monkeypatch, rule: str) -> list[list[str]]:
    seen = []
    monkeypatch.setattr(demo.Demo, "run", lambda self, stage, args, done=None, work=None, processes=1:
                        seen.append([str(a) for a in args]))
    monkeypatch.setattr(demo.Demo, "run_side_by_side", lambda self, jobs, lanes=None:
                        seen.extend([str(a) for a in job[1]] for job in jobs))
    monkeypatch.setattr(demo.Demo, "models", lambda self: {"SFT": tmp_path / "sft",
                                                           "GRPO": tmp_path / "grpo"})
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=2,
                  tolerance_rule=rule)
    d.tiny(), d.screen(), d.train()
    monkeypatch.setattr(demo.Demo, "heldout_from_holdout", lambda self: None)
    d.evaluate()
    return seen


def script_of(command: list[str]) -> str:
    return next(part.rsplit("/", 1)[-1] for part in command if part.endswith(GRADING))


def test_every_grading_stage_gets_the_rule(tmp_path, monkeypatch):
    seen = commands(tmp_path, monkeypatch, "complement")
    assert {script_of(c) for c in seen} == set(GRADING)
    for command in seen:
        at = command.index("--tolerance-rule")
        assert command[at + 1] == "complement", command


def test_the_study_rule_leaves_the_commands_as_they_were(tmp_path, monkeypatch):
    seen = commands(tmp_path, monkeypatch, "study")
    assert {script_of(c) for c in seen} == set(GRADING)
    assert not any("--tolerance-rule" in command for command in seen)


@pytest.mark.parametrize("argv, suffix", [
    ([], ""), (["--fast"], "-fast"), (["--tolerance-rule", "complement"], "-complement"),
    (["--fast", "--tolerance-rule", "complement"], "-fast-complement"),
])
def test_default_folders_keep_rules_apart(argv, suffix):
    args = demo.parse_args(argv)
    name = "fast" if "--fast" in argv else "full"
    assert demo.folder_suffix(args, name, replicated=False) == suffix
    assert demo.folder_suffix(args, "replication-fast" if "--fast" in argv else "replication",
                              replicated=True) == suffix

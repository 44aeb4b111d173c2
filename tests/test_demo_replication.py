"""demo.py --seeds: the replicated study's plumbing, without running a model (the stages are
replaced by stubs; tests/test_demo.py runs the real FAST demo)."""
import dataclasses
import json

import pytest
from test_replication_report import write_fake_seed

import demo
from relrl.runtime.cli import UsageError


def test_seeds_are_parsed_and_bad_lists_refused(capsys):
    assert demo.parse_args(["--seeds", "2,3,4"]).seeds == [2, 3, 4]
    for bad in ("2,x", "2,2", "", "-1"):
        with pytest.raises(SystemExit) as stop:
            demo.parse_args(["--seeds", bad])
        assert stop.value.code == 2 and "--seeds" in capsys.readouterr().err
    with pytest.raises(UsageError, match="--seed and --seeds"):
        demo.main(["--seeds", "2", "--seed", "1"])


def test_make_demo_commands_are_unchanged_and_replication_adds_its_settings(tmp_path):
    one = demo.Demo(False, 0, tmp_path, tmp_path, 2)
    assert one.config == "full" and list(one.eval_sets()) == ["train", "holdout", "ood"]
    assert one.eval_args("heldout") == one.eval_args("ood") == ["--seed", 0]
    assert one.replication_train_args() == one.scheme_args() == []
    rep = demo.Demo(False, 3, tmp_path, tmp_path, 2, "replication")
    assert rep.cfg.n_master == 2800 and rep.cfg.grpo_steps == demo.recipe("full").grpo_steps
    assert rep.eval_args("heldout") == ["--seed", 1003, "--samples", 4]
    assert rep.eval_args("retention") == ["--seed", 1003, "--samples", 4]
    assert rep.eval_args("ood") == ["--seed", 1003]
    assert rep.replication_train_args() == ["--val-samples", 4, "--informative-by", "reward"]
    assert rep.scheme_args() == ["--pass-rate-scheme", "predictive"]
    assert set(rep.eval_sets()) == {"train", "holdout", "ood", "heldout", "retention"}
    assert rep.eval_sets()["retention"] == tmp_path / "data" / "retention.jsonl"
    fewer = demo.Demo(False, 3, tmp_path, tmp_path, 2, "replication",
                      settings=dataclasses.replace(rep.cfg, retention_samples=1))
    assert fewer.eval_args("retention") == ["--seed", 1003]
    assert fewer.eval_args("heldout") == ["--seed", 1003, "--samples", 4]


@pytest.mark.parametrize("config, every", [("full", 50), ("replication", 100)])
def test_training_resumes_and_validates_every_50_steps_in_make_demo_and_100_in_the_replication(
        tmp_path, monkeypatch, config, every):
    commands = []
    monkeypatch.setattr(demo.Demo, "run", lambda self, stage, args, *a, **k: commands.append(args))
    monkeypatch.setattr(demo.Demo, "run_side_by_side",
                        lambda self, jobs, lanes=None: commands.extend(job[1] for job in jobs))
    demo.Demo(False, 2, tmp_path, tmp_path, 2, config).train()
    grpo = [[str(a) for a in cmd] for cmd in commands if "grpo" in str(cmd[0])]
    assert len(grpo) == 3 and len(commands) == 4  # SFT, then the three GRPO runs
    assert all("--resume" in map(str, cmd) for cmd in commands)  # a stopped run carries on
    for cmd in grpo:
        assert cmd[cmd.index("--val-every") + 1] == cmd[cmd.index("--save-every") + 1] == str(every)


def test_retention_set_is_written_from_the_holdout_screening(tmp_path):
    rows = [{"id": f"q{i}", "group": f"g{i}", "question": f"Q{i}?", "answer": "1"} for i in range(4)]
    (tmp_path / "data").mkdir()
    (tmp_path / "screen_holdout").mkdir()
    (tmp_path / "data" / "holdout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scored = [{**r, "base_score": s, "base_samples": 4} for r, s in zip(rows, (1, 4, 0, 2))]
    (tmp_path / "screen_holdout" / "mixed.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in scored if 0 < r["base_score"] < 4))
    (tmp_path / "screen_holdout" / "non_mixed.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in scored if r["base_score"] in (0, 4)))
    demo.Demo(False, 2, tmp_path, tmp_path, 1, "replication").retention_set()
    kept = [json.loads(l) for l in (tmp_path / "data" / "retention.jsonl").read_text().splitlines()]
    assert [(r["id"], r["base_score"]) for r in kept] == [("q1", 4), ("q3", 2)]


def test_seeds_run_each_seed_into_its_folder_then_pool(tmp_path, monkeypatch):
    calls = []

    def stage(name):
        def run(self):
            calls.append((name, self.seed, self.config, self.out.name, self.work.name))
            if name == "report":
                write_fake_seed(self.out, self.seed)
        return run

    for name in demo.STAGES:
        monkeypatch.setattr(demo.Demo, name, stage(name))
    out, work = tmp_path / "results", tmp_path / "runs"
    assert demo.main(["--seeds", "2,3", "--results-dir", str(out), "--work-dir", str(work)]) == 0
    assert [c[:2] for c in calls] == [(s, seed) for seed in (2, 3) for s in demo.STAGES]
    assert {c[2:] for c in calls if c[1] == 3} == {("replication", "seed-3", "seed-3")}
    pooled = json.loads((out / "pooled.json").read_text())
    assert pooled["seeds"] == [2, 3] and pooled["primary"]["pooled"]["groups"] == 10
    assert (out / "report.md").read_text().startswith("# Miniature study, replicated (seeds 2, 3)")


@pytest.mark.parametrize("seeds, spliced", [("2,3,4", True), ("2,3", False)])
def test_only_the_confirmatory_seeds_write_their_report_into_results_md(tmp_path, monkeypatch,
                                                                        seeds, spliced):
    monkeypatch.setattr(demo, "ROOT", tmp_path)
    for name in demo.STAGES:
        monkeypatch.setattr(demo.Demo, name, (lambda self: write_fake_seed(self.out, self.seed))
                            if name == "report" else (lambda self: None))
    before = f"# Results\n{demo.REPLICATION_START}\nnot in yet\n{demo.REPLICATION_END}\nKeep me.\n"
    (tmp_path / "RESULTS.md").write_text(before)
    assert demo.main(["--seeds", seeds]) == 0
    report = (tmp_path / "results" / "demo-replication" / "report.md").read_text()
    text = (tmp_path / "RESULTS.md").read_text()
    if not spliced:
        assert text == before
        return
    assert "not in yet" not in text and text.endswith(f"{demo.REPLICATION_END}\nKeep me.\n")
    # the report two heading levels down, every other line as written
    assert f"### Miniature study, replicated (seeds {seeds.replace(',', ', ')})" in text
    assert all(line in text for line in report.splitlines() if not line.startswith("#"))


def test_stop_after_skips_the_pooled_report(tmp_path, monkeypatch):
    for name in demo.STAGES:
        monkeypatch.setattr(demo.Demo, name, lambda self: None)
    out = tmp_path / "results"
    demo.main(["--seeds", "2", "--fast", "--stop-after", "train", "--results-dir", str(out),
               "--work-dir", str(tmp_path / "runs")])
    assert (out / "seed-2").is_dir() and not (out / "pooled.json").exists()

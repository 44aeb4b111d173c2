"""The demo pipeline's recipes (recipes/demo/*.yaml) and their schema (study/pipeline_config.py):
the built-in recipes hold the values the study ran with, a bad recipe is refused in one line
naming file, line and key, and a run's pipeline.yaml reruns it without redoing finished stages."""
import subprocess
import sys
from dataclasses import asdict, fields

import pytest
from conftest import ROOT

import demo
from relrl.runtime.cli import UsageError
from study import pipeline_config
from study.pipeline_config import PipelineConfig

# The values demo.py ran each pipeline with before they moved into recipes; the replication's
# are the ones results/demo-replication/PREREGISTRATION.md froze. The scripts get each value as
# the text of a flag, so the text must stay too: 2e-4 as 0.0002, 4 as 4 and not 4.0.
MINIATURE = dict(n_master=1560, paraphrases=2, val_frac=0.08, holdout_frac=0.6,
                 ood_topics="growth,spares,importance", screen_samples=4, max_new_tokens=160,
                 sft_epochs=2, sft_lr=2e-4, grpo_steps=300, grpo_val_every=50, grpo_lr=2e-3,
                 grpo_warm_lr=1e-3, grpo_grad_accum=4)
FAST = dict(n_master=100, paraphrases=1, val_frac=0.15, holdout_frac=0.2,
            ood_topics="growth,spares,importance", screen_samples=4, max_new_tokens=160,
            sft_epochs=1, sft_lr=2e-4, grpo_steps=4, grpo_val_every=2, grpo_lr=2e-3,
            grpo_warm_lr=1e-3, grpo_grad_accum=4)
REGISTERED = dict(eval_samples=4, val_samples=4, eval_seed_offset=1000, retention_min_score=2,
                  pass_rate_scheme="predictive", informative_by="reward", tools="none")
# issue 30's settings, at the values that leave a pipeline as it was
# issue 46's, at the values that leave a pipeline as it was
ISSUE46_OFF = dict(sft_steps=None, ood_families=None, exclude_pretraining=False, reworded_rows=None,
                   retention_disjoint=False)
V2_OFF = dict(model="tiny", families=None, sft_topics=None, sft_form="tool", plain_grpo=False,
              matched_arms=False, retention_samples=None, warm_start=True, eval_sets=None,
              **ISSUE46_OFF)
REGISTERED = {**REGISTERED, **V2_OFF}
OFF = dict(eval_samples=1, val_samples=1, eval_seed_offset=0, retention_min_score=None,
           pass_rate_scheme=None, informative_by=None, tools="none", **V2_OFF)
# the redone replication's, frozen by results/demo-replication-v2/PREREGISTRATION.md
V2 = dict(n_master=2400, paraphrases=2, val_frac=0.08, holdout_frac=0.45, ood_topics="growth",
          screen_samples=4, max_new_tokens=120, sft_epochs=2, sft_lr=2e-4, grpo_steps=150,
          grpo_val_every=25, grpo_lr=2e-3, grpo_warm_lr=1e-3, grpo_grad_accum=4, eval_samples=4,
          retention_samples=1, val_samples=4, eval_seed_offset=1000, retention_min_score=2,
          pass_rate_scheme="predictive", informative_by=None, tools="calculator",
          model="tiny-tool", families="tiny-tool", sft_topics="distributions,stress_strength",
          sft_form="prose", plain_grpo=True, matched_arms=True, warm_start=True, eval_sets=None,
          **ISSUE46_OFF)
# the third miniature's, frozen by results/science-v3/PREREGISTRATION.md
V3 = {**V2, "sft_topics": "system_reliability,availability", "sft_form": "tool",
      "sft_steps": 150, "ood_topics": None,
      "ood_families": "duane_mtbf,crow_amsaa_expected,lognormal_reliability,gamma_poisson_mean,"
                      "ss_exponential",
      "exclude_pretraining": True, "reworded_rows": 600, "retention_disjoint": True,
      "eval_sets": "heldout,retention,ood,reworded"}
# the first demo's (`make demo`), sized to its half hour
FIRST = dict(n_master=1600, paraphrases=2, val_frac=0.06, holdout_frac=0.5, ood_topics="growth",
             screen_samples=4, max_new_tokens=120, sft_epochs=2, sft_lr=2e-4, grpo_steps=150,
             grpo_val_every=25, grpo_lr=2e-3, grpo_warm_lr=1e-3, grpo_grad_accum=4,
             eval_samples=4, retention_samples=None, val_samples=1, eval_seed_offset=1000,
             retention_min_score=None, pass_rate_scheme=None, informative_by=None,
             tools="calculator", model="tiny-tool", families="tiny-tool", sft_topics=None,
             sft_form="tool", plain_grpo=False, matched_arms=False, warm_start=False,
             eval_sets="heldout", **ISSUE46_OFF)
BUILT_IN = {"first": FIRST, "full": {**MINIATURE, **OFF}, "fast": {**FAST, **OFF},
            "replication": {**MINIATURE, "n_master": 2800, "grpo_val_every": 100, **REGISTERED},
            "replication-fast": {**FAST, **REGISTERED}, "replication-v2": V2,
            "replication-v3": V3}


@pytest.mark.parametrize("name", BUILT_IN)
def test_built_in_recipes_hold_the_values_the_study_ran_with(name):
    loaded = asdict(demo.recipe(name))
    assert loaded == BUILT_IN[name]
    assert {k: (type(v), str(v)) for k, v in loaded.items()} == \
        {k: (type(v), str(v)) for k, v in BUILT_IN[name].items()}


def test_every_built_in_recipe_is_in_recipes_demo():
    assert sorted(p.stem for p in demo.RECIPES.glob("*.yaml")) == sorted(demo.BUILT_IN)


def test_every_setting_says_what_it_is():
    assert all(len(f.metadata["help"]) > 20 for f in fields(PipelineConfig))


@pytest.mark.parametrize("name", BUILT_IN)
def test_the_written_settings_read_back_equal(tmp_path, name):
    settings = demo.recipe(name)
    pipeline_config.write(tmp_path / "pipeline.yaml", settings, header="a header\n\nline two")
    text = (tmp_path / "pipeline.yaml").read_text()
    assert text.startswith("# a header\n#\n# line two\n")
    assert "# useful GRPO steps per run (--max-useful-steps)\ngrpo_steps:" in text
    assert pipeline_config.load(tmp_path / "pipeline.yaml") == settings


def recipe_file(tmp_path, text, name="my.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def full_text(**changes):
    """recipes/demo/full.yaml with some lines replaced (key: None drops the line)."""
    lines = []
    for line in (demo.RECIPES / "full.yaml").read_text().splitlines():
        key = line.split(":")[0]
        if key in changes:
            if changes[key] is not None:
                lines.append(f"{key}: {changes.pop(key)}")
            else:
                changes.pop(key)
            continue
        lines.append(line)
    return "\n".join([*lines, *(f"{k}: {v}" for k, v in changes.items())]) + "\n"


def line_of(text, key):
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(f"{key}:"))


@pytest.mark.parametrize("changes, message", [
    ({"grpo_step": 10}, r"unknown key 'grpo_step' \(did you mean grpo_steps\?\)"),
    ({"colour": "red"}, r"unknown key 'colour' \(known: n_master, paraphrases, "),
    ({"n_master": "many"}, r"n_master: expected an integer, got 'many'"),
    ({"n_master": "12.5"}, r"n_master: expected an integer, got 12.5"),
    ({"n_master": "true"}, r"n_master: expected an integer, got True"),
    ({"n_master": "null"}, r"n_master: a value is needed here \(null is not allowed\)"),
    ({"grpo_steps": 0}, r"grpo_steps: must be >= 1, got 0"),
    ({"sft_lr": "fast"}, r"sft_lr: expected a number, got 'fast'"),
    ({"sft_lr": ".nan"}, r"sft_lr: expected a number, got nan"),
    ({"grpo_lr": -1}, r"grpo_lr: must be > 0, got -1.0"),
    ({"val_frac": 1.5}, r"val_frac: must lie strictly between 0 and 1, got 1.5"),
    ({"ood_topics": "growth,gardening"}, r"ood_topics: unknown topic gardening \(known: "),
    ({"ood_topics": "[growth, spares]"}, r"ood_topics: expected a single value, got a list"),
    ({"pass_rate_scheme": "psychic"}, r"pass_rate_scheme: must be one of plug-in, predictive, "),
    ({"informative_by": "vibes"}, r"informative_by: must be one of correct, reward, "),
    ({"eval_samples": 0}, r"eval_samples: must be >= 1, got 0"),
    ({"model": "gpt"}, r"model: must be one of tiny, tiny-tool, got 'gpt'"),
    ({"families": "tiny-tool,weibul"}, r"families: unknown family weibul \(family sets: tiny-tool"),
    ({"sft_topics": "bayes"}, r"sft_topics: unknown topic bayes \(known: "),
    ({"sft_form": "poetry"}, r"sft_form: must be one of tool, prose, got 'poetry'"),
    ({"plain_grpo": "yes please"}, r"plain_grpo: expected true or false, got 'yes please'"),
    ({"plain_grpo": 1}, r"plain_grpo: expected true or false, got 1"),
])
def test_a_bad_key_or_value_is_refused_naming_file_line_and_key(tmp_path, changes, message):
    text = full_text(**changes)
    path = recipe_file(tmp_path, text)
    key = next(iter(changes))
    with pytest.raises(UsageError, match=rf"^{path}:{line_of(text, key)}: {message}"):
        pipeline_config.load(path)


@pytest.mark.parametrize("text, message", [
    (full_text(grpo_steps=None), r": missing grpo_steps \(every setting without a default"),
    (full_text() + "grpo_steps: 5\n",
     rf":{len(full_text().splitlines()) + 1}: grpo_steps: given twice"),
    (full_text(holdout_frac=0.95), r": val_frac \+ holdout_frac must be < 1"),
    (full_text(retention_min_score=5), r": retention_min_score 5 is more than screen_samples 4"),
    (full_text(model="tiny-tool"), r": model tiny-tool answers through the calculator: set "
     r"tools: calculator \(got none\)"),
    (full_text(families="duane_mtbf"), r": ood_topics growth,spares,importance hold out every "
     r"topic of the families: nothing is left to train on"),
    (full_text(families="tiny-tool", sft_topics="growth,spares"), r": sft_topics growth,spares "
     r"name none of the trained topics \(availability, basic, bayesian, distributions, "
     r"stress_strength, system_reliability\)"),
    (full_text(sft_form="prose"), r": sft_form prose is the worked solutions without the "
     r"calculator when tools are on"),
    ("- n_master\n- 100\n", r": a recipe is a mapping of settings"),
    ("", r": a recipe is a mapping of settings"),
    ("n_master: 100\n  paraphrases: [1\n", r":2: not valid YAML"),
])
def test_a_malformed_recipe_is_refused_in_one_line(tmp_path, text, message):
    path = recipe_file(tmp_path, text)
    with pytest.raises(UsageError, match=rf"^{path}{message}") as caught:
        pipeline_config.load(path)
    assert "\n" not in str(caught.value)


def test_optional_settings_default_to_off_and_a_yaml_exponent_is_a_number(tmp_path):
    settings = pipeline_config.load(recipe_file(tmp_path, full_text(sft_lr="3e-4", grpo_lr=1)))
    assert settings.sft_lr == 3e-4 and settings.grpo_lr == 1.0 and isinstance(settings.grpo_lr, float)
    assert {k: getattr(settings, k) for k in OFF} == OFF


def test_the_redone_replications_settings_read_as_typed(tmp_path):
    settings = pipeline_config.load(recipe_file(tmp_path, full_text(
        model="tiny-tool", tools="calculator", families="tiny-tool", ood_topics="growth",
        sft_topics="distributions,stress_strength", plain_grpo="true")))
    assert (settings.model, settings.families, settings.sft_topics, settings.plain_grpo) == \
        ("tiny-tool", "tiny-tool", "distributions,stress_strength", True)


def test_a_missing_recipe_is_refused(tmp_path):
    with pytest.raises(UsageError, match=rf"^{tmp_path}/none.yaml: cannot read the recipe"):
        pipeline_config.load(tmp_path / "none.yaml")


def test_demo_refuses_a_bad_recipe_with_exit_2_before_making_any_folder(tmp_path):
    path = recipe_file(tmp_path, full_text(grpo_step=3))
    work, out = tmp_path / "work", tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "demo.py"), "--recipe", str(path),
                           "--work-dir", str(work), "--results-dir", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"error: {path}:{line_of(full_text(grpo_step=3), 'grpo_step')}: unknown key 'grpo_step' "
        "(did you mean grpo_steps?)"]
    assert not work.exists() and not out.exists()


def test_fast_and_recipe_together_are_refused():
    with pytest.raises(UsageError, match="--fast and --recipe: give one of them"):
        demo.main(["--fast", "--recipe", "recipes/demo/full.yaml"])


@pytest.fixture
def stub_data_stage(monkeypatch):
    """Every stage does nothing but `data`, which runs a script whose command carries the
    pipeline's n_master, through Demo.run and its ledger as the real stage does."""
    made = []

    def data(self):
        done = self.work / "data" / "master_all.jsonl"
        self.run("generate", ["-c", "import sys; open(sys.argv[2], 'w').write(sys.argv[1])",
                              self.cfg.n_master, done], done=done)
        made.append((self.config, self.fast, self.work, self.out))

    for name in demo.STAGES:
        monkeypatch.setattr(demo.Demo, name, data if name == "data" else lambda self: None)
    return made


def test_a_users_recipe_runs_and_its_pipeline_yaml_reruns_it_without_redoing_stages(
        tmp_path, stub_data_stage, capsys):
    path = recipe_file(tmp_path, full_text(n_master=123))
    work, out = tmp_path / "work", tmp_path / "out"
    dirs = ["--work-dir", str(work), "--results-dir", str(out), "--seed", "5"]
    assert demo.main(["--recipe", str(path), *dirs]) == 0
    assert (work / "data" / "master_all.jsonl").read_text() == "123"
    assert stub_data_stage == [(str(path), False, work, out)]
    written = pipeline_config.load(work / "pipeline.yaml")
    assert written == pipeline_config.load(out / "pipeline.yaml") == pipeline_config.load(path)
    header = (work / "pipeline.yaml").read_text().splitlines()[:3]
    assert header[2].split() == ["#", "python", "demo.py", "--recipe", str(work / "pipeline.yaml"),
                                 "--seed", "5", "--work-dir", str(work), "--results-dir", str(out),
                                 "--rollout-engine", demo.default_engine()]
    capsys.readouterr()

    # the resolved settings, rerun: the stage was made from the same command, so it stays done
    assert demo.main(["--recipe", str(work / "pipeline.yaml"), *dirs]) == 0
    assert "[demo] generate: done already" in capsys.readouterr().out

    # a changed value is named, and the stage it feeds is made again
    assert demo.main(["--recipe", str(recipe_file(tmp_path, full_text(n_master=124))), *dirs]) == 0
    printed = capsys.readouterr().out
    assert "settings changed since the last run in" in printed and "n_master: 123 -> 124" in printed
    assert "generate: its inputs changed (command)" in printed
    assert (work / "data" / "master_all.jsonl").read_text() == "124"


def test_a_built_in_recipe_given_by_path_is_that_pipeline(tmp_path, stub_data_stage, monkeypatch):
    monkeypatch.setattr(demo, "ROOT", tmp_path)  # default folders under tmp_path
    demo.main(["--recipe", str(demo.RECIPES / "fast.yaml")])
    demo.main(["--fast"])
    assert [m[:2] for m in stub_data_stage] == [("fast", True), ("fast", True)]
    assert stub_data_stage[0][2:] == stub_data_stage[1][2:] == (
        tmp_path / "runs" / "demo-fast", tmp_path / "results" / "demo-fast")


@pytest.mark.parametrize("argv, folder", [
    ([], "demo"), (["--fast"], "demo-fast"), (["--tolerance-rule", "complement"], "demo-complement"),
    (["--recipe", "RECIPES/replication.yaml"], "demo-recipe-replication"),
    (["--recipe", "TMP/mine.yaml"], "demo-recipe-mine"),
    (["--seeds", "7"], "demo-replication/seed-7"),
    (["--seeds", "7", "--fast"], "demo-replication-fast/seed-7"),
    (["--seeds", "7", "--recipe", "RECIPES/full.yaml"], "demo-replication-recipe-full/seed-7"),
    (["--seeds", "7", "--recipe", "TMP/mine.yaml"], "demo-replication-recipe-mine/seed-7"),
])
def test_default_folders_keep_other_recipes_out_of_the_studys_own(tmp_path, stub_data_stage,
                                                                 monkeypatch, argv, folder):
    """results/demo and results/demo-replication hold the committed runs: only `make demo` and
    the pre-registered replication's recipe write there by default."""
    recipe_file(tmp_path, full_text(n_master=50), "mine.yaml")
    recipes = demo.RECIPES
    monkeypatch.setattr(demo, "ROOT", tmp_path / "root")
    monkeypatch.setattr(demo.pooled_report, "write", lambda out, seeds: "")
    argv = [a.replace("RECIPES", str(recipes)).replace("TMP", str(tmp_path)) for a in argv]
    demo.main(argv)
    assert stub_data_stage[0][2:] == (tmp_path / "root" / "runs" / folder,
                                      tmp_path / "root" / "results" / folder)

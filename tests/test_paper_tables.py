"""paper/build_tables.py: table numbers come from the result files, and only from them."""
import importlib.util
import json
import re
from pathlib import Path

import pytest

from relrl.runtime.cli import run_main

ROOT = Path(__file__).resolve().parents[1]


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_tables = load(ROOT / "paper" / "build_tables.py", "build_tables")
compare_results = load(ROOT / "evaluation" / "compare_results.py", "compare_results")


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        run_main(lambda: build_tables.main([str(a) for a in argv]))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def model_result(label: str, outcomes: list[bool], scores: list[int]) -> dict:
    """A one-sample model result as the evaluation scripts write it, on questions q0..qN."""
    results = [{"id": f"q{i}", "question": f"Q{i}?", "target": "1", "correct": ok,
                "truncated": False, "pass_count": int(ok), "samples": 1,
                "base_score": s, "base_samples": 4} for i, (ok, s) in enumerate(zip(outcomes, scores))]
    return {"kind": "model_result", "model": label, "fingerprint": "fp-synthetic", "samples": 1,
            "n": len(results), "correct": sum(outcomes), "truncated": 0, "results": results}


@pytest.fixture
def compare_json(tmp_path):
    """compare_results.py's real --output-json on three synthetic models over 30 questions."""
    n = 30
    scores = [i % 3 + 1 for i in range(n)]
    base = [i % 2 == 0 for i in range(n)]  # 15/30
    sft = [i % 3 == 0 for i in range(n)]  # 10/30
    grpo = [i % 10 != 9 for i in range(n)]  # 27/30
    files = []
    for label, outcome in (("base model", base), ("SFT_fold4", sft), ("GRPO exp7 & best", grpo)):
        path = tmp_path / f"{len(files)}.json"
        path.write_text(json.dumps(model_result(label, outcome, scores)))
        files.append(str(path))
    out = tmp_path / "compare_holdout.json"
    assert compare_results.main([*files, "--base", "base model", "--output-json", str(out)]) == 0
    return out


def body(path: Path) -> str:
    """The LaTeX without its % comment lines."""
    return "\n".join(x for x in path.read_text().splitlines() if not x.lstrip().startswith("%"))


def test_accuracy_table_numbers_match_the_json(tmp_path, compare_json, capsys):
    code, _, err = run(["--results-dir", tmp_path / "none", "--compare", f"holdout={compare_json}",
                        "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    data = json.loads(compare_json.read_text())
    lines = {line.split(" & ")[0]: line.split(" & ") for line in
             body(tmp_path / "tables" / "accuracy_holdout.tex").splitlines() if " & " in line}
    labels = {"base model": "base model (base)", "SFT_fold4": r"SFT\_fold4",
              "GRPO exp7 & best": r"GRPO exp7 \& best"}
    for row in data["rows"]:
        cells = lines[labels[row["model"]]]
        assert cells[1] == f"{row['correct']}/{row['n']}"
        assert cells[2] == f"{100 * row['accuracy']:.1f}"
        assert cells[3] == f"[{100 * row['ci_low']:.1f}, {100 * row['ci_high']:.1f}]"
        if row["model"] == data["base"]:
            assert cells[5] == "--" and cells[7] == "--"
        else:
            assert cells[5] == f"{100 * row['delta']:+.1f}".replace("-", "$-$")
            assert cells[6] == f"{row['b01']}/{row['b10']}"
            assert cells[7] == (f"{row['p']:.3f}" if row["p"] >= 0.001 else "$<$0.001")
            assert cells[8].rstrip("\\") == (f"{row['p_holm']:.3f}" if row["p_holm"] >= 0.001
                                             else "$<$0.001")
    # The synthetic data fixes the values independently of the formatter: 15/30, 10/30, 27/30.
    assert lines["base model (base)"][2] == "50.0"
    assert lines[r"GRPO exp7 \& best"][5] == "+40.0"
    assert lines[r"SFT\_fold4"][5] == "$-$16.7"


def test_summary_findings_and_difficulty_come_from_the_json(tmp_path, compare_json, capsys):
    run(["--results-dir", tmp_path / "none", "--compare", f"holdout={compare_json}",
         "--out", tmp_path / "tables"], capsys)
    data = json.loads(compare_json.read_text())
    grpo = next(r for r in data["rows"] if r["model"] == "GRPO exp7 & best")
    summary = body(tmp_path / "tables" / "summary.tex")
    star = "$^{*}$" if grpo["p_holm"] < 0.05 else ""
    assert rf"GRPO exp7 \& best & 90.0 (+40.0){star}\\" in summary
    assert "Holdout" in summary and "Mixed (train)" not in summary  # only sets that exist
    findings = body(tmp_path / "tables" / "findings.tex")
    assert (grpo["p_holm"] < 0.05) == (r"GRPO exp7 \& best +40.0" in findings)
    difficulty = body(tmp_path / "tables" / "difficulty.tex")
    for level, cell in data["by_base_score"]["GRPO exp7 & best"].items():
        assert f"{100 * cell['accuracy']:.1f} ({cell['correct']}/{cell['total']})" in difficulty
        assert difficulty.count(f"\n{level} & ") == 1


def test_waste_table_matches_statistics_json(tmp_path, capsys):
    stats = {"useful_steps": 60, "wasted_steps": 23, "total_attempts": 83, "waste_rate": 23 / 83,
             "waste_by_kind": {"all_correct": 5, "all_wrong": 17, "same_partial": 1},
             "best_step": 40}
    path = tmp_path / "statistics.json"
    path.write_text(json.dumps(stats))
    code, _, err = run(["--results-dir", tmp_path, "--grpo-stats", f"exp7 pass-rate={path}",
                        "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    assert r"exp7 pass-rate & 83 & 60 & 5 & 17 & 1 & 27.7 & 40\\" in body(tmp_path / "tables" / "waste.tex")


def test_missing_results_give_the_marked_placeholder_not_numbers(tmp_path, capsys):
    code, out, _ = run(["--results-dir", tmp_path / "empty", "--out", tmp_path / "tables"], capsys)
    assert code == 0 and "placeholders for missing sets" in out
    names = ["accuracy_train", "accuracy_heldout", "accuracy_holdout", "accuracy_ood", "summary",
             "difficulty", "waste", "findings", "training_figure"]
    for name in names:
        text = (tmp_path / "tables" / f"{name}.tex").read_text()
        assert "Results not yet generated --- run \\texttt{make demo}" in text, name
        paths_removed = re.sub(r"\\texttt\{[^}]*\}", "", body(tmp_path / "tables" / f"{name}.tex"))
        assert not re.search(r"\d", paths_removed), name  # no numbers outside the file names


def test_one_missing_set_is_a_placeholder_beside_real_tables(tmp_path, compare_json, capsys):
    run(["--results-dir", tmp_path / "none", "--compare", f"holdout={compare_json}",
         "--out", tmp_path / "tables"], capsys)
    assert "Results not yet generated" not in (tmp_path / "tables" / "accuracy_holdout.tex").read_text()
    ood = (tmp_path / "tables" / "accuracy_ood.tex").read_text()
    assert "Results not yet generated" in ood and "compare\\_ood.json" in ood


def test_note_is_printed_under_tables(tmp_path, compare_json, capsys):
    run(["--compare", f"holdout={compare_json}", "--note", "FAST run: 3-minute version",
         "--out", tmp_path / "tables"], capsys)
    assert r"\emph{FAST run: 3-minute version}" in (tmp_path / "tables" / "accuracy_holdout.tex").read_text()


def test_malformed_input_is_an_error_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "compare.json"
    bad.write_text(json.dumps({"base": "x", "rows": [{"model": "x"}]}))
    code, _, err = run(["--compare", f"train={bad}", "--out", tmp_path / "tables"], capsys)
    assert code == 2 and "row 0 lacks" in err and str(bad) in err
    assert not (tmp_path / "tables").exists()
    code, _, err = run(["--compare", f"nonsense={bad}", "--out", tmp_path / "tables"], capsys)
    assert code == 2 and "--compare: unknown set 'nonsense'" in err
    code, _, err = run(["--grpo-stats", "no-equals-sign", "--out", tmp_path / "tables"], capsys)
    assert code == 2 and "--grpo-stats: expected NAME=PATH" in err


def test_every_table_the_paper_and_slides_input_is_one_the_script_writes(tmp_path, capsys):
    run(["--results-dir", tmp_path / "empty", "--out", tmp_path / "tables"], capsys)
    written = {p.stem for p in (tmp_path / "tables").glob("*.tex")}
    for source in ("main.tex", "slides/slides.tex"):
        text = (ROOT / "paper" / source).read_text()
        used = set(re.findall(r"\\result(?:table|list)\{(\w+)\}", text))
        assert used and used <= written, (source, used - written)


def pp(x: float) -> str:
    return f"{100 * x:+.1f}".replace("-", "$-$")


def rows_of(path: Path) -> dict[str, list[str]]:
    """Table rows by their first cells (two for the secondary table: set and model)."""
    out = {}
    for line in body(path).splitlines():
        if " & " in line:
            cells = [c.strip() for c in line.rstrip("\\").split(" & ")]
            out[cells[0]] = out[" / ".join(cells[:3])] = cells
    return out


def test_replication_tables_numbers_match_the_pooled_json(tmp_path, capsys):
    pooled = ROOT / "results" / "dev-100" / "pooled.json"  # the committed development seed
    code, _, err = run(["--results-dir", tmp_path / "none", "--replication", pooled,
                        "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    rep = json.loads(pooled.read_text())
    tables = tmp_path / "tables"
    primary = rows_of(tables / "replication_primary.tex")
    for seed, c in [*rep["primary"]["per_seed"].items(), ("pooled", rep["primary"]["pooled"])]:
        cells = [re.sub(r"\\textbf\{(.*)\}", r"\1", x) for x in primary[
            rf"\textbf{{{seed}}}" if seed == "pooled" else seed]]
        assert cells[1:6] == [str(c["groups"]), f"{100 * c['base_accuracy']:.1f}",
                              f"{100 * c['ft_accuracy']:.1f}", pp(c["delta"]),
                              f"[{pp(c['ci_low'])}, {pp(c['ci_high'])}]"]
    assert "every seed): met." in body(tables / "replication_primary.tex")
    secondary = rows_of(tables / "replication_secondary.tex")
    for s in rep["secondary"]:
        c = s["pooled"]
        cells = secondary[" / ".join([s["set"], s["model"], s["against"]])]
        assert cells[3] == pp(c["delta"]) and cells[7] == f"{100 * c['mdd']:.1f}"
    retention = rows_of(tables / "replication_retention.tex")
    assert retention["base"][1:] == ["133", "44.0", "--", "--", "--", "--"]
    assert retention["SFT warm start"][2:4] == ["42.1", "$-$1.8"]  # fixed by the seed's files
    waste = rows_of(tables / "replication_waste.tex")
    assert waste["uniform draws"][1:] == ["29.3 (147/501)"] * 2
    assert "pooled: 0.67." in body(tables / "replication_waste.tex")
    steps = rows_of(tables / "replication_best_steps.tex")
    assert steps["exp7"][1] == r"152 (38.0\%)"


def test_missing_replication_is_a_placeholder_naming_its_command(tmp_path, capsys):
    code, _, err = run(["--results-dir", tmp_path / "none", "--replication", tmp_path / "no.json",
                        "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    for name in ("primary", "secondary", "retention", "waste", "best_steps"):
        text = body(tmp_path / "tables" / f"replication_{name}.tex")
        assert r"run \texttt{python demo.py --seeds 2,3,4}" in text and "no.json" in text


def test_malformed_replication_is_an_error_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "pooled.json"
    rep = json.loads((ROOT / "results" / "dev-100" / "pooled.json").read_text())
    del rep["secondary"][3]["pooled"]["ci_low"]
    bad.write_text(json.dumps(rep))
    code, _, err = run(["--replication", bad, "--out", tmp_path / "tables"], capsys)
    assert code == 2 and str(bad) in err and "secondary 3 comparison lacks" in err
    assert not (tmp_path / "tables").exists()


REDONE = ROOT / "results" / "demo-replication-v2" / "development" / "pooled.json"


def test_redone_replication_tables_match_its_pooled_json(tmp_path, capsys):
    code, _, err = run(["--results-dir", tmp_path / "none", "--replication-v2", REDONE,
                        "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    rep = json.loads(REDONE.read_text())
    tables = tmp_path / "tables"
    claims = rows_of(tables / "redone_claims.tex")
    primary = claims["GRPO after SFT gains on mixed questions (primary)"]
    assert primary[3:] == [pp(rep["primary"]["pooled"]["delta"]), "[$-$0.7, +11.0]",
                           r"0.096 ($\alpha$ 0.01)", rep["primary"]["verdict"]]
    for row in rep["claims"]:
        cells = claims[row["claim"]]
        assert cells[3] == pp(row["pooled"]["delta"]) and cells[6] == row["verdict"]
        assert cells[5] == f"{row['pooled']['p_holm']:.3f}"
    assert [claims[c["claim"]][6] for c in rep["claims"]] == [
        "not settled", "reproduced", "refuted", "not settled"]  # development seed 100's marks
    assert claims["SFT alone makes the model forget what it knew"][1] == "retention (other topics)"
    # the redone goal names its margin over guessing
    assert "above the best guess): not met." in body(tables / "redone_primary.tex")
    ranges = [line.split(" & ") for line in body(tables / "redone_target_range.tex").splitlines()
              if line.startswith("GRPO exp7 best & ")]
    assert [r[1:7] for r in ranges] == [
        ["[0.85, 1)", "24", "51.2", "65.8", "+14.6", "[+4.5, +25.0]"],
        ["elsewhere", "43", "51.9", "51.9", "+0.0", "[$-$6.7, +6.7]"]]
    forgetting = [line.split(" & ") for line in body(tables / "redone_forgetting.tex").splitlines()
                  if line.startswith(("SFT's & SFT", "the others & SFT"))]
    assert [r[5] for r in forgetting] == ["$-$2.3", "$-$7.1"]
    guesses = rows_of(tables / "redone_guesses.tex")
    margins = rep["guess_baselines"]["heldout"]["margins"]
    assert guesses["heldout"][1] == "family mode (4.5)"
    assert guesses["heldout"][2:] == [pp(m) for m in margins.values()]
    assert "254 of its 477 generated groups without signal (53.2" in body(tables / "redone_waste.tex")


def test_missing_redone_replication_is_a_placeholder_naming_its_command(tmp_path, capsys):
    code, _, err = run(["--results-dir", tmp_path / "none", "--replication-v2", tmp_path / "no.json",
                        "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    names = ("primary", "secondary", "retention", "waste", "best_steps", "claims", "target_range",
             "forgetting", "guesses")
    for name in names:
        text = body(tmp_path / "tables" / f"redone_{name}.tex")
        assert r"study.pooled\_report results/demo-replication-v2 --seeds 21,22,23" in text
        assert "no.json" in text and "%" not in text.replace(r"\%", "")


def test_a_first_replication_file_given_as_the_redone_one_is_an_error(tmp_path, capsys):
    first = ROOT / "results" / "dev-100" / "pooled.json"
    code, _, err = run(["--replication-v2", first, "--out", tmp_path / "tables"], capsys)
    assert code == 2 and str(first) in err and "need claims, by_target_range" in err
    assert not (tmp_path / "tables").exists()


THIRD = ROOT / "results" / "science-v3" / "development" / "design" / "pooled.json"


def test_third_design_tables_match_its_pooled_json(tmp_path, capsys):
    code, _, err = run(["--results-dir", tmp_path / "none", "--science-v3", THIRD,
                        "--third-seeds", "102", "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    rep = json.loads(THIRD.read_text())
    tables = tmp_path / "tables"
    claims = rows_of(tables / "third_claims.tex")
    for row in rep["claims"]:
        cells = claims[row["claim"]]
        assert cells[6].startswith(row["verdict"])
        if "pooled" in row:
            c = row["pooled"]
            p = "$<$0.001" if c["p_holm"] < 0.001 else f"{c['p_holm']:.3f}"
            assert cells[3] == pp(c["delta"]) and cells[5] == p
            level = "99" if row.get("minus") else "95"
            assert cells[4] == f"[{pp(c['ci_low'])}, {pp(c['ci_high'])}] ({level}\\%)"
    # development seed 102's marks, and the forgetting difference named by its strata
    assert [claims[c["claim"]][6].split(" (")[0] for c in rep["claims"]] == [
        "reproduced", "not settled", "reproduced", "not settled", "refuted", "refuted",
        "not testable here"]
    assert claims["SFT alone makes the model forget what it knew"][1] == (
        "retention (families SFT never trained on minus SFT's families)")
    goals = rows_of(tables / "third_goals.tex")
    forget = rep["third_goals"]["forgetting"]["SFT alone makes the model forget what it knew"]
    assert goals["SFT alone makes the model forget what it knew: decided at 0.01 with 80\\% "
                 "power for 5 pp"][1:] == [f"smallest detectable difference {100 * forget['mdd']:.1f} pp",
                                           "met" if forget["met"] else "not met"]
    forgetting = rows_of(tables / "third_forgetting.tex")
    c = rep["forgetting"]["never_trained"]["GRPO exp10 best"]
    assert forgetting["never-trained families / GRPO exp10 best / 190"][2:6] == [
        str(c["groups"]), f"{100 * c['base_accuracy']:.1f}", f"{100 * c['ft_accuracy']:.1f}",
        pp(c["delta"])]
    transfer = rows_of(tables / "third_transfer.tex")
    c = rep["transfer"]["ood"]["GRPO exp10 best"]
    assert transfer[f"ood / GRPO exp10 best / {c['groups']}"][5] == pp(c["delta"])
    assert "Pooled over seeds 102" in body(tables / "third_claims.tex")


def test_third_design_tables_wait_for_the_preregistered_seeds(tmp_path, capsys):
    partial = tmp_path / "pooled.json"  # the development pool stands in for a partial one
    partial.write_text(THIRD.read_text())
    code, _, err = run(["--results-dir", tmp_path / "none", "--science-v3", partial,
                        "--out", tmp_path / "tables"], capsys)
    assert code == 0, err
    command = r"study.pooled\_report results/science-v3 --seeds 31,32,33,34"
    for name in ("primary", "claims", "forgetting", "transfer", "goals"):
        text = body(tmp_path / "tables" / f"third_{name}.tex")
        assert "Seeds 31,32,33,34 not pooled yet (pooled: 102)" in text and command in text
        assert "&" not in text  # no numbers: one placeholder cell
    code, _, err = run(["--results-dir", tmp_path / "none", "--science-v3", tmp_path / "no.json",
                        "--out", tmp_path / "tables2"], capsys)
    assert code == 0, err
    text = body(tmp_path / "tables2" / "third_claims.tex")
    assert "no.json" in text and "(pooled:" not in text and command in text

"""The SFT dose probe's table (evaluation/sft_dose_probe.py), from its files alone: for each dose
against the base on the same held-out questions, the accuracy change on the SFT topics and on
the other topics (paired over paraphrase groups: relrl.evaluation.clustered_stats, exact
sign-flip p, 95% cluster-bootstrap interval), and the manipulation check on every sample:
  call   the share of samples that call the calculator
  value  the share where a call came back with a value (a call that is not an error)
  copied the share of samples whose first call assigns only numbers found in the question
         (evaluation/redone_posthoc.py's measure; `of calls`: among calls assigning numbers)
A dose passes the positive control when its own-topic change is above 0 by the exact test
(p < 0.05) and by the 95% interval (its lower end above 0): the interval alone can touch 0
from above on a few discrete group scores while the test says p = 0.1.

  python evaluation/sft_dose_table.py --probe-dir results/science-v3/development/sft-dose-seed-100 \\
      --topics system_reliability,availability --seed 100 --doses 20,60,150
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from relrl.data.dataset_io import atomic_write_json, atomic_write_text
from relrl.evaluation.clustered_stats import compare_groups, group_differences
from relrl.evaluation.results_io import read_result
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list
from study import pipeline_config

ALPHA = 0.05  # the positive control's test level (a development screen, not a claim)
_spec = importlib.util.spec_from_file_location(  # the redone replication's copy measure, reused
    "redone_posthoc", Path(__file__).resolve().with_name("redone_posthoc.py"))
posthoc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(posthoc)


def parse_args(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--probe-dir", required=True, help="the probe's output (eval/, sft/)")
    p.add_argument("--topics", required=True, help="the topics SFT trained on")
    p.add_argument("--seed", type=int, required=True, help="the development seed (labels)")
    p.add_argument("--doses", type=seed_list("--doses"), required=True)
    return p.parse_args(argv)


def manipulation(records: list[dict]) -> dict:
    """Tool use over every sample of these records."""
    samples = [s for r in records for s in posthoc.samples(r)]
    n = len(samples)
    back = sum(s["tool_calls"] > s["tool_errors"] for s in samples)
    use = posthoc.tool_use(records)
    copied = use["copied"] * use["calls_assigning"] if use["copied"] is not None else 0
    return {"samples": n, "accuracy": use["accuracy"], "call": use["calls"],
            "value": back / n if n else None, "copied": copied / n if n else None,
            "copied_of_calls": use["copied"]}


def side(base: list[dict], ft: list[dict], keep) -> dict:
    """One comparison over the records `keep` accepts, with both models' tool use."""
    b = [r for r in base if keep(r)]
    f = [r for r in ft if keep(r)]
    return {"change": compare_groups(group_differences(b, f)),
            "base_use": manipulation(b), "sft_use": manipulation(f)}


def analyse(probe: Path, topics: set[str], doses: list[int]) -> dict:
    out = {}
    for dose in doses:
        pair = read_result(probe / "eval" / f"sft-{dose}.json")
        base, ft = pair["base"]["results"], pair["finetuned"]["results"]
        stats = probe / "sft" / f"sft-{dose}.json"
        # loss a token over the first and last 10% of steps, as the redone replication's post hoc
        sft = posthoc.sft_dose(stats) if stats.is_file() else {}
        out[str(dose)] = {
            "steps": sft.get("steps"), "examples": sft.get("examples"),
            "loss_first": sft.get("loss_first"), "loss_last": sft.get("loss_last"),
            "own": side(base, ft, lambda r: r.get("topic") in topics),
            "other": side(base, ft, lambda r: r.get("topic") not in topics),
            "positive_control": None}
        own = out[str(dose)]["own"]["change"]
        out[str(dose)]["positive_control"] = (own["delta"] > 0 and own["p"] < ALPHA
                                              and own["ci_low"] > 0)
    return out


def _pt(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _change(c: dict) -> str:
    return (f"{100 * c['delta']:+.1f} [{100 * c['ci_low']:+.1f}, {100 * c['ci_high']:+.1f}] "
            f"p={c['p']:.2g}")


def render(result: dict) -> str:
    seed = result["seed"]
    lines = [f"# SFT dose probe, development seed {seed} (not confirmatory)", "",
             f"SFT topics: {', '.join(sorted(result['topics']))}; tool form; every number is "
             f"development seed {seed}. Change: SFT minus base in points over paraphrase groups "
             "(95% cluster-bootstrap interval, exact sign-flip p).", "",
             "| Dose (steps) | Examples | Loss, first -> last 10% of steps | Own topics: base -> SFT | "
             "Own change | Other topics: base -> SFT | Other change | Positive control |",
             "|---|---|---|---|---|---|---|---|"]
    for dose, d in result["doses"].items():
        own, other = d["own"]["change"], d["other"]["change"]
        loss = ("-" if d["loss_first"] is None else
                f"{d['loss_first']:.3f} -> {d['loss_last']:.3f}")
        lines.append(f"| {dose} | {d['examples']} | {loss} | {_pt(own['base_accuracy'])} -> "
                     f"{_pt(own['ft_accuracy'])} ({own['groups']} groups) | {_change(own)} | "
                     f"{_pt(other['base_accuracy'])} -> {_pt(other['ft_accuracy'])} "
                     f"({other['groups']} groups) | {_change(other)} | "
                     f"{'yes' if d['positive_control'] else 'no'} |")
    lines += ["", "Manipulation check, share of samples: calls the calculator / a value came "
              "back / the first call copies only the question's numbers.", "",
              "| Model | Own topics | Other topics |", "|---|---|---|"]

    def use(u):
        return f"{_pt(u['call'])} / {_pt(u['value'])} / {_pt(u['copied'])}"
    first = next(iter(result["doses"].values()))
    lines.append(f"| base | {use(first['own']['base_use'])} | {use(first['other']['base_use'])} |")
    for dose, d in result["doses"].items():
        lines.append(f"| SFT {dose} steps | {use(d['own']['sft_use'])} | "
                     f"{use(d['other']['sft_use'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    a = parse_args(argv)
    probe = Path(a.probe_dir)
    topics = set(pipeline_config.names(a.topics))
    missing = [d for d in a.doses if not (probe / "eval" / f"sft-{d}.json").is_file()]
    if missing:
        raise UsageError(f"{probe}/eval: no result for doses {missing}")
    result = {"kind": "sft_dose_probe", "seed": a.seed, "development": True,
              "topics": sorted(topics), "doses": analyse(probe, topics, a.doses)}
    atomic_write_json(probe / "probe.json", result)
    atomic_write_text(probe / "probe.md", render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    run_main(main)

"""Post hoc, not pre-registered: how the redone replication's SFT warm start changed tiny-tool,
and how many of plain GRPO's updates carried no signal, from the committed files alone.

  sft dose    each seed's SFT run: examples, optimizer steps, mean loss a token over its first
              and last 10% of steps (work/seed-N/sft/all/statistics.json)
  tool use    each arm on the retention and held-out mixed-style questions, over every sample:
              accuracy, the share of samples that call the calculator, and of the calls that
              assign numbers (`x1 = 4100; ...`), the share whose numbers all appear in the
              question, and the accuracy of those: a model that calls the calculator fails by
              miscopying a number or by writing the wrong formula (study.replication.mechanism's
              tool_use, which the pooled report's mechanism section shares; samples and
              tool_use stay importable here for evaluation/sft_dose_table.py)
  plain GRPO  its updates whose group had no reward spread, counted in its train_log (the
              pooled report counts waste over every generated group, the surplus that batch
              generation drew and did not train on included)
  dose check  the SFT variants posthoc/sft_dose.sh trained on seed 22's data (66 steps: one
              epoch of all of it, or two of half), with tool use on its retention set

Seeds are found as seed-N/ (confirmatory) and development/seed-N/ (development).

  python evaluation/redone_posthoc.py     # writes results/demo-replication-v2/posthoc/
"""
import sys
from pathlib import Path

from relrl.data.dataset_io import atomic_write_json, atomic_write_text, read_json, read_records
from relrl.evaluation.results_io import read_result
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list
from study.demo_report import slug
from study.replication.mechanism import percent, samples, tool_use  # noqa: F401 (sft_dose_table)
from study.replication.seed_files import records

ROOT = Path(__file__).resolve().parents[1]
SETS = ("retention", "heldout")
ARMS = ("base", "SFT warm start", "GRPO exp7 best", "GRPO exp10 best", "GRPO exp7 plain best")
EDGE = 0.10  # share of SFT steps averaged at each end of its loss curve
DOSE = Path("posthoc") / "sft-dose"  # posthoc/sft_dose.sh's SFT variants on seed 22's data


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", default=str(ROOT / "results" / "demo-replication-v2"),
                        help="the redone replication's folder (seed-N/, development/seed-N/)")
    parser.add_argument("--seeds", type=seed_list("--seeds"), default=None,
                        help="comma-separated seeds (default: every seed folder found)")
    parser.add_argument("--output-dir", default=None,
                        help="where posthoc.json and posthoc.md go (default <results-dir>/posthoc)")
    return parser.parse_args(argv)


def seed_folders(root: Path, seeds: list[int] | None) -> dict[int, tuple[Path, Path]]:
    """{seed: (results folder, work folder)}, development seeds first."""
    found = {}
    for folder in sorted(root.glob("development/seed-*")) + sorted(root.glob("seed-*")):
        seed = int(folder.name.split("-")[1])
        work = folder / "work" if folder.parent.name == "development" else root / "work" / folder.name
        found[seed] = (folder, work)
    if seeds is None:
        if not found:
            raise UsageError(f"{root}: no seed-N folder")
        return found
    missing = [s for s in seeds if s not in found]
    if missing:
        raise UsageError(f"--seeds: no seed folder for {', '.join(map(str, missing))} in {root}")
    return {s: found[s] for s in seeds}


def sft_dose(stats_path: Path) -> dict:
    stats = read_json(stats_path)
    losses = stats.get("losses")
    if not isinstance(losses, list) or not losses:
        raise UsageError(f"{stats_path}: no losses")
    edge = max(1, round(EDGE * len(losses)))
    settings = stats.get("settings", {})
    return {"examples": stats["items"], "steps": stats["steps"],
            "epochs": settings.get("epochs"), "learning_rate": settings.get("learning_rate"),
            "loss_first": sum(losses[:edge]) / edge, "loss_last": sum(losses[-edge:]) / edge}


def plain_updates(folder: Path) -> dict | None:
    run = folder / "grpo_exp7_plain"
    log = run / "train_log.jsonl.gz"
    if not log.is_file():
        return None
    steps = [row for _, row in read_records(log)]
    stats = read_json(run / "statistics.json")
    flat = sum(1 for s in steps if s["reward_std"] == 0)
    return {"updates": len(steps), "updates_without_signal": flat,
            "share": flat / len(steps) if steps else None,
            "generated": stats["total_attempts"], "generated_without_signal": stats["wasted_steps"]}


def analyse(root: Path, found: dict[int, tuple[Path, Path]]) -> dict:
    seeds = {}
    for seed, (folder, work) in found.items():
        use = {}
        for set_name in SETS:
            if not (folder / "eval" / set_name).is_dir():
                continue
            present = [a for a in ARMS
                       if a == "base" or (folder / "eval" / set_name / f"{slug(a)}.json").is_file()]
            use[set_name] = {arm: tool_use(records(folder, set_name, arm)) for arm in present}
        seeds[str(seed)] = {"folder": folder.relative_to(root).as_posix(),
                            "sft": sft_dose(work / "sft" / "all" / "statistics.json"),
                            "tool_use": use, "plain_grpo": plain_updates(folder)}
    dose = {path.parent.name: {"sft": sft_dose(path.parent / "sft_statistics.json"),
                               "retention": tool_use(read_result(path)["finetuned"]["results"])}
            for path in sorted((root / DOSE).glob("*/retention.json"))}
    return {"kind": "redone_posthoc", "post_hoc": True, "seeds": seeds, "sft_dose_check": dose}


def render(result: dict) -> str:
    seeds = result["seeds"]
    lines = ["# Redone replication, post hoc: SFT dose, tool use, plain GRPO's flat updates", "",
             "Not pre-registered; computed by `evaluation/redone_posthoc.py` from the committed "
             "files. Development seeds are in `development/`.", "",
             "## SFT warm start: dose", "",
             f"Loss: mean cross-entropy a token over the first and last {100 * EDGE:.0f}% of steps.", "",
             "| Seed | Examples | Epochs | Steps | Learning rate | Loss, first | Loss, last |",
             "|---|---|---|---|---|---|---|"]
    for seed, s in seeds.items():
        d = s["sft"]
        lines.append(f"| {seed} | {d['examples']} | {d['epochs']} | {d['steps']} | "
                     f"{d['learning_rate']} | {d['loss_first']:.2f} | {d['loss_last']:.2f} |")
    for set_name in SETS:
        lines += ["", f"## Tool use on {set_name} questions, every sample", "",
                  "Accuracy / share of samples calling the calculator / share of calls whose "
                  "assigned numbers all appear in the question / accuracy of those calls (wrong: "
                  "the right numbers in a wrong formula or in wrong places).", "",
                  "| Seed | " + " | ".join(ARMS) + " |", "|---" * (len(ARMS) + 1) + "|"]
        for seed, s in seeds.items():
            cells = []
            for arm in ARMS:
                u = s["tool_use"].get(set_name, {}).get(arm)
                cells.append("-" if u is None else
                             " / ".join(percent(u[k]) for k in ("accuracy", "calls", "copied",
                                                              "correct_when_copied")))
            lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    if result["sft_dose_check"]:
        lines += ["", "## SFT dose check: seed 22's SFT data, 66 steps either way", "",
                  f"`{DOSE.as_posix()}/`, made by `posthoc/sft_dose.sh`; retention questions, one "
                  "sample each, columns as above. The run's own SFT (all of it, 2 epochs, twice "
                  "the steps) is seed 22's row above.", "",
                  "| SFT | Examples | Epochs | Steps | Loss, last | Retention: accuracy / calls / "
                  "copied / right when copied |", "|---|---|---|---|---|---|"]
        for name, v in result["sft_dose_check"].items():
            d, u = v["sft"], v["retention"]
            lines.append(f"| {name} | {d['examples']} | {d['epochs']} | {d['steps']} | "
                         f"{d['loss_last']:.2f} | " + " / ".join(
                             percent(u[k]) for k in ("accuracy", "calls", "copied", "correct_when_copied"))
                         + " |")
    lines += ["", "## Plain GRPO: updates without signal", "",
              "| Seed | Updates | Without signal (train_log) | Share | Generated | Without signal "
              "(counters) |", "|---|---|---|---|---|---|"]
    for seed, s in seeds.items():
        p = s["plain_grpo"]
        if p:
            lines.append(f"| {seed} | {p['updates']} | {p['updates_without_signal']} | "
                         f"{percent(p['share'])} | {p['generated']} | {p['generated_without_signal']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    root = Path(args.results_dir)
    if not root.is_dir():
        raise UsageError(f"--results-dir: {root}: no such folder")
    result = analyse(root, seed_folders(root, args.seeds))
    text = render(result)
    out = Path(args.output_dir) if args.output_dir else root / "posthoc"
    atomic_write_json(out / "posthoc.json", result)
    atomic_write_text(out / "posthoc.md", text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    run_main(main)

"""Post hoc re-analysis of the committed miniature results: both tolerance rules, the guess
baselines and the strata for base, SFT, exp7 best and exp10 best on every evaluated set of the
replication (results/demo-replication/seed-{2,3,4}) and the development seeds (results/demo,
results/dev-100). No model is run (study/reanalysis.py says how each answer is regraded).

The guesses are fitted on each seed's training rows (data/train.jsonl of its run: the SFT and
GRPO training pool). Those files are not committed, so they are made again, deterministically:
the generator at the commit that made the results (read from git), with the seed and data
settings the run used, writes the master set and its split; every committed record must then
match a regenerated row of its split (id, question, target) or the script stops.

  python evaluation/reanalyse_results.py                  # writes results/reanalysis/
  python evaluation/reanalyse_results.py --results-md RESULTS.md   # and updates its section
"""
import gzip
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from relrl.data.dataset_io import atomic_write_bytes, atomic_write_text, load_dataset
from relrl.evaluation.strata import MIN_ANSWERED
from relrl.runtime.cli import ArgumentParser, UsageError, run_main
from study.demo_report import splice_results_md
from study.reanalysis import MODELS, SETS, reanalyse, render
from study.replication.seed_files import records

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- reanalysis:start -->", "<!-- reanalysis:end -->"
TOLERANCE = 0.05  # every committed result was graded at 5%
# Data settings of each run, as recipes/demo/full.yaml (seed 0) and recipes/demo/replication.yaml
# (the others) hold them, and the commit whose generator made the data: the stages' recorded code
# for the replication, the commit that added the results for the development seeds (the
# generator did not change between their runs and those commits).
DATA = {"n_master": 2800, "paraphrases": 2, "val_frac": 0.08, "holdout_frac": 0.6,
        "ood_topics": "growth,spares,importance"}
FOLDERS = {
    "demo-replication": {"label": "Pre-registered replication, seeds 2, 3, 4 (pooled)",
                         "seeds": {s: f"seed-{s}" for s in (2, 3, 4)}, "commit": "f5c4012",
                         "data": DATA},
    "dev-100": {"label": "Development seed 100 (the replication's design)",
                "seeds": {100: "seed-100"}, "commit": "687353b", "data": DATA},
    "demo": {"label": "Development seed 0 (`make demo`, one sample a question)",
             "seeds": {0: "."}, "commit": "2915bdd", "data": {**DATA, "n_master": 1560}},
}
SPLIT_OF = {"train": "train", "heldout": "holdout", "retention": "holdout", "holdout": "holdout",
            "ood": "ood"}


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", default=str(ROOT / "results"),
                        help="folder holding demo-replication/, dev-100/ and demo/")
    parser.add_argument("--output-dir", default=str(ROOT / "results" / "reanalysis"),
                        help="where reanalysis.json.gz and reanalysis.md go")
    parser.add_argument("--results-md", default=None,
                        help=f"also replace the section between {START} and {END} of this file")
    return parser.parse_args(argv)


def regenerate(commit: str, seed: int, data: dict, work: Path) -> dict[str, list[dict]]:
    """The run's train, holdout and ood splits, made again by the generator at `commit`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "generators", "relrl"],
                             capture_output=True)
    if archive.returncode != 0:
        raise UsageError(f"git archive {commit}: {archive.stderr.decode().strip()} "
                         "(the re-analysis needs the repository's history)")
    src = work / "src"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(src, filter="data")
    out, script = work / "data", [sys.executable, "generators/build_dataset.py"]
    out.mkdir()
    for args in (["generate", "--n", data["n_master"], "--seed", seed, "--paraphrases",
                  data["paraphrases"], "--out", out / "master_all.jsonl"],
                 ["split", out / "master_all.jsonl", "--out-dir", out, "--seed", seed,
                  "--val-frac", data["val_frac"], "--holdout-frac", data["holdout_frac"],
                  "--ood-topics", data["ood_topics"]]):
        subprocess.run([*script, *map(str, args)], cwd=src, check=True, capture_output=True)
    return {name: load_dataset(out / f"{name}.jsonl") for name in ("train", "holdout", "ood")}


def check_regenerated(splits: dict[str, list[dict]], sets: dict[str, dict], where: str) -> int:
    """Every committed record matches a regenerated row of its split; the number checked."""
    rows = {name: {r["id"]: r for r in split} for name, split in splits.items()}
    checked = 0
    for set_name, models in sets.items():
        for r in models[MODELS[0]]:
            row = rows[SPLIT_OF[set_name]].get(r["id"])
            if row is None or (row["question"], str(row["answer"])) != (r["question"], r["target"]):
                raise UsageError(f"{where}/eval/{set_name}: question {r['id']} is not the "
                                 "regenerated one; the recorded data settings are wrong")
            checked += 1
    return checked


def load_folder(root: Path, spec: dict) -> tuple[dict, dict]:
    """({seed: {"sets", "train_rows"}}, {seed: how its training rows were obtained})."""
    seeds, provenance = {}, {}
    for seed, sub in spec["seeds"].items():
        folder = root / sub
        sets = {s: {m: records(folder, s, m) for m in MODELS} for s in SETS
                if (folder / "eval" / s).is_dir()}
        if not sets:
            raise UsageError(f"{folder}/eval: no evaluated sets")
        with tempfile.TemporaryDirectory() as work:
            splits = regenerate(spec["commit"], seed, spec["data"], Path(work))
        checked = check_regenerated(splits, sets, str(folder))
        seeds[seed] = {"sets": sets, "train_rows": splits["train"]}
        provenance[str(seed)] = {"rows": len(splits["train"]), "commit": spec["commit"],
                                 **spec["data"], "records_checked": checked}
    return seeds, provenance


def main(argv=None):
    args = parse_args(argv)
    results = Path(args.results_dir)
    if args.results_md:
        if not Path(args.results_md).is_file():
            raise UsageError(f"--results-md: {args.results_md}: no such file")
        current = Path(args.results_md).read_text()
        if START not in current or END not in current:
            raise UsageError(f"--results-md: {args.results_md} lacks the {START} / {END} markers")
    folders = {}
    for name, spec in FOLDERS.items():
        print(f"[reanalyse] {name}", flush=True)
        seeds, provenance = load_folder(results / name, spec)
        folders[name] = {"label": spec["label"], "seeds": list(spec["seeds"]),
                         "training_rows": provenance,
                         "sets": reanalyse(seeds, tolerance=TOLERANCE)}
    result = {"kind": "reanalysis", "post_hoc": True, "tolerance": TOLERANCE,
              "min_answered": MIN_ANSWERED,
              "training_rows": "each run's data/train.jsonl, regenerated by the generator at "
                               "the commit that made the results and checked against every "
                               "committed record",
              "folders": folders}
    text = render(result)
    out = Path(args.output_dir)
    # gzipped, a twentieth of the size (read_json reads it as it is)
    body = (json.dumps(result, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    atomic_write_bytes(out / "reanalysis.json.gz", gzip.compress(body, mtime=0))
    atomic_write_text(out / "reanalysis.md", text)
    if args.results_md:
        splice_results_md(Path(args.results_md), text, START, END)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    run_main(main)

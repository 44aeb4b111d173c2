"""Build, split, count and check reliability-engineering datasets.

  generate --n N --seed S --out FILE [--paraphrases P] [--families a,b] [--topics t]
           [--difficulty 1,2] [--exclude FILE ...] [--exclude-pretraining MODEL]
           [--wording usual|new]
      N rows: base problems drawn from the families, each with up to P paraphrases in its group;
      problems already in an --exclude file are skipped, by wording and by parameters (for
      leak-free separate test sets), and with --exclude-pretraining every problem the built-in
      model was pretrained on; --wording new asks each problem in its family's new phrasings
      only, which no usual row holds (the tiny-tool families have them);
      --families tiny-tool names the families of relrl.problems.registry.TOOL_FAMILIES.
  split FILE --out-dir DIR --seed S [--val-frac F] [--holdout-frac F]
        [--ood-families a,b | --ood-topics t]
      train/val/holdout(/ood).jsonl by group, so no problem has phrasings in two splits.
  stats FILE        counts by topic, family and difficulty (JSON)
  validate FILE     the dataset check: rows, usable numeric rows, skipped rows with reasons (JSON)
  families          the family table (Markdown), as in generators/FAMILIES.md
  export-verl --train FILE [--val FILE] --out-dir DIR [--data-source NAME]
      train.parquet (and validation.parquet) in verl's RL schema, for slurm/verl_dapo.sh;
      the reward is relrl.grading.rewards.compute_score
"""
import json
import sys
from pathlib import Path

from relrl.data.dataset_io import atomic_write_jsonl, inspect_dataset, load_dataset
from relrl.data.verl_export import DATA_SOURCE, verl_record, write_parquet
from relrl.problems.dataset import WORDINGS, count_rows, generate_rows, row_keys, split_rows
from relrl.problems.pretraining import PRETRAINING, pretraining_problems
from relrl.problems.registry import FAMILIES, expand_sets, select
from relrl.runtime.cli import ArgumentParser, UsageError, int_at_least, number_type, positive_int, run_main


def _fraction(flag: str):
    return number_type(flag, float, "[0, 1)")  # finite: nan and inf are refused too


def _names(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _difficulties(text: str | None) -> list[int]:
    try:
        levels = [int(x) for x in _names(text)]
    except ValueError:
        raise UsageError(f"--difficulty: expected levels such as 1,2 got {text!r}") from None
    if any(level not in (1, 2, 3) for level in levels):
        raise UsageError(f"--difficulty: levels are 1, 2 and 3, got {text!r}")
    return levels


def _output_file(path: str) -> Path:
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"--out: {out} is a folder, expected a file name")
    if not out.parent.is_dir():
        raise UsageError(f"--out: folder {out.parent} does not exist")
    return out


def _check_wording(wording: str, families) -> None:
    lacking = [f.name for f in families if wording == "new" and not f.new_phrasings]
    if lacking:
        shown = ", ".join(lacking[:3]) + (f" and {len(lacking) - 3} more" if len(lacking) > 3 else "")
        raise UsageError(f"--wording new: no new wording for {shown} (the tiny-tool families "
                         "have them: --families tiny-tool)")


def cmd_generate(args) -> None:
    out = _output_file(args.out)
    try:
        families = select(expand_sets(_names(args.families)), _names(args.topics),
                          _difficulties(args.difficulty))
        _check_wording(args.wording, families)
        excluded = [r for path in args.exclude for r in load_dataset(path)]
        questions, keys = frozenset(r["question"] for r in excluded), row_keys(excluded)
        if args.exclude_pretraining:
            seen_keys, seen_questions = pretraining_problems(args.exclude_pretraining)
            questions, keys = questions | seen_questions, keys | seen_keys
        rows = generate_rows(families, args.n, args.seed, args.paraphrases, questions, keys,
                             args.wording)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    atomic_write_jsonl(out, rows)
    print(f"wrote {len(rows)} rows ({len({r['group'] for r in rows})} groups, "
          f"{len({r['family'] for r in rows})} families) to {out}")


def cmd_split(args) -> None:
    out_dir = Path(args.out_dir)
    if not out_dir.is_dir():
        raise UsageError(f"--out-dir: folder {out_dir} does not exist")
    if args.val_frac + args.holdout_frac >= 1:
        raise UsageError("--val-frac plus --holdout-frac must be below 1")
    rows = load_dataset(args.file)
    ood_families, ood_topics = _names(args.ood_families), _names(args.ood_topics)
    for flag, field, wanted in (("--ood-families", "family", ood_families),
                                ("--ood-topics", "topic", ood_topics)):
        present = {r.get(field) for r in rows}
        missing = [name for name in wanted if name not in present]
        if missing:
            raise UsageError(f"{flag}: no rows of {', '.join(missing)} in {args.file}")
    splits = split_rows(rows, args.seed, args.val_frac, args.holdout_frac, ood_families,
                        ood_topics)
    wanted = {"train": True, "val": args.val_frac > 0, "holdout": args.holdout_frac > 0,
              "ood": "ood" in splits}
    empty = [name for name, want in wanted.items() if want and not splits.get(name)]
    if empty:
        raise UsageError(f"too few groups in {args.file}: split {', '.join(empty)} would be empty")
    summary = {}
    for name, want in wanted.items():
        if want:
            atomic_write_jsonl(out_dir / f"{name}.jsonl", splits[name])
            summary[name] = {"rows": len(splits[name]),
                             "groups": len({r.get("group") for r in splits[name]})}
    print(json.dumps(summary))


def cmd_stats(args) -> None:
    counts = count_rows(load_dataset(args.file))
    print(json.dumps({"file": args.file, **counts}, indent=2))


def cmd_validate(args) -> int:
    """The summary on stdout; exit status 2 (and one line on stderr) when no row is usable."""
    summary = inspect_dataset(args.file).summary()
    print(json.dumps(summary, ensure_ascii=False))
    if not summary["usable_numeric_rows"]:
        print(f"error: {args.file}: no usable row ({summary['rows']} read, all skipped)",
              file=sys.stderr)
        return 2
    return 0


def cmd_export_verl(args) -> None:
    out_dir = Path(args.out_dir)
    if not out_dir.is_dir():
        raise UsageError(f"--out-dir: folder {out_dir} does not exist")
    parts = {"train": load_dataset(args.train)}  # every file checked before anything is written
    if args.val:
        parts["validation"] = load_dataset(args.val)
    for split, rows in parts.items():
        write_parquet(out_dir / f"{split}.parquet",
                      [verl_record(r, i, split, args.data_source) for i, r in enumerate(rows)])
    print(json.dumps({split: {"rows": len(rows), "file": str(out_dir / f"{split}.parquet")}
                      for split, rows in parts.items()}))


def cmd_families(args) -> None:
    print("| family | topic | difficulty | what is asked | independent check |")
    print("| --- | --- | --- | --- | --- |")
    for f in FAMILIES.values():
        cells = [f"`{f.name}`", f.topic, str(f.difficulty), f.asks, f.check_how]
        print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")


def main() -> int | None:
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="write N generated problems as JSONL")
    gen.add_argument("--n", type=positive_int("--n"), default=866,
                     help="number of rows (the study's master set has 866)")
    gen.add_argument("--seed", type=int_at_least("--seed", 0), default=0)
    gen.add_argument("--out", required=True, help="output JSONL file (its folder must exist)")
    gen.add_argument("--paraphrases", type=int_at_least("--paraphrases", 0), default=2,
                     help="extra phrasings per base problem, same group (default 2)")
    gen.add_argument("--families", help="comma-separated family names (default: all); the "
                     "name tiny-tool stands for the families `tiny-tool` trains on, whose answer "
                     "is one calculator expression (relrl.problems.registry.TOOL_FAMILIES)")
    gen.add_argument("--topics", help="comma-separated topics (default: all)")
    gen.add_argument("--difficulty", help="comma-separated levels among 1,2,3 (default: all)")
    gen.add_argument("--exclude", action="append", default=[], metavar="FILE",
                     help="skip the problems of FILE: any with a phrasing in it, and any "
                     "with the parameters of one of its generated groups (repeatable)")
    gen.add_argument("--exclude-pretraining", choices=tuple(PRETRAINING), metavar="MODEL",
                     help="skip every problem the built-in MODEL (tiny or tiny-tool) was "
                     "pretrained on, by parameters and by wording")
    gen.add_argument("--wording", choices=WORDINGS, default="usual",
                     help="usual: the families' phrasings (default); new: each group one "
                     "problem in its family's new phrasings only, which no usual row and no "
                     "built-in model's pretraining holds; its group id ends in -new")
    gen.set_defaults(run=cmd_generate)

    spl = sub.add_parser("split", help="train/val/holdout(/ood) files by group")
    spl.add_argument("file")
    spl.add_argument("--out-dir", required=True)
    spl.add_argument("--seed", type=int_at_least("--seed", 0), default=0)
    spl.add_argument("--val-frac", type=_fraction("--val-frac"), default=0.1)
    spl.add_argument("--holdout-frac", type=_fraction("--holdout-frac"), default=0.1)
    ood = spl.add_mutually_exclusive_group()
    ood.add_argument("--ood-families", help="families held out whole, to ood.jsonl")
    ood.add_argument("--ood-topics", help="topics held out whole, to ood.jsonl")
    spl.set_defaults(run=cmd_split)

    for name, func, text in (("stats", cmd_stats, "counts by topic, family and difficulty"),
                             ("validate", cmd_validate, "check a dataset file, print a summary")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("file")
        cmd.set_defaults(run=func)
    sub.add_parser("families", help="print the family table (Markdown)").set_defaults(
        run=cmd_families)

    verl = sub.add_parser("export-verl", help="train/validation parquet in verl's RL schema")
    verl.add_argument("--train", required=True, help="training questions (JSONL)")
    verl.add_argument("--val", help="validation questions (JSONL)")
    verl.add_argument("--out-dir", required=True, help="folder for train.parquet and "
                      "validation.parquet (must exist)")
    verl.add_argument("--data-source", default=DATA_SOURCE,
                      help=f"the rows' data_source (default {DATA_SOURCE})")
    verl.set_defaults(run=cmd_export_verl)

    args = parser.parse_args()
    return args.run(args)


if __name__ == "__main__":
    run_main(main)

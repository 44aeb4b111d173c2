"""Evaluate one LoRA adapter and compare it with base results computed earlier.

The base model is evaluated once per dataset (by evaluate_single.py, or by evaluate_gsm8k.py
without --adapter); every checkpoint is then compared against that file instead of re-running
the base. The base results must be for exactly the same questions (checked by fingerprint).

  python evaluation/evaluate_finetuned_only.py --model tiny-random --adapter runs/exp7/checkpoint-80 \\
      --base-results results/base_holdout.json --dataset data/holdout.jsonl --output results/ckpt80.json
Without --output it writes $OUTPUT_DIR/eval_$RUN_NAME.json (default results/eval_eval.json), as the
study's script did. Sharded like evaluate_single.py (--shard i/n, then --merge).
"""


from relrl.evaluation.cli import add_adapter_arg, add_eval_args, add_model_args, run_study_cli
from relrl.runtime.cli import ArgumentParser, run_main

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(parser, DEFAULT_MODEL, base_label=False, study_default_output=True)
    add_adapter_arg(parser)
    parser.add_argument("--base-results", required=True,
                        help="earlier result JSON of the base model on the same dataset "
                        "(a model result, or a pair file whose base side is used)")
    add_eval_args(parser)
    return parser, parser.parse_args(argv)


def main(argv=None):
    return run_study_cli(*parse_args(argv))


if __name__ == "__main__":
    run_main(main)

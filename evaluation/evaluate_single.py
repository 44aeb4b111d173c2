"""Evaluate a base model and one LoRA adapter on one dataset, paired question by question.

Writes a pair file: the study's fields (base_accuracy and ft_accuracy in percent, delta in
points, n_questions, run_name, lora_path, mcnemar_b01, mcnemar_b10, mcnemar_p, base_results,
ft_results), the corrected chi-square, a paired bootstrap 95% interval for the difference, and
both full model results under "base" and "finetuned", the record lists inline as the study's
files had them (`json.load(f)["base_results"]`); with --records gzip or xz they go to
OUT.records.json.gz or OUT.records.json.xz beside OUT instead, the compact layouts (results/
commits xz; relrl.evaluation.results_io, whose read_result reads every layout).
The base is the same weights with the adapter switched off (one model in memory).

  python evaluation/evaluate_single.py --model tiny-random --adapter runs/exp7/checkpoint-80 \\
      --dataset data/holdout.jsonl --output results/exp7_ckpt80_holdout.json
The study's environment variables work too, and then the output is $OUTPUT_DIR/eval_$RUN_NAME.json:
  LORA_PATH=runs/exp7/checkpoint-80 DATASET_PATH=data/holdout.jsonl OUTPUT_DIR=results \\
      RUN_NAME=exp7_ckpt80 python evaluation/evaluate_single.py    # results/eval_exp7_ckpt80.json
Sharded (SLURM array), then merged:
  ... --shard 0/3 ; ... --shard 1/3 ; ... --shard 2/3 ; ... --merge
"""


from relrl.evaluation.cli import add_adapter_arg, add_eval_args, add_model_args, run_study_cli
from relrl.runtime.cli import ArgumentParser, run_main

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(parser, DEFAULT_MODEL, study_default_output=True)
    add_adapter_arg(parser)
    add_eval_args(parser)
    return parser, parser.parse_args(argv)


def main(argv=None):
    return run_study_cli(*parse_args(argv))


if __name__ == "__main__":
    run_main(main)

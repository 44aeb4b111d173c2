"""GRPO with DAPO dynamic sampling from a fresh LoRA (r=32, alpha=32): the study's exp10.

The same trainer as grpo_exp7_dynamic.py without the SFT warm start; all logic is in
relrl/rl/grpo_main.py.

  python training/grpo_exp10_nosft.py --model tiny --dataset data/mixed.jsonl \\
      --val-dataset data/val.jsonl --output-dir runs/exp10
"""
from relrl.rl.grpo_main import main as train
from relrl.runtime.cli import run_main


def main(argv=None):
    return train("exp10", argv)


if __name__ == "__main__":
    run_main(main)

"""GRPO with DAPO dynamic sampling from a fresh LoRA (r=32, alpha=32): the study's exp10.

The same trainer as grpo_exp7_dynamic.py without the SFT warm start; all logic is in
relrl/grpo_trainer.py.

  python training/grpo_exp10_nosft.py --model tiny --dataset data/mixed.jsonl \\
      --val-dataset data/val.jsonl --output-dir runs/exp10
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from relrl.cli import run_main
from relrl.grpo_trainer import main as train


def main(argv=None):
    return train("exp10", argv)


if __name__ == "__main__":
    run_main(main)

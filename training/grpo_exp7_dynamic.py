"""GRPO with DAPO dynamic sampling from an SFT warm start: the study's exp7.

The SFT adapter (--sft-adapter / SFT_LORA_PATH, or <folder>/fold_<k> with --fold / FOLD) is
trained further; the reference policy for the KL term is the base model (adapter off).
All logic is in relrl/rl/grpo_main.py; this file only picks the defaults.

  python training/grpo_exp7_dynamic.py --model tiny --dataset data/mixed.jsonl \\
      --val-dataset data/val.jsonl --sft-adapter adapters/fold_4 --output-dir runs/exp7
"""
from relrl.rl.grpo_main import main as train
from relrl.runtime.cli import run_main


def main(argv=None):
    return train("exp7", argv)


if __name__ == "__main__":
    run_main(main)

"""LoRA SFT of Qwen3-8B with group-aware k-fold cross-validation: the study's SFT warm start.

Each fold trains a fresh LoRA (r=16, alpha=32, lr 2e-4, 4 epochs, NEFTune alpha 5, max length
4096) on the other folds' questions and worked solutions, then scores it against the base model
on its held-out fold (McNemar per fold). `--folds 1 --train-all` trains the warm start on every
row. All logic is in relrl/finetune/sft_kfold.py; this file only picks the defaults.

  python training/sft_qwen3_kfold.py --model tiny --dataset data/non_mixed.jsonl \\
      --output-dir runs/sft --folds 5            # adapters in runs/sft/adapters/fold_k/
  python training/grpo_exp7_dynamic.py ... --sft-adapter runs/sft/adapters --fold 4
"""


from relrl.finetune.sft_kfold import main as train
from relrl.runtime.cli import run_main


def main(argv=None):
    return train(argv, default_model="unsloth/Qwen3-8B-unsloth-bnb-4bit",
                 default_output="outputs/sft_qwen3",
                 about="LoRA SFT of Qwen3-8B with group-aware k-fold cross-validation")


if __name__ == "__main__":
    run_main(main)

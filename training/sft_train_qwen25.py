"""LoRA SFT of Qwen2.5-7B-Instruct: the study's Qwen2.5 baseline, the same trainer as
sft_qwen3_kfold.py with another default model (and the same folds as
evaluation/evaluate_qwen25_base.py for the same --folds and --fold-seed).

  python training/sft_train_qwen25.py --model tiny --dataset data/non_mixed.jsonl \\
      --output-dir runs/sft_qwen25 --folds 5
"""


from relrl.finetune.sft_kfold import main as train
from relrl.runtime.cli import run_main


def main(argv=None):
    return train(argv, default_model="Qwen/Qwen2.5-7B-Instruct",
                 default_output="outputs/sft_qwen25",
                 about="LoRA SFT of Qwen2.5-7B-Instruct with group-aware k-fold cross-validation")


if __name__ == "__main__":
    run_main(main)

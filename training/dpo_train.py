"""DPO baseline: a LoRA trained on preference pairs (a correct completion chosen, a wrong one
rejected, same question) built from screening or evaluation outputs, the reference being the
base model (the adapter switched off). All logic is in relrl/finetune/dpo_trainer.py.

  python training/dpo_train.py --model tiny --pairs-from data/screen/screening.json \\
      --output-dir runs/dpo                      # adapter in runs/dpo/adapter/
"""


from relrl.finetune.dpo_trainer import main
from relrl.runtime.cli import run_main

if __name__ == "__main__":
    run_main(main)

"""Trainers on fixed data: SFT with the k-fold sweep (sft_trainer), DPO (dpo_trainer, dpo_loss), and the
chat-formatted examples both train on (examples)."""

"""Trainers on fixed data: the epoch loop they share (epoch_loop), SFT (sft_trainer) and its k-fold
sweep (sft_kfold), DPO (dpo_trainer, dpo_loss), and the chat-formatted examples both train on
(examples)."""

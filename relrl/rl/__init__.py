"""Reinforcement learning: the GRPO trainer (grpo_trainer; its micro-batches in grpo_batch, what it
reports in grpo_metrics), its loss (grpo_loss) and the dynamic sampler that picks which groups
train (dynamic_sampling)."""

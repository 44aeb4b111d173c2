"""Reinforcement learning: the GRPO trainer, its loss (grpo_loss) and the dynamic sampler that picks
which groups train (dynamic_sampling)."""

"""Tools a model may call during a rollout (Qwen3's tool-call format)."""

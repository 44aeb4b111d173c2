"""Every model by name (by_name): the built-in tiny models, built on first use (tiny_build), hub
models and local folders, each with its rollout engine."""

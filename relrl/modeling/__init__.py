"""Causal LMs: loading a model with its tokenizer and adapter (loading), per-token log-probs
(logprobs), and the architecture and tokenizer of the built-in tiny models."""

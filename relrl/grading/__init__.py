"""Grading: reading the final answer out of a response, tolerance rules, grade(), and the reward
functions TRL and verl call (rewards.py). Imports nothing else from the package."""

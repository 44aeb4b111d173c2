"""Grading, the one judge of every answer: the GRPO reward, every evaluation and the data checks.
Imports nothing else from the package.

  numbers      number forms, normalize(), parse_target / parse_target_values (ground truth)
  extraction   the final answer of a response: extract_answer(), extract_values(), strip_thinking()
  target_kind  whether a question asks for a probability or a value: target_kind_of()
  scoring      tolerance rules, reward tiers, grade(), is_correct_value()
  rewards      the reward functions TRL and verl call, built on grade()
"""

"""GRPO with dynamic sampling for numerical reliability-engineering problems.

Folders, bottom layer first (a folder imports only its own layer or lower ones; the README's layout
table says what each holds): problems, grading, tools < runtime < data < modeling < engines <
models < evaluation < rl, finetune. The scripts under training/, evaluation/, generators/ and
benchmarks/, and the study's reporting (study/), import from here; nothing here imports them.
"""

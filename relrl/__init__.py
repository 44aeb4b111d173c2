"""Shared code for the reliability-engineering GRPO study.

One module per concern: grading (answer extraction and rewards), data (dataset and result IO),
cli (command-line conventions), stats, losses, modeling, sampling, checkpointing, api_client.
Scripts under training/, evaluation/ and generators/ import from here and nothing imports them.
"""

"""Scoring models on question sets and comparing them.

  runner         sample, grade, record and resume one model on a list of questions
  settings       EvalSettings, what a run samples and how it grades
  model_results  a model result from per-question records; the paired comparison of two
  shards         splitting a run over SLURM array tasks and merging their files
  cli            the evaluation scripts' shared flags and run_cli, the run they all make
  stats, clustered_stats   the statistics that compare models
  results_io, strata, guess_baselines, retention   result files, strata, guessing baselines,
                 retention questions
  api_client, api_jobs     a chat client for frontier models, and many of its calls at once
"""

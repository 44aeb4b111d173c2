"""One pooled report for every replication of the miniature study, parameterised by its design.

  design      a design as data (arms, comparisons, claims, which parts and sections it has),
              the two run so far (FIRST, REDONE) and the choice of one from the seeds' settings
  seed_files  reading a seed folder's per-question records
  groups      group-level comparisons and accuracies, pooled over seeds; record strata
  runs        what the GRPO statistics and stage times give: waste, best steps, run time
  baselines   guess baselines and mean@k / pass@K per set
  claims      the claims' verdicts
  pool        pooled.json: every number a design's report needs
  sections    report.md: its sections, in the order its design names

A new design is a new `Design` in design.py (and, for a new kind of number, a part in pool.py
and a section in sections.py that any design may name), not a new report module.
study/pooled_report.py writes both files for a results folder.
"""

"""The study's reporting, outside the library: demo and replication reports, the re-analysis, plots,
and the demo pipeline's bookkeeping (stage_inputs, stage_times)."""

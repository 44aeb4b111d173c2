"""The study's reporting, outside the library: demo and replication reports, the re-analysis, plots,
the demo pipeline's stages (demo_stages, under demo.py) and its bookkeeping (stage_inputs,
stage_times)."""

"""Datasets on disk: reading and writing rows and JSON (dataset_io), the prompt (prompting), k-fold
splits (folds) and the export to verl (verl_export)."""

"""Scoring models on question sets (runner), the statistics that compare them (stats,
clustered_stats), result files (results_io), guessing baselines, strata, retention questions, and the
chat client for frontier models (api_client)."""

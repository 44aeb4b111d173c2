"""Reliability-engineering problem families, one module per topic, found through registry.py."""

"""What every script and trainer runs on: command-line conventions (cli), settings from dataclasses
and YAML recipes (config), data parallelism (distributed), checkpoints, the stop signal, tracking."""

"""benchmarks/gpu_check.py's parts: the plan (which steps, in which order, within which budget),
the environment step, the path steps, the exp7 run and the tool-turn log-prob gap. Each path
runs in its own process (gpu_check.py --worker), so a vLLM engine's memory goes back with it."""

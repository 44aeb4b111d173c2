import os
import sys
from pathlib import Path

# One thread per process: the tests start many small model processes on a 2-core machine, where
# torch's default thread count oversubscribes the cores and slows tiny models by an order of
# magnitude. No test may reach a model hub.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SEED_DATA = ROOT.parent / "shared" / "seed-data"

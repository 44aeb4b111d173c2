"""The learning-rate schedule every trainer uses."""
from __future__ import annotations

import math
from typing import Callable


def warmup_cosine(total: int, warmup_ratio: float) -> Callable[[int], float]:
    """lr factor for update u: linear warmup over the first warmup_ratio of updates, then a
    cosine decay to 0 at `total`."""
    warmup = math.ceil(warmup_ratio * total)

    def factor(u: int) -> float:
        if u < warmup:
            return (u + 1) / warmup
        progress = (u - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor

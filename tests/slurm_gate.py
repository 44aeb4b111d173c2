"""Whether a missing SLURM cluster skips a test or fails it.

.ci/run sets RELRL_CI_SLURM=1 when it started a cluster: there a cluster that does not answer
is a broken CI run, not a machine without SLURM, so the SLURM tests fail. Elsewhere they skip.
"""
import os

import pytest


def ci_started_a_cluster() -> bool:
    return os.environ.get("RELRL_CI_SLURM") == "1"


def cluster_unavailable(reason: str) -> None:
    """Skip (no cluster expected) or fail (CI started one) because of `reason`."""
    if ci_started_a_cluster():
        pytest.fail(f"RELRL_CI_SLURM=1 but the SLURM cluster is unusable: {reason}",
                    pytrace=False)
    pytest.skip(reason)

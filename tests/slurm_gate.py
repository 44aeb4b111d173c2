"""Whether a missing SLURM cluster skips a test or fails it.

.ci/run tries to start a one-node cluster and exports RELRL_CI_SLURM: 1 when it started, 0 when
it could not. Either way CI meant the SLURM tests to run, so a cluster that does not answer is a
broken CI run, not a machine without SLURM: the tests fail. Without the variable they skip.
"""
import os

import pytest


def ci_started_a_cluster() -> bool:
    """True under .ci/run, whether or not its cluster came up."""
    return os.environ.get("RELRL_CI_SLURM", "") != ""


def cluster_unavailable(reason: str) -> None:
    """Skip (no cluster expected) or fail (CI tried to start one) because of `reason`."""
    state = os.environ.get("RELRL_CI_SLURM", "")
    if state == "0":
        pytest.fail(f"RELRL_CI_SLURM=0: .ci/run could not start the SLURM cluster ({reason})",
                    pytrace=False)
    if state:
        pytest.fail(f"RELRL_CI_SLURM={state} but the SLURM cluster is unusable: {reason}",
                    pytrace=False)
    pytest.skip(reason)

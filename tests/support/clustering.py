"""The clustering step run round after round on fixed points (plaintext distances)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from secfpp.crypto.clustering import ClusteringConfig, Membership, StepResult, secpc_step
from secfpp.crypto.secpc import plaintext_distances


def fixed_point_steps(
    x: np.ndarray,
    config: ClusteringConfig,
    *,
    rounds: int,
    salt: str,
    jitter: float = 0.0,
    rng: np.random.Generator | None = None,
) -> Iterator[StepResult]:
    """Each of ``rounds`` clustering steps on the rows of ``x`` (one participant each), from
    one cluster, every round's probes and null draws salted ``f"{salt}|{round}"``. The
    points do not move between rounds (a data signal) unless ``jitter > 0``: then each
    round sees ``x`` plus fresh ``N(0, jitter^2)`` noise from ``rng``."""
    n = x.shape[0]
    membership = Membership.initial(range(n))
    for number in range(1, rounds + 1):
        refs = membership.reference_sets(
            range(n),
            min_aggregation_size=config.min_aggregation_size,
            min_reference_size=config.min_reference_size,
            salt=f"{salt}|{number}",
        )
        assert refs is not None
        points = x
        if jitter > 0:
            assert rng is not None, "jitter needs an rng"
            points = x + jitter * rng.standard_normal(x.shape)
        distances = plaintext_distances(points, refs)
        result = secpc_step(distances, membership, config, salt=f"{salt}|{number}")
        membership = result.membership
        yield result

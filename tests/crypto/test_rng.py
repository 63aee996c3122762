"""Injected randomness: reproducible test source, unbiased field sampling, normals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from crypto.rng import DeterministicRandom, RandomSource, SystemRandom


def test_sources_satisfy_protocol() -> None:
    assert isinstance(SystemRandom(), RandomSource)
    assert isinstance(DeterministicRandom(1), RandomSource)


def test_deterministic_is_reproducible_and_seed_sensitive() -> None:
    assert DeterministicRandom(b"a").random_bytes(64) == DeterministicRandom(b"a").random_bytes(64)
    assert DeterministicRandom(b"a").random_bytes(64) != DeterministicRandom(b"b").random_bytes(64)
    assert "seed" not in repr(DeterministicRandom(b"secret")).replace("<seed>", "")


@pytest.mark.parametrize("prime", [3, 17, 65537, 2**31 - 1, 2**61 - 1])
def test_field_elements_in_range(prime: int) -> None:
    values = SystemRandom().field_elements(prime, (50, 40))
    assert values.shape == (50, 40)
    assert values.min() >= 0
    assert values.max() < prime


def test_field_elements_uniform() -> None:
    # 17 is far from a power of two: modulo bias would show. Level 1e-4 (false-alarm rate).
    counts = np.bincount(DeterministicRandom(3).field_elements(17, 170_000), minlength=17)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_standard_normal_moments() -> None:
    z = DeterministicRandom(4).standard_normal(200_001)
    assert z.shape == (200_001,)
    assert stats.kstest(z, "norm").pvalue > 1e-4

"""Injected randomness: reproducible test source, unbiased field sampling, normals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from secfpp.crypto.rng import DeterministicRandom, RandomSource, SystemRandom


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


@pytest.mark.parametrize("prime", [17, 65537, 2**31 - 1, 4_294_967_291, 2**61 - 1])
def test_system_field_elements_uniform_with_narrow_words(prime: int) -> None:
    """SystemRandom draws primes below 2**32 from 4-byte words: still no modulo bias.
    The top and bottom residues mod 17 of a large sample are uniform (level 1e-4)."""
    values = SystemRandom().field_elements(prime, 170_000)
    assert values.dtype == np.int64
    assert values.min() >= 0
    assert values.max() < prime
    counts = np.bincount(values % 17, minlength=17)
    assert stats.chisquare(counts).pvalue > 1e-4
    # values near p (where a biased reduction would concentrate) occur at the uniform rate
    top = int((values >= prime - prime // 8).sum())
    assert abs(top / values.size - (prime // 8) / prime) < 0.01


def test_system_random_bytes_long_requests_are_fresh_and_uniform() -> None:
    """Requests of 4 KiB and more come from a fresh AES-CTR keystream per call."""
    source = SystemRandom()
    for n in (0, 1, 4095, 4096, 100_000):
        assert len(source.random_bytes(n)) == n
    a, b = source.random_bytes(1 << 16), source.random_bytes(1 << 16)
    assert a != b
    assert a[:32] != b[:32]
    counts = np.bincount(np.frombuffer(a + b, dtype=np.uint8), minlength=256)
    assert stats.chisquare(counts).pvalue > 1e-4

"""Injected randomness for every protocol step.

Every share padding chunk, mask, nonce and noise sample in SecFPP comes from a
:class:`RandomSource`. Production code uses :class:`SystemRandom` (the operating
system's CSPRNG, ``os.urandom``); tests and known-answer vectors use
:class:`DeterministicRandom`, an AES-256-CTR keystream under a fixed seed, which is
cryptographically strong but reproducible. No protocol function creates its own
generator, and nothing here touches numpy's global state.

Sampling methods:

* ``random_bytes(n)`` — ``n`` uniform bytes.
* ``field_elements(prime, shape)`` — uniform integers in ``[0, prime)`` (rejection
  sampling on ``ceil(log2 prime)``-bit words, so there is no modulo bias).
* ``uniform(shape)`` — floats in ``[0, 1)`` with 53 random bits each.
* ``standard_normal(shape)`` — N(0, 1) samples by the Box-Muller transform of
  ``uniform`` draws.
"""

from __future__ import annotations

import hashlib
import math
import os
from typing import Protocol, runtime_checkable

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from numpy.typing import NDArray

__all__ = ["DeterministicRandom", "RandomSource", "SeedStream", "SystemRandom"]

Shape = int | tuple[int, ...]


@runtime_checkable
class RandomSource(Protocol):
    """Where protocol randomness comes from (see module docstring)."""

    def random_bytes(self, n: int) -> bytes:
        """Return ``n`` uniformly random bytes."""
        ...

    def field_elements(self, prime: int, shape: Shape) -> NDArray[np.int64]:
        """Uniform elements of GF(prime) as int64, values in ``[0, prime)``."""
        ...

    def uniform(self, shape: Shape) -> NDArray[np.float64]:
        """Uniform floats in ``[0, 1)`` with 53 random bits each."""
        ...

    def standard_normal(self, shape: Shape) -> NDArray[np.float64]:
        """Standard normal samples."""
        ...


def _size(shape: Shape) -> int:
    if isinstance(shape, int):
        shape = (shape,)
    for dim in shape:
        if dim < 0:
            raise ValueError(f"Argument 'shape' must have non-negative entries, not {shape}")
    return math.prod(shape)


class _ByteSampler:
    """Turns a byte source into the sampling methods of :class:`RandomSource`."""

    _narrow_words = False
    """Draw elements of primes below ``2**32`` from 4-byte words (half the bytes); off
    for :class:`DeterministicRandom`, whose streams known-answer vectors pin."""

    _tight_batches = False
    """Ask the byte source for about what rejection sampling will keep (``missing /
    acceptance``, plus 2 % and 16 words) instead of twice the missing words: for the
    Mersenne primes nearly every word is kept, so half the stream was drawn and dropped.
    Within one call the result is the first accepted words of the stream either way; only
    what a *later* call sees changes, so it is off for :class:`DeterministicRandom` (its
    known-answer vectors pin several calls)."""

    def random_bytes(self, n: int) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    def field_elements(self, prime: int, shape: Shape) -> NDArray[np.int64]:
        if not 2 <= prime < 2**63:
            raise ValueError(f"Argument 'prime' must be in [2, 2**63), not {prime}")
        size = _size(shape)
        bits = (prime - 1).bit_length()
        width = 4 if self._narrow_words and bits <= 32 else 8
        dtype = np.dtype(f"<u{width}")
        mask = dtype.type((1 << bits) - 1)
        bound = dtype.type(prime)
        out = np.empty(size, dtype=np.int64)
        filled = 0
        acceptance = prime / (1 << bits)  # > 1/2: bits is the bit length of p - 1
        while filled < size:
            if self._tight_batches:
                want = int((size - filled) / acceptance * 1.02) + 16
            else:  # acceptance probability is > 1/2: ask for twice what is missing
                want = max(2 * (size - filled), 16)
            words = np.frombuffer(self.random_bytes(width * want), dtype=dtype) & mask
            good = words[words < bound].astype(np.int64)
            take = min(good.size, size - filled)
            out[filled : filled + take] = good[:take]
            filled += take
        return out.reshape(shape)

    def uniform(self, shape: Shape) -> NDArray[np.float64]:
        size = _size(shape)
        words = np.frombuffer(self.random_bytes(8 * size), dtype="<u8") >> np.uint64(11)
        return (words.astype(np.float64) * (1.0 / 2**53)).reshape(shape)

    def standard_normal(self, shape: Shape) -> NDArray[np.float64]:
        size = _size(shape)
        half = (size + 1) // 2
        u1 = 1.0 - self.uniform(half)  # in (0, 1]: log is finite
        u2 = self.uniform(half)
        radius = np.sqrt(-2.0 * np.log(u1))
        angle = 2.0 * np.pi * u2
        z = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])
        return z[:size].reshape(shape)


_STREAM_FROM = 4096
"""Requests of at least this many bytes come from a fresh AES-256-CTR keystream."""


class SystemRandom(_ByteSampler):
    """The operating system's CSPRNG. Use this in production.

    Up to :data:`_STREAM_FROM` bytes come straight from ``os.urandom``; a longer request
    (a participant's masks and rounding draws are megabytes per round) is the
    AES-256-CTR keystream under a fresh 32-byte key and 16-byte initial counter from
    ``os.urandom``, used for that request only and dropped (the construction of
    :class:`DeterministicRandom` with an unpredictable key, as in NIST SP 800-90A's
    CTR_DRBG): several times faster than ``os.urandom`` where AES runs in hardware.
    Field elements of primes below ``2**32`` are drawn from 4-byte words.
    """

    _narrow_words = True
    _tight_batches = True

    def random_bytes(self, n: int) -> bytes:
        if n < _STREAM_FROM:
            return os.urandom(n)
        seed = os.urandom(48)
        stream = Cipher(algorithms.AES(seed[:32]), modes.CTR(seed[32:])).encryptor()
        return stream.update(bytes(n)) + stream.finalize()

    def __repr__(self) -> str:
        return "SystemRandom()"


class _KeyedStream(_ByteSampler):
    """The AES-256-CTR keystream under a 32-byte key, from a zero initial counter."""

    def __init__(self, key: bytes) -> None:
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(b"\x00" * 16)).encryptor()

    def random_bytes(self, n: int) -> bytes:
        if n < 0:
            raise ValueError(f"Argument 'n' must be non-negative, not {n}")
        return self._encryptor.update(b"\x00" * n)


class DeterministicRandom(_KeyedStream):
    """Reproducible CSPRNG: the AES-256-CTR keystream under ``SHA-256(seed)``.

    For tests, known-answer vectors and benchmarks only; two instances with the
    same seed produce the same stream.

    >>> DeterministicRandom(b"kat").random_bytes(4) == DeterministicRandom(b"kat").random_bytes(4)
    True
    """

    def __init__(self, seed: bytes | str | int) -> None:
        if isinstance(seed, int):
            seed = seed.to_bytes(16, "little", signed=True)
        elif isinstance(seed, str):
            seed = seed.encode()
        super().__init__(hashlib.sha256(b"secfpp-drbg|" + seed).digest())

    def __repr__(self) -> str:
        return "DeterministicRandom(<seed>)"


class SeedStream(_KeyedStream):
    """A pseudorandom stream that two parties derive from one shared secret seed.

    The AES-256-CTR keystream under ``SHA-256(label | seed)`` (zero initial counter): the
    construction of :class:`DeterministicRandom`, for production use where a party sends
    a 32-byte secret seed instead of the values it stands for (the zero-sharings of
    :mod:`crypto.rerandomize`). Each seed is fresh from a :class:`SystemRandom`, used for
    one stream only and travels sealed, so the stream is indistinguishable from uniform to
    anyone without the seed. ``label`` separates the uses of one seed (none today).
    Field elements come from 8-byte words whatever the prime (the stream is pinned by
    known-answer vectors).
    """

    _tight_batches = True  # one call per stream (expand_seed): its result is unchanged

    def __init__(self, seed: bytes, *, label: bytes) -> None:
        if not isinstance(seed, bytes) or len(seed) != 32:
            raise ValueError("Argument 'seed' must be 32 bytes")
        super().__init__(hashlib.sha256(b"secfpp-seed-stream|" + label + b"|" + seed).digest())

    def __repr__(self) -> str:
        return "SeedStream(<seed>)"


def default_random() -> RandomSource:
    """The production source; a function so callers never share hidden state."""
    return SystemRandom()

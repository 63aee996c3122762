"""Exact sampling of the discrete Gaussian (Canonne, Kamath & Steinke, NeurIPS 2020).

The discrete Gaussian with parameter ``sigma^2 > 0`` is the distribution on the
integers with ``P[X = x] = exp(-x^2 / (2 sigma^2)) / sum_y exp(-y^2 / (2 sigma^2))``.
Added to an integer-valued query of L2 sensitivity ``Delta`` it is
``Delta^2 / (2 sigma^2)``-zCDP (CKS Theorem 4): the Rényi curve of the continuous
Gaussian with noise multiplier ``sigma / Delta``, with no floating-point caveat,
because every output is an integer and every sampling decision below is exact.

Algorithms (CKS section 5), all in integer and rational arithmetic:

* :func:`bernoulli_exp_neg` — ``Bernoulli(exp(-gamma))`` for rational ``gamma >= 0``
  (CKS Algorithm 1): for ``gamma <= 1`` draw ``A_k ~ Bernoulli(gamma / k)`` for
  ``k = 1, 2, ...`` until the first failure at ``k = K`` and return ``K`` odd; for
  ``gamma > 1`` require ``floor(gamma)`` successes of ``Bernoulli(exp(-1))`` and one of
  ``Bernoulli(exp(-(gamma - floor(gamma))))``.
* :func:`discrete_laplace` — ``P[Y = y] ~ exp(-|y| / t)`` for an integer ``t >= 1``
  (CKS Algorithm 2 with ``s = 1``): ``U`` uniform in ``{0..t-1}`` kept with
  probability ``exp(-U/t)``, ``V`` geometric (successes of ``Bernoulli(exp(-1))``),
  ``|Y| = U + t V``, a random sign, and ``-0`` rejected.
* :func:`discrete_gaussian` — CKS Algorithm 3: ``t = floor(sigma) + 1``,
  ``Y ~ Lap_Z(t)`` kept with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``.

``Bernoulli(p)`` for a rational ``p = num/den`` compares a uniform ``U`` in ``[0, 1)``
with ``p`` lazily, 64 random bits at a time: with ``w`` the next 64 bits, ``U`` lies in
``[w, w+1) / 2^64``; the answer is decided unless ``p`` falls inside that interval
(probability ``2^-64`` per round), in which case the comparison continues on the next
64 bits with ``p`` replaced by ``2^64 p - w``. Intermediate values are Python integers
(numpy ``object`` arrays), so nothing overflows and nothing is rounded.

When every denominator is below ``2^31`` the same comparison runs on int64 with 32-bit
words instead (the products stay below ``2^63``).

Every bit comes from the injected :class:`~crypto.rng.RandomSource` (the CSPRNG in
production). The samplers are vectorized: every loop runs over the array of samples
still undecided, so the number of Python-level iterations grows with the logarithm of
the sample count, not with the count. Measured throughput is in the README
("Differential privacy"): 10^5 samples took 0.4-1.4 s on the 2-core dev machine for any
``sigma`` up to ``2^40``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.rng import RandomSource

__all__ = [
    "MAX_SIGMA2",
    "bernoulli_exp_neg",
    "discrete_gaussian",
    "discrete_gaussian_variance",
    "discrete_laplace",
]

#: Largest ``sigma^2`` accepted: ``sigma <= 2^40`` keeps ``|Y| = U + t V`` far inside int64.
MAX_SIGMA2 = Fraction(2**80)

_WORD = 1 << 64
_SMALL = 1 << 31
Shape = int | tuple[int, ...]
ObjectArray = NDArray[Any]


def _rational(name: str, value: object) -> Fraction:
    """``value`` as an exact Fraction; floats are refused so no rounding hides in a caller."""
    if isinstance(value, bool) or not isinstance(value, Rational):
        raise ParameterError(
            name, f"must be an int or fractions.Fraction (exact rational), not {value!r}"
        )
    return Fraction(int(value.numerator), int(value.denominator))


def _size(shape: Shape) -> int:
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in dims):
        raise ParameterError("shape", f"must hold non-negative ints, not {shape!r}")
    return math.prod(dims)


def _words(rng: RandomSource, n: int) -> NDArray[np.uint64]:
    return np.frombuffer(rng.random_bytes(8 * n), dtype="<u8").astype(np.uint64)


def _bits(rng: RandomSource, n: int) -> NDArray[np.bool_]:
    raw = np.frombuffer(rng.random_bytes((n + 7) // 8), dtype=np.uint8)
    return np.unpackbits(raw, count=n).astype(bool)


def _uniform_below(rng: RandomSource, bound: int, n: int) -> NDArray[np.int64]:
    """``n`` integers uniform in ``[0, bound)``, ``1 <= bound < 2^62``, by rejection."""
    mask = np.uint64((1 << (bound - 1).bit_length()) - 1)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        want = max(2 * (n - filled), 16)  # acceptance > 1/2
        words = _words(rng, want) & mask
        good = words[words < np.uint64(bound)].astype(np.int64)
        take = min(good.size, n - filled)
        out[filled : filled + take] = good[:take]
        filled += take
    return out


def _bernoulli_ratio(num: ObjectArray, den: ObjectArray, rng: RandomSource) -> NDArray[np.bool_]:
    """Independent ``Bernoulli(num_i / den_i)``, ``0 <= num_i <= den_i``, exactly.

    ``num`` and ``den`` are object arrays of Python ints (or broadcastable to one).
    When every ``den_i < 2^31`` the comparison runs on int64 with 32-bit words (the same
    exact test, 32 bits of ``U`` at a time); otherwise on Python ints, 64 bits at a time.
    """
    num = np.array(num, dtype=object).ravel()
    den = np.broadcast_to(np.array(den, dtype=object), num.shape).ravel()
    if num.size and max(den) < _SMALL:
        return _bernoulli_ratio_small(num.astype(np.int64), den.astype(np.int64), rng)
    out = np.zeros(num.size, dtype=bool)
    pending = np.arange(num.size)
    while pending.size:
        w = _words(rng, pending.size).astype(object)
        d = den[pending]
        low = w * d  # U >= w / 2^64
        target = num[pending] * _WORD  # compare U * den with num, scaled by 2^64
        yes = (low + d) <= target  # the whole interval of U lies below num/den
        no = low >= target  # the whole interval lies at or above it
        out[pending[yes]] = True
        undecided = ~(yes | no)
        num[pending[undecided]] = (target - low)[undecided]
        pending = pending[undecided]
    return out


def _bernoulli_ratio_small(
    num: NDArray[np.int64], den: NDArray[np.int64], rng: RandomSource
) -> NDArray[np.bool_]:
    """:func:`_bernoulli_ratio` for ``den_i < 2^31``: every product stays below ``2^63``."""
    out = np.zeros(num.size, dtype=bool)
    pending = np.arange(num.size)
    num = num.copy()
    while pending.size:
        w = np.frombuffer(rng.random_bytes(4 * pending.size), dtype="<u4").astype(np.int64)
        d = den[pending]
        low = w * d
        target = num[pending] << 32
        yes = (low + d) <= target
        no = low >= target
        out[pending[yes]] = True
        undecided = ~(yes | no)
        num[pending[undecided]] = (target - low)[undecided]
        pending = pending[undecided]
    return out


def _bernoulli_exp_neg_unit(
    num: ObjectArray, den: ObjectArray, rng: RandomSource
) -> NDArray[np.bool_]:
    """``Bernoulli(exp(-num_i/den_i))`` for ``0 <= num_i/den_i <= 1`` (CKS Alg. 1, first case)."""
    num = np.array(num, dtype=object).ravel()
    den = np.broadcast_to(np.array(den, dtype=object), num.shape).ravel()
    out = np.zeros(num.size, dtype=bool)
    k = np.ones(num.size, dtype=np.int64)
    active = np.arange(num.size)
    while active.size:
        success = _bernoulli_ratio(num[active], den[active] * k[active].astype(object), rng)
        stopped = active[~success]
        out[stopped] = k[stopped] % 2 == 1
        active = active[success]
        k[active] += 1
    return out


def _bernoulli_exp_neg(num: ObjectArray, den: ObjectArray, rng: RandomSource) -> NDArray[np.bool_]:
    """``Bernoulli(exp(-num_i/den_i))`` for any ``num_i/den_i >= 0`` (CKS Algorithm 1)."""
    num = np.array(num, dtype=object).ravel()
    den = np.broadcast_to(np.array(den, dtype=object), num.shape).ravel()
    whole = num // den
    out = np.ones(num.size, dtype=bool)
    remaining = whole.copy()
    active = np.flatnonzero(remaining > 0)
    one = np.ones(1, dtype=object)
    while active.size:  # floor(gamma) trials of Bernoulli(exp(-1)); any failure is a 0
        success = _bernoulli_exp_neg_unit(np.broadcast_to(one, active.shape), one, rng)
        out[active[~success]] = False
        active = active[success]
        remaining[active] -= 1
        active = active[remaining[active] > 0]
    alive = np.flatnonzero(out)
    if alive.size:
        frac = num[alive] - whole[alive] * den[alive]
        out[alive] = _bernoulli_exp_neg_unit(frac, den[alive], rng)
    return out


def bernoulli_exp_neg(gamma: Fraction | int, size: int, *, rng: RandomSource) -> NDArray[np.bool_]:
    """``size`` independent draws of ``Bernoulli(exp(-gamma))``, ``gamma >= 0`` rational.

    >>> from secfpp.crypto.rng import DeterministicRandom
    >>> bernoulli_exp_neg(Fraction(0), 3, rng=DeterministicRandom(0)).tolist()
    [True, True, True]
    """
    g = _rational("gamma", gamma)
    if g < 0:
        raise ParameterError("gamma", f"must be >= 0, not {g}")
    n = _size(size)
    return _bernoulli_exp_neg(
        np.full(n, g.numerator, dtype=object), np.full(n, g.denominator, dtype=object), rng
    )


def _laplace(t: int, n: int, rng: RandomSource) -> NDArray[np.int64]:
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    one = np.ones(1, dtype=object)
    while pending.size:
        u = _uniform_below(rng, t, pending.size)
        keep = _bernoulli_exp_neg_unit(u.astype(object), np.array(t, dtype=object), rng)
        rejected = [pending[~keep]]
        pending, u = pending[keep], u[keep]
        v = np.zeros(pending.size, dtype=np.int64)
        active = np.arange(pending.size)
        while active.size:  # V: successes of Bernoulli(exp(-1)) before the first failure
            success = _bernoulli_exp_neg_unit(np.broadcast_to(one, active.shape), one, rng)
            active = active[success]
            v[active] += 1
        magnitude = u + t * v
        negative = _bits(rng, pending.size)
        minus_zero = negative & (magnitude == 0)
        good = ~minus_zero
        out[pending[good]] = np.where(negative, -magnitude, magnitude)[good]
        rejected.append(pending[minus_zero])
        pending = np.concatenate(rejected)
    return out


def discrete_laplace(t: int, shape: Shape, *, rng: RandomSource) -> NDArray[np.int64]:
    """Samples with ``P[Y = y] = (e^(1/t) - 1) / (e^(1/t) + 1) * exp(-|y| / t)``.

    ``t`` is the integer scale (``1 <= t <= 2^41``); the result is int64 of ``shape``.

    >>> from secfpp.crypto.rng import DeterministicRandom
    >>> discrete_laplace(3, (2, 2), rng=DeterministicRandom(0)).shape
    (2, 2)
    """
    if isinstance(t, bool) or not isinstance(t, int) or not 1 <= t <= 2**41:
        raise ParameterError("t", f"must be an int in [1, 2**41], not {t!r}")
    return _laplace(t, _size(shape), rng).reshape(shape)


def discrete_gaussian(
    sigma2: Fraction | int, shape: Shape, *, rng: RandomSource
) -> NDArray[np.int64]:
    """Independent samples of the discrete Gaussian ``N_Z(0, sigma2)`` (CKS Algorithm 3).

    Args:
        sigma2: the parameter ``sigma^2``, an exact rational (``int`` or
            :class:`fractions.Fraction`) in ``(0, 2^80]``; floats are refused, so a caller
            converts with ``Fraction(x)`` (exact) or rounds up on purpose.
        shape: output shape.
        rng: the source of every random bit.

    Returns:
        int64 array of ``shape``. Its variance is just below ``sigma2`` (exactly
        :func:`discrete_gaussian_variance`; within ``1e-8`` relative for ``sigma2 >= 1``).

    >>> from secfpp.crypto.rng import DeterministicRandom
    >>> a = discrete_gaussian(Fraction(9, 4), 5, rng=DeterministicRandom(1))
    >>> b = discrete_gaussian(Fraction(9, 4), 5, rng=DeterministicRandom(1))
    >>> a.dtype, bool((a == b).all())
    (dtype('int64'), True)
    """
    s2 = _rational("sigma2", sigma2)
    if not 0 < s2 <= MAX_SIGMA2:
        raise ParameterError("sigma2", f"must be in (0, 2**80], not {s2}")
    n = _size(shape)
    a, b = s2.numerator, s2.denominator  # sigma^2 = a / b
    t = math.isqrt(a // b) + 1  # floor(sigma) + 1, exactly
    # gamma = (|Y| - sigma^2/t)^2 / (2 sigma^2) = (|Y| t b - a)^2 / (2 a b t^2)
    den = np.array(2 * a * b * t * t, dtype=object)
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        y = _laplace(t, pending.size, rng)
        gap = np.abs(y).astype(object) * (t * b) - a
        accept = _bernoulli_exp_neg(gap * gap, den, rng)
        out[pending[accept]] = y[accept]
        pending = pending[~accept]
    return out.reshape(shape)


def discrete_gaussian_variance(sigma2: Fraction | int) -> float:
    """``Var[N_Z(0, sigma2)]`` by summing the pmf (float; for tests and documentation).

    Always below ``sigma2`` (CKS Proposition 19); the gap is ``< 1e-8`` relative once
    ``sigma2 >= 1``.

    >>> round(discrete_gaussian_variance(4), 9)
    4.0
    """
    s2 = float(_rational("sigma2", sigma2))
    if not 0 < s2 <= float(MAX_SIGMA2):
        raise ParameterError("sigma2", f"must be in (0, 2**80], not {s2}")
    half_width = int(40 * math.sqrt(s2)) + 2
    if half_width > 10**7:  # continuous limit: the lattice correction is below 1e-300
        return s2
    x = np.arange(-half_width, half_width + 1, dtype=np.float64)
    weight = np.exp(-(x * x) / (2.0 * s2))
    return float(np.sum(weight * x * x) / np.sum(weight))

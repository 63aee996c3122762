"""Clipping and Gaussian noise: the three places SecFPP adds DP noise (DESIGN.md section 8).

All noise comes from an injected :class:`~crypto.rng.RandomSource`; nothing here
creates a generator. Arrays are real-valued (float64) unless stated; "norm" is the
L2 norm of the array flattened (for a prompt update of shape ``n_ctx x d`` that is
the Frobenius norm).

Which sampler where
-------------------
Noise that protects something *shared* is added on the quantization grid, to
integers, with the exact discrete Gaussian sampler of :mod:`crypto.dp.discrete`
(:func:`discrete_gaussian_mechanism`, :func:`distributed_noise_share`): the
coordinator's GDP noise on a decoded cluster sum and the participants' distributed
noise. Floating-point Gaussian noise (:func:`gaussian_mechanism`, Box-Muller) is
kept only for DP-FPL's local training (:func:`ldp_noisy_gradient`), where it never
reaches a released value directly (see that function's docstring).

Neighbouring relation
---------------------
DP-FPL (Theorem 3.3) calibrates to ``S_G = C / (N |B|)``: the L2 clip bound divided
by the number of averaged terms, *without* a factor 2. That is the add/remove-one
relation (dp-accounting's ``ADD_OR_REMOVE_ONE``), which we use throughout:

* the privacy unit of the coordinator's release (GDP) is one participant's clipped
  update ``g_i`` (``||g_i||_2 <= C``); neighbouring inputs differ by the presence of
  one update. Cluster membership and the count ``m`` are known to the coordinator
  in SecFPP, so "absent" means the update is replaced by the zero vector (the
  "zero-out" relation, Kairouz et al. 2021); for Gaussian noise its privacy curve is
  identical to add/remove, since both shift the sum by a vector of norm ``<= C``.
* the decoded quantity is ``mean = (1/m) * sum_i g_i`` with public ``m``, so
  its sensitivity is ``C / m`` (:func:`mean_sensitivity`), and the coordinator adds
  ``N(0, (z * C / m)^2)`` per coordinate for noise multiplier ``z``.
* replace-one (swap one update for another) would double this to ``2 C / m``; we
  do not use it. The accountant (:mod:`crypto.dp.accounting`) uses add/remove too.

Distributed DP
--------------
:func:`distributed_noise_share` is the participant side of "the decoded sum already
carries the target noise": each contributor adds discrete Gaussian integers, so the
sum of at least ``n_min`` shares is a distributed discrete Gaussian (Kairouz, Liu &
Steinke 2021); :mod:`crypto.dp.distributed` calibrates it for a federation.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.dp.discrete import MAX_SIGMA2, discrete_gaussian
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.rng import RandomSource

__all__ = [
    "MIN_SHARE_SIGMA",
    "clip_entries",
    "clip_l2",
    "discrete_gaussian_mechanism",
    "distributed_noise_share",
    "gaussian_mechanism",
    "gdp_sigma",
    "lattice_sigma2",
    "ldp_noisy_gradient",
    "mean_sensitivity",
]

#: Smallest per-contributor ``sigma`` (quantized units) that :func:`distributed_noise_share`
#: accepts: the distributed discrete Gaussian bound (KLS 2021, Theorem 1) needs
#: ``sigma >= 1/2``.
MIN_SHARE_SIGMA = 0.5

#: :func:`lattice_sigma2` rounds ``sigma^2`` up to a multiple of ``2**-LATTICE_SIGMA2_BITS``.
LATTICE_SIGMA2_BITS = 16


def _positive(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0.0):
        raise ParameterError(name, f"must be a finite number > 0, not {value}")
    return float(value)


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(name, f"must be an integer >= 1, not {value!r}")
    return value


def _real_array(name: str, x: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
    array = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ParameterError(name, "must contain only finite values")
    return array


def clip_l2(x: NDArray[np.floating[Any]], bound: float) -> NDArray[np.float64]:
    """Scale ``x`` down so that its L2 norm is at most ``bound``.

    ``clip_l2(x, C) = x * min(1, C / ||x||_2)`` with the norm over all entries; the
    direction is kept and an ``x`` already inside the ball is returned unchanged (as
    a new array). Shape and units are those of ``x``.

    >>> clip_l2(np.array([3.0, 4.0]), 1.0)
    array([0.6, 0.8])
    """
    bound = _positive("bound", bound)
    array = _real_array("x", x)
    norm = float(np.linalg.norm(array.ravel()))
    if norm <= bound:
        return array.copy()
    return array * (bound / norm)


def clip_entries(x: NDArray[np.floating[Any]], bound: float) -> NDArray[np.float64]:
    """Clip every entry of ``x`` to ``[-bound, bound]`` (DESIGN.md section 2's ``B``).

    >>> clip_entries(np.array([-3.0, 0.5, 2.0]), 1.0)
    array([-1. ,  0.5,  1. ])
    """
    bound = _positive("bound", bound)
    return np.clip(_real_array("x", x), -bound, bound)


def mean_sensitivity(*, clip_norm: float, n_contributors: int) -> float:
    """L2 sensitivity ``C / m`` of the mean of ``m`` updates, each L2-clipped to ``C``.

    Add/remove (zero-out) one contributor with ``m`` public, as explained in the
    module docstring; units are those of the updates.

    >>> mean_sensitivity(clip_norm=10.0, n_contributors=4)
    2.5
    """
    return _positive("clip_norm", clip_norm) / _positive_int("n_contributors", n_contributors)


def gdp_sigma(*, noise_multiplier: float, clip_norm: float, n_contributors: int) -> float:
    """Noise std ``z * C / m`` that the coordinator adds to a decoded cluster mean.

    >>> gdp_sigma(noise_multiplier=1.5, clip_norm=10.0, n_contributors=4)
    3.75
    """
    sensitivity = mean_sensitivity(clip_norm=clip_norm, n_contributors=n_contributors)
    return _positive("noise_multiplier", noise_multiplier) * sensitivity


def gaussian_mechanism(
    value: NDArray[np.floating[Any]], *, sigma: float, rng: RandomSource
) -> NDArray[np.float64]:
    """Return ``value + N(0, sigma^2)``, independent floating-point noise on every entry.

    ``sigma`` is the std in the units of ``value`` (``noise_multiplier * sensitivity``);
    the output has the shape of ``value``. The noise is Box-Muller on 53-bit uniforms
    (:meth:`~crypto.rng.RandomSource.standard_normal`), which is *not* a vetted DP
    sampler: the low-order bits of a float ``value + noise`` can reveal ``value``
    (Mironov 2012). Use it only where the sum is never published as is (DP-FPL's local
    training, :func:`ldp_noisy_gradient`); anything released or shared gets
    :func:`discrete_gaussian_mechanism` on its quantization grid.

    >>> from secfpp.crypto.rng import DeterministicRandom
    >>> gaussian_mechanism(np.zeros((2, 3)), sigma=1.0, rng=DeterministicRandom(0)).shape
    (2, 3)
    """
    sigma = _positive("sigma", sigma)
    array = _real_array("value", value)
    return array + sigma * rng.standard_normal(array.shape)


def ldp_noisy_gradient(
    gradient: NDArray[np.floating[Any]],
    *,
    clip_norm: float,
    noise_multiplier: float,
    rng: RandomSource,
) -> NDArray[np.float64]:
    """DP-FPL's per-step local noise: ``clip_l2(grad, C) + N(0, (z * C)^2)``.

    Applied separately to each low-rank gradient (``grad_u`` of shape ``n_ctx x k``
    and ``grad_v`` of shape ``k x d``) before the full local gradient is rebuilt
    (Algorithm 1, lines 9-11). The sensitivity of one clipped gradient is ``C``
    (add/remove), so one step is a Gaussian release with noise multiplier ``z``; two
    gradients per step are two releases (or one of sensitivity ``sqrt(2) C`` if the
    pair is clipped jointly). The torch side may reimplement this with the same
    calibration.

    Why floating-point noise here: the noisy gradient is an internal value of local
    training. It is never shared or published; it is mixed by the low-rank
    reconstruction (DP-FPL eq. 4), momentum SGD and float32 torch arithmetic into the
    local prompt, which never leaves the participant either. The float attacks on
    Gaussian/Laplace samplers (Mironov 2012) need the exact float ``x + noise``, which
    nobody sees. The guarantee is therefore DP-FPL's own (a reproduction of that
    baseline, accounted as ``"gaussian"`` in the ledger), not an implementation-level
    proof; what SecFPP *shares* (the quantized update) is protected by the discrete
    mechanisms instead. Integer noise here would also need a grid for the gradients
    that DP-FPL does not have.
    """
    clip_norm = _positive("clip_norm", clip_norm)
    sigma = _positive("noise_multiplier", noise_multiplier) * clip_norm
    return gaussian_mechanism(clip_l2(gradient, clip_norm), sigma=sigma, rng=rng)


def lattice_sigma2(sigma: float, *, scale: int | float = 1, shares: int = 1) -> Fraction:
    """``(sigma * scale)^2 / shares`` as an exact rational, rounded *up*.

    Converts a noise std given in real units (``sigma``) into the discrete Gaussian
    parameter on a grid of ``scale`` units per real unit, split over ``shares``
    independent contributors. The float inputs are taken exactly (``Fraction(x)``), a
    relative margin of ``2**-40`` covers the float rounding with which callers computed
    ``sigma``, and the result is rounded up to a multiple of ``2**-16``: never less noise
    than asked, and small integers for the sampler.

    >>> lattice_sigma2(0.5, scale=2**10, shares=4) - 65536  # (0.5 * 1024)^2 / 4, rounded up
    Fraction(1, 65536)
    """
    sigma = _positive("sigma", sigma)
    scale = _positive("scale", float(scale))
    shares = _positive_int("shares", shares)
    exact = (Fraction(sigma) * Fraction(scale)) ** 2 / shares * (1 + Fraction(1, 2**40))
    unit = 2**LATTICE_SIGMA2_BITS
    return Fraction(-((-exact.numerator * unit) // exact.denominator), unit)


def discrete_gaussian_mechanism(
    value: NDArray[np.integer[Any]], *, sigma2: Fraction | int, rng: RandomSource
) -> NDArray[np.int64]:
    """Return ``value + N_Z(0, sigma2)`` on every entry of an integer array (exact).

    ``value`` is an integer-valued query on a lattice (e.g. a decoded cluster sum in
    quantized units, whose L2 sensitivity is ``C * 2**bits``); ``sigma2`` is the
    discrete Gaussian parameter in the same units (:func:`lattice_sigma2`). With
    sensitivity ``Delta`` the release is ``Delta^2 / (2 sigma2)``-zCDP (CKS 2020,
    Theorem 4); the ledger's ``"discrete_gaussian"`` records account it.

    >>> from secfpp.crypto.rng import DeterministicRandom
    >>> value = np.zeros(3, np.int64)
    >>> discrete_gaussian_mechanism(value, sigma2=4, rng=DeterministicRandom(0)).dtype
    dtype('int64')
    """
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.integer):
        raise ParameterError("value", f"must be an integer array, not dtype {array.dtype}")
    return array.astype(np.int64) + discrete_gaussian(sigma2, array.shape, rng=rng)


def distributed_noise_share(
    shape: int | tuple[int, ...],
    *,
    sigma_total: float,
    n_contributors: int,
    scale: int | float,
    rng: RandomSource,
) -> NDArray[np.int64]:
    """One contributor's integer noise, added to its quantized vector before sharing.

    Each of ``n = n_contributors`` members of a sum draws ``N_Z(0, sigma_i^2)`` per entry
    (exactly, :mod:`crypto.dp.discrete`) with ``sigma_i^2 = lattice_sigma2(sigma_total,
    scale=s, shares=n) >= (sigma_total * s)^2 / n`` in quantized units (``s = 2^bits``,
    DESIGN.md section 2). The decoded sum of ``n`` shares then carries noise of variance
    just below ``n sigma_i^2 >= (sigma_total s)^2``, i.e. ``sigma_total^2`` in real units,
    with no rounding term. It is a *distributed* discrete Gaussian: close to, but not
    exactly, ``N_Z(0, n sigma_i^2)``; its privacy is
    :func:`crypto.dp.accounting.discrete_gaussian_rho` with ``shares = n``.

    ``n`` must be the number of shares a decoded sum is *guaranteed* to hold (the
    smallest member set a participant accepts, after dropouts): a sum with more shares
    only has more noise. Shares of colluding contributors do not protect the others.

    The noise must fit the field's overflow bound (DESIGN.md section 2);
    :class:`crypto.dp.distributed.DistributedNoise` budgets it.

    >>> from secfpp.crypto.rng import DeterministicRandom
    >>> share = distributed_noise_share(
    ...     (16, 512), sigma_total=0.5, n_contributors=4, scale=2**16, rng=DeterministicRandom(0)
    ... )
    >>> share.dtype, share.shape
    (dtype('int64'), (16, 512))
    """
    sigma2 = lattice_sigma2(sigma_total, scale=scale, shares=n_contributors)
    if sigma2 < Fraction(MIN_SHARE_SIGMA) ** 2:
        raise ParameterError(
            "sigma_total",
            f"gives a per-contributor sigma of {math.sqrt(sigma2):.3g} quantized units; it "
            f"must be >= {MIN_SHARE_SIGMA} (raise sigma_total or scale, or lower n_contributors)",
        )
    if sigma2 > MAX_SIGMA2:
        raise ParameterError(
            "sigma_total", f"gives a per-contributor sigma of {math.sqrt(sigma2):.3g} > 2**40 units"
        )
    return discrete_gaussian(sigma2, shape, rng=rng)

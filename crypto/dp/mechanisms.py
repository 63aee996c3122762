"""Clipping and Gaussian noise: the three places SecFPP adds DP noise (DESIGN.md section 8).

All noise comes from an injected :class:`~crypto.rng.RandomSource`; nothing here
creates a generator. Arrays are real-valued (float64) unless stated; "norm" is the
L2 norm of the array flattened (for a prompt update of shape ``n_ctx x d`` that is
the Frobenius norm).

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
carries the target noise": each of ``m`` contributors adds rounded Gaussian
integers, see its docstring for the approximation and the accounting convention.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crypto.errors import ParameterError
from crypto.rng import RandomSource

__all__ = [
    "MIN_SHARE_STD",
    "clip_entries",
    "clip_l2",
    "distributed_noise_share",
    "gaussian_mechanism",
    "gdp_sigma",
    "ldp_noisy_gradient",
    "mean_sensitivity",
]

#: Smallest per-contributor std (quantized units) that :func:`distributed_noise_share`
#: accepts. Below one unit, rounding dominates and the share is mostly zeros, so the
#: "treat it as Gaussian" convention would no longer be a fair description.
MIN_SHARE_STD = 1.0


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
    """Return ``value + N(0, sigma^2)``, independent noise on every entry.

    ``sigma`` is the std in the units of ``value`` (``noise_multiplier * sensitivity``,
    e.g. :func:`gdp_sigma`); the output has the shape of ``value``. The caller records
    the release in the privacy ledger.

    >>> from crypto.rng import DeterministicRandom
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
    """
    clip_norm = _positive("clip_norm", clip_norm)
    sigma = _positive("noise_multiplier", noise_multiplier) * clip_norm
    return gaussian_mechanism(clip_l2(gradient, clip_norm), sigma=sigma, rng=rng)


def distributed_noise_share(
    shape: int | tuple[int, ...],
    *,
    sigma_total: float,
    n_contributors: int,
    scale: float,
    rng: RandomSource,
) -> NDArray[np.int64]:
    """One contributor's integer noise, added to its quantized vector before sharing.

    Each of the ``m = n_contributors`` members of a sum draws
    ``round(N(0, sigma_q^2 / m))`` per entry, where ``sigma_q = sigma_total * scale``
    is the target std in quantized units (``scale = s = 2^bits`` of DESIGN.md section
    2). The decoded sum then carries noise with variance

        m * Var(round(N(0, sigma_q^2 / m))) ~= sigma_q^2 + m / 12

    in quantized units, i.e. ``sigma_total^2`` in real units plus the rounding term
    ``m / (12 s^2)``, which is negligible for the per-share std this function admits
    (at least :data:`MIN_SHARE_STD` unit).

    ``sigma_total`` is the std in real units on the decoded *sum*. For the GDP
    calibration of a cluster mean take ``sigma_total = z * C`` (sum sensitivity ``C``);
    after division by ``m`` the mean carries ``z * C / m`` as in :func:`gdp_sigma`.

    Accounting convention (an approximation, stated here on purpose): the ledger
    records the release as a Gaussian mechanism with std ``sigma_total`` on the sum.
    The sum of ``m`` rounded Gaussians is not exactly Gaussian; a rigorous analysis
    would use the distributed discrete Gaussian (Kairouz, Liu & Steinke 2021). The
    extra rounding noise does not reduce the noise variance, and for per-share std
    ``>= 1`` the lattice distribution is close to the continuous one. The convention
    also assumes that all ``m`` contributors add their share: with dropouts, or when
    ``t`` colluding contributors subtract their own noise, only ``(m - t) / m`` of the
    variance protects the others.

    The noise magnitude must also fit the field's overflow bound (DESIGN.md section
    2): the parameter object should budget a tail of a few tens of ``sigma_q``.

    >>> from crypto.rng import DeterministicRandom
    >>> share = distributed_noise_share(
    ...     (16, 512), sigma_total=0.5, n_contributors=4, scale=2**16, rng=DeterministicRandom(0)
    ... )
    >>> share.dtype, share.shape
    (dtype('int64'), (16, 512))
    """
    sigma_q = _positive("sigma_total", sigma_total) * _positive("scale", scale)
    share_std = sigma_q / math.sqrt(_positive_int("n_contributors", n_contributors))
    if share_std < MIN_SHARE_STD:
        raise ParameterError(
            "sigma_total",
            f"gives a per-contributor std of {share_std:.3g} quantized units; it must be "
            f">= {MIN_SHARE_STD} (raise sigma_total or scale, or lower n_contributors)",
        )
    if share_std > 2.0**52:
        raise ParameterError(
            "sigma_total", f"gives a per-contributor std of {share_std:.3g} > 2**52 units"
        )
    return np.rint(share_std * rng.standard_normal(shape)).astype(np.int64)

"""The probe split test of SecPC (docs/protocol.md, "Clustering step"): pure numpy.

Given, for the present members ``i`` of one cluster ``c`` (``n`` of them), the decoded
squared distances ``D[i, c]`` to the cluster centre ``mu_c`` and ``D[i, P]`` to the centre
``mu_P`` of a probe ``P`` (a proper subset of ``c``, ``m = |P|`` members), this module
computes every member's coordinate on the axis between the two parts of the cluster and
decides whether the cluster holds two groups.

**Self-corrected projection.** With ``G[i, j] = <x_i - mu_c, x_j - mu_c>`` (unknown to
the coordinator), ``D[i, P] = G[i, i] - (2/m) sum_{j in P} G[i, j] + |g_P|^2`` where
``g_P = mu_P - mu_c``, and since every row of ``G`` sums to zero over ``c``,
``|g_P|^2 = mean_{i in c} (D[i, P] - D[i, c])``. Hence
``S_i = sum_{j in P} G[i, j] = m (D[i, c] + |g_P|^2 - D[i, P]) / 2`` and
``t_i = <x_i - mu_c, a> = S_i n / (m (n - m))`` on the common axis
``a = mu_P - mu_{c-P}``, ``|a|^2 = (n / (n - m))^2 |g_P|^2``. That projection holds a self
term: ``+G[i, i] / m`` for a member of ``P``, ``-G[i, i] / (n - m)`` for one outside, so
every member would be pulled towards its own part by its own noise (``r sigma^2 / m`` in
``r`` dimensions, more than the gap between two groups in the regimes that matter). The
coordinate removes the typical *noise* part of that self term,

``f_i = t_i - pull_i nu``, ``pull_i = [i in P] / m - [i not in P] / (n - m)``,

with ``nu`` the fixed point of ``nu = median_i (G[i, i] - f_i^2 / |a|^2)``: the squared
length of each member's offset *across* the corrected axis (noise in ``r - 1``
dimensions, whatever the groups along it), started from the median of ``G[i, i]``.

Removing each member's whole ``G[i, i]`` (leave-one-out) or the median of ``G[i, i]``
would also remove its group's offset along the axis, which for well-separated or small
groups is most of what tells them apart. Under one isotropic group all ``f_i`` have about
the same mean.

**Two-means cut.** The sorted ``f`` are cut into a low and a high part, each of at least
``min_size`` members; the statistic is ``W2 / W1`` (least within-part sum of squares over
the total sum of squares about the mean). A cluster splits when ``W2 / W1`` is below the
threshold. The ratio is scale-free, so no estimate of ``|g_P|`` is needed.

**Trimming.** Before the cut, up to ``max_trim`` points are set aside one at a time: the
point farthest from the median of those left, if it is more than ``trim_factor`` times
their interquartile range away. Set-aside points join the part whose mean is nearer. An
outlying member, or a near-identical pair of them (each pulls the other's coordinate,
since a probe cannot leave the partner out), then no longer decides the statistic, and
the cut is computed once, so trimming adds no second test. Two groups, even 7 + 3, span
the interquartile range, so a small true group is not set aside.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from crypto.errors import ParameterError

__all__ = ["Cut", "axis_projections", "best_cut", "probe_coordinates"]

_NOISE_ITERATIONS = 4
"""Fixed-point steps of the noise estimate ``nu`` (module doc): from the median of
``G[i, i]`` (all noise, the null) towards the part across the axis (two groups)."""


def axis_projections(
    d_centre: NDArray[np.float64], d_probe: NDArray[np.float64], in_probe: NDArray[np.bool_]
) -> tuple[NDArray[np.float64], float]:
    """``t_i = <x_i - mu_c, mu_P - mu_{c-P}>`` (shape ``(n,)``) and ``|mu_P - mu_{c-P}|^2``,
    exactly, from the distances alone (module doc). Inputs as :func:`probe_coordinates`."""
    n = d_centre.shape[0]
    m = int(in_probe.sum())
    g2 = float(np.mean(d_probe - d_centre))
    s = m * (d_centre + g2 - d_probe) / 2.0
    t: NDArray[np.float64] = s * n / (m * (n - m))
    return t, (n / (n - m)) ** 2 * g2


def probe_coordinates(
    d_centre: NDArray[np.float64], d_probe: NDArray[np.float64], in_probe: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """Self-corrected coordinates ``f_i`` on the axis between the probe and the rest
    (module doc), shape ``(n,)``.

    Args:
        d_centre: ``D[i, c]`` for the ``n`` present members of the cluster, shape ``(n,)``.
        d_probe: ``D[i, P]`` for the same members, shape ``(n,)``.
        in_probe: ``i in P``, shape ``(n,)``; ``2 <= m <= n - 2`` members are in ``P``.
    """
    n = d_centre.shape[0]
    m = int(in_probe.sum())
    if d_probe.shape != (n,) or in_probe.shape != (n,):
        raise ParameterError("d_probe", f"must have shape ({n},) like d_centre")
    if not 2 <= m <= n - 2:
        raise ParameterError("in_probe", f"must mark between 2 and {n - 2} members, not {m}")
    t, axis2 = axis_projections(d_centre, d_probe, in_probe)
    inside = in_probe.astype(np.float64)
    pull = inside / m - (1.0 - inside) / (n - m)
    own = float(np.median(d_centre))
    for _ in range(_NOISE_ITERATIONS):
        along = (t - pull * own) ** 2 / axis2 if axis2 > 0 else np.zeros(n)
        own = max(float(np.median(d_centre - along)), 0.0)
    result: NDArray[np.float64] = t - pull * own
    return result


@dataclass(frozen=True)
class Cut:
    """The best cut of one cluster's coordinates.

    Attributes:
        ratio: ``W2 / W1`` (1.0 when no cut is possible).
        high: the member positions (indices into the input) on the high side.
        trimmed: the positions set aside before the cut (they joined the nearer side).
        above: the kept positions above the kept points' mean: the next probe when the
            cluster does not split (a sign step of the power iteration towards the axis
            of largest spread; unlike ``high`` it is not bent by ``min_size``).
    """

    ratio: float
    high: tuple[int, ...]
    trimmed: tuple[int, ...] = ()
    above: tuple[int, ...] = ()


def _cut_sorted(values: NDArray[np.float64], min_size: int) -> tuple[float, int]:
    """Least within-part sum of squares over cuts ``[:k] | [k:]`` of sorted ``values``."""
    k = values.shape[0]
    c1 = np.cumsum(values)
    c2 = np.cumsum(values**2)
    cuts = np.arange(min_size, k - min_size + 1)
    left1, left2 = c1[cuts - 1], c2[cuts - 1]
    right1, right2 = c1[-1] - left1, c2[-1] - left2
    within = (left2 - left1**2 / cuts) + (right2 - right1**2 / (k - cuts))
    best = int(np.argmin(within))
    return max(float(within[best]), 0.0), int(cuts[best])


def _trim(f: NDArray[np.float64], max_trim: int, trim_factor: float) -> NDArray[np.bool_]:
    """Mask of the points kept: up to ``max_trim`` far ends set aside (module doc)."""
    keep = np.ones(f.shape[0], dtype=bool)
    for _ in range(max_trim):
        core = f[keep]
        median = float(np.median(core))
        q25, q75 = np.percentile(core, [25, 75])
        spread = float(q75 - q25)
        far = np.where(keep, np.abs(f - median), -1.0)
        worst = int(np.argmax(far))
        if not (spread > 0 and far[worst] > trim_factor * spread):
            break
        keep[worst] = False
    return keep


def best_cut(
    f: NDArray[np.float64], *, min_size: int, max_trim: int = 2, trim_factor: float = 3.0
) -> Cut:
    """Two-means cut of ``f`` after outlier trimming (module doc).

    Ties in ``f`` are ordered by position, so the result is deterministic.
    """
    if min_size < 1:
        raise ParameterError("min_size", f"must be >= 1, not {min_size}")
    keep = _trim(f, max_trim, trim_factor)
    idx = np.flatnonzero(keep)
    if idx.size < 2 * min_size:
        return Cut(1.0, ())
    order = idx[np.argsort(f[idx], kind="stable")]
    values = f[order]
    total = float(((values - values.mean()) ** 2).sum())
    if not total > 0:
        return Cut(1.0, ())
    within, cut = _cut_sorted(values, min_size)
    low_mean, high_mean = float(values[:cut].mean()), float(values[cut:].mean())
    high = set(order[cut:].tolist())
    trimmed = np.flatnonzero(~keep).tolist()
    high |= {j for j in trimmed if abs(f[j] - high_mean) < abs(f[j] - low_mean)}
    above = tuple(sorted(order[values > values.mean()].tolist()))
    return Cut(within / total, tuple(sorted(high)), tuple(trimmed), above)

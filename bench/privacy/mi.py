"""What the coordinator learns from SecPC's distances: multivariate KSG mutual information.

:func:`ksg_mi` is Kraskov, Stoegbauer and Grassberger's estimator (Phys. Rev. E 69, 066138,
2004, algorithm 1) for vectors ``X (N, d_x)`` and ``Y (N, d_y)`` of any dimensions (scikit-learn's
``mutual_info_regression`` handles one feature at a time only)::

    I(X; Y) ~= psi(k) + psi(N) - < psi(n_x(i) + 1) + psi(n_y(i) + 1) >_i

where ``eps_i`` is the max-norm distance from point ``i`` to its ``k``-th neighbour in the joint
space ``(X, Y)`` and ``n_x(i)`` (``n_y(i)``) counts the other points strictly within ``eps_i`` of it
in ``X`` (``Y``) alone. Units: nats. For a Gaussian pair with ``d`` coordinate pairs of correlation
``rho`` the exact value is ``-d/2 log(1 - rho^2)``; independent data gives ~0 (the estimate can be
slightly negative). The estimate of ``I(X; X)`` lies between ``psi(N) - psi(k + 1)`` and
``psi(N) - psi(k)`` (about ``log N``) whatever ``X`` is: the most the estimator can report at
this sample size, used as the reference "self information" of the prompt as in seed 004
section 5.3 (the true ``I(X; X)`` of a continuous vector is infinite).

:func:`distance_leakage` repeats seed 004's section 5.3 experiment: i.i.d. Gaussian reduced
prompts ``x ~ N(0, I_r)``, a cluster of ``m`` prompts with centre ``mu``, the squared distance
``D = |x - mu|^2`` the coordinator decodes, with ``x`` inside the cluster or outside it, and
compares ``I(x; D)`` with ``I(x; mu)`` (what revealing the centre would leak) and the ceiling.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import cKDTree
from scipy.special import digamma

__all__ = ["distance_leakage", "gaussian_mi", "ksg_mi"]


def _as_2d(name: str, values: ArrayLike) -> NDArray[np.float64]:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or not np.all(np.isfinite(a)):
        raise ValueError(f"Argument '{name}' must be a finite (N,) or (N, d) array, not {a.shape}")
    return a


def _neighbours_within(
    points: NDArray[np.float64], radius: NDArray[np.float64]
) -> NDArray[np.int64]:
    """Per point, how many *other* points lie strictly within ``radius[i]`` (max-norm)."""
    tree = cKDTree(points)
    strict = np.nextafter(radius, 0.0)
    counts = tree.query_ball_point(points, strict, p=np.inf, return_length=True)
    return np.asarray(counts, dtype=np.int64) - 1


def ksg_mi(
    x: ArrayLike, y: ArrayLike, *, k: int = 3, jitter: float = 1e-10, seed: int = 0
) -> float:
    """KSG estimate of ``I(X; Y)`` in nats (see module docstring).

    ``x`` and ``y`` are ``(N,)`` or ``(N, d)`` with the same ``N > k``. Each coordinate is scaled to
    unit standard deviation (MI is invariant to it; the max-norm is not), and ``jitter`` times
    that scale of seeded Gaussian noise breaks ties between repeated values.
    """
    a, b = _as_2d("x", x), _as_2d("y", y)
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"Arguments 'x' and 'y' must have as many rows, not {a.shape[0]}, {b.shape[0]}"
        )
    n = a.shape[0]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < n:
        raise ValueError(f"Argument 'k' must be an integer in [1, {n - 1}], not {k!r}")
    rng = np.random.default_rng(seed)

    def normalize(v: NDArray[np.float64]) -> NDArray[np.float64]:
        scale = v.std(axis=0)
        v = v / np.where(scale > 0, scale, 1.0)
        return v + jitter * rng.standard_normal(v.shape)

    a, b = normalize(a), normalize(b)
    joint = np.hstack([a, b])
    distances, _ = cKDTree(joint).query(joint, k=k + 1, p=np.inf)
    eps = distances[:, k]  # column 0 is the point itself
    n_x, n_y = _neighbours_within(a, eps), _neighbours_within(b, eps)
    value = digamma(k) + digamma(n) - np.mean(digamma(n_x + 1) + digamma(n_y + 1))
    return float(value)


def gaussian_mi(rho: float, pairs: int = 1) -> float:
    """Exact ``I(X; Y) = -pairs/2 log(1 - rho^2)`` of ``pairs`` independent coordinate pairs."""
    if not -1.0 < rho < 1.0:
        raise ValueError(f"Argument 'rho' must be in (-1, 1), not {rho}")
    return -0.5 * pairs * float(np.log1p(-(rho**2)))


def distance_leakage(
    dims: Sequence[int],
    cluster_sizes: Sequence[int],
    *,
    samples: int = 2000,
    k: int = 3,
    seed: int = 0,
    unit: bool = False,
) -> list[dict[str, float | int | str]]:
    """Seed 004 section 5.3 on i.i.d. Gaussian reduced prompts; one row per ``(r, m)``.

    Per sample: ``x ~ N(0, I_r)``, ``m - 1`` other members (``x`` inside) or ``m`` members (``x``
    outside), ``mu`` their mean, ``D = |x - mu|^2``. Rows hold ``I(x; D)`` inside and outside,
    ``I(x; mu)`` and ``I(x; (D, mu))`` inside (what the distance adds to a known centre), and the
    ceiling ``I(x; x)``, all KSG estimates in nats.

    With ``unit`` every prompt is scaled to unit norm (uniform on the sphere), as this
    repository's ``x_i`` are (the unit direction of a round's change, docs/protocol.md): then
    ``D = 1 - 2 <x, mu> + |mu|^2`` carries no norm, only the projection on the centre.
    """
    rng = np.random.default_rng(seed)
    rows: list[dict[str, float | int | str]] = []
    for r in dims:
        for m in cluster_sizes:
            if r < 1 or m < 2:
                raise ValueError(f"dims must be >= 1 and cluster sizes >= 2, not {r}, {m}")
            x = rng.standard_normal((samples, r))
            others = rng.standard_normal((samples, m, r))
            if unit:
                x /= np.linalg.norm(x, axis=1, keepdims=True)
                others /= np.linalg.norm(others, axis=2, keepdims=True)
            mu_in = (x + others[:, 1:].sum(axis=1)) / m
            mu_out = others.mean(axis=1)
            d_in = ((x - mu_in) ** 2).sum(axis=1)
            d_out = ((x - mu_out) ** 2).sum(axis=1)
            rows.append(
                {
                    "prompts": "unit sphere" if unit else "gaussian",
                    "reduced_dim": r,
                    "cluster_size": m,
                    "samples": samples,
                    "k": k,
                    "mi_prompt_distance_inside": ksg_mi(x, d_in, k=k, seed=seed),
                    "mi_prompt_distance_outside": ksg_mi(x, d_out, k=k, seed=seed),
                    "mi_prompt_centre_inside": ksg_mi(x, mu_in, k=k, seed=seed),
                    "mi_prompt_distance_and_centre_inside": ksg_mi(
                        x, np.hstack([d_in[:, None], mu_in]), k=k, seed=seed
                    ),
                    "mi_prompt_prompt": ksg_mi(x, x, k=k, seed=seed),
                }
            )
    return rows

"""Reduction of a prompt ``P_i`` (``n_ctx x d``) to the SecPC vector ``x_i`` (DESIGN.md section 4).

Every participant must land in the **same** coordinates, so both methods are fixed linear maps
built from public data only:

* ``jl`` (default): ``x = vec(P) @ R`` with ``R`` a ``D x r`` Gaussian matrix (``D = n_ctx * d``),
  entries ``N(0, 1/r)``, drawn from the federation's public seed with numpy's ``default_rng``.
  It is public by design (not a secret, so not from :mod:`crypto.rng`). By Johnson-Lindenstrauss
  ``E ||x - x'||^2 = ||P - P'||_F^2`` and the ratio concentrates as ``r`` grows
  (relative std about ``sqrt(2 / r)``).
* ``token-pca``: each of the ``n_ctx`` token vectors projected on the top-``k`` principal
  directions of the frozen token-embedding table (``vocab x d``, centred), ``r = n_ctx * k``.
  Computed in float64 on the CPU with a fixed sign convention (largest-magnitude entry of each
  direction positive), so participants on different hardware get the same directions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from secfpp.federation import DATA_SIGNALS
from secfpp.participant.learning.errors import LearningConfigError

__all__ = [
    "JLReduction",
    "Reduction",
    "TokenPCAReduction",
    "data_signal",
    "get_reduction",
    "jl_matrix",
    "signal_of_data",
    "token_principal_directions",
]


def jl_matrix(dim: int, r: int, seed: int) -> NDArray[np.float64]:
    """The public ``dim x r`` matrix, i.i.d. ``N(0, 1/r)`` entries from ``default_rng(seed)``."""
    if dim < 1 or r < 1:
        raise LearningConfigError("r", f"and 'dim' must be >= 1, not r={r}, dim={dim}")
    rng = np.random.default_rng(seed)
    matrix: NDArray[np.float64] = rng.standard_normal((dim, r)) / np.sqrt(r)
    return matrix


def token_principal_directions(
    token_embedding: NDArray[Any] | torch.Tensor, k: int
) -> NDArray[np.float64]:
    """Top-``k`` principal directions (``k x d``, orthonormal rows) of the ``vocab x d`` table."""
    if isinstance(token_embedding, torch.Tensor):
        token_embedding = token_embedding.detach().cpu().double().numpy()
    table = np.asarray(token_embedding, dtype=np.float64)
    if table.ndim != 2 or not 1 <= k <= table.shape[1]:
        raise LearningConfigError(
            "k", f"must be in [1, d] for a (vocab, d) table, not k={k}, shape={table.shape}"
        )
    centred = table - table.mean(axis=0, keepdims=True)
    covariance = centred.T @ centred / table.shape[0]  # (d, d)
    values, vectors = np.linalg.eigh(covariance)  # ascending
    top: NDArray[np.float64] = vectors[:, np.argsort(values)[::-1][:k]].T  # (k, d)
    pivots = np.argmax(np.abs(top), axis=1)
    signs = np.sign(top[np.arange(k), pivots])
    signed: NDArray[np.float64] = top * signs[:, None]
    return signed


def data_signal(
    features: NDArray[Any] | torch.Tensor,
    r: int,
    seed: int,
    labels: NDArray[Any] | torch.Tensor | None = None,
) -> NDArray[np.float64]:
    """``x_i`` of the ``data`` and ``data-balanced`` signals: the unit direction of ``m @ R_data``.

    ``F`` is the participant's ``(N, e)`` frozen image embeddings of its training images,
    ``R_data`` = :func:`jl_matrix` ``(e, r, seed + 1)`` (public; ``seed + 1`` so that it is
    not the prompt reduction's matrix). Without ``labels`` (signal ``data``), ``m = mean(F)``.
    With ``labels`` (``(N,)`` class indices; signal ``data-balanced``), ``m`` is the mean of
    the per-class means over the classes the participant holds,
    ``m = (1 / |Y|) sum_{y in Y} mean{f_k : y_k = y}``: every class weighs the same, so how
    many images of each class the participant has (its label mix) does not move ``m``, only
    which classes it has and what their images look like (the domain). Under Dirichlet(0.5)
    label skew the plain mean separated the held-out domains' participants by label mix
    about as much as by domain (docs/protocol.md, "What SecPC clusters"). Neither changes
    from round to round. Returns ``(r,)`` float64 of norm 1.
    """
    if isinstance(features, torch.Tensor):
        features = features.detach().cpu().double().numpy()
    array = np.asarray(features, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] < 1:
        raise LearningConfigError(
            "features", f"must be a non-empty (N, e) array, not shape {array.shape}"
        )
    if labels is None:
        centre = array.mean(axis=0)
    else:
        if isinstance(labels, torch.Tensor):
            labels = labels.detach().cpu().numpy()
        tags = np.asarray(labels)
        if tags.shape != (array.shape[0],) or not np.issubdtype(tags.dtype, np.integer):
            raise LearningConfigError(
                "labels",
                f"must be {array.shape[0]} integer class indices, one per image, not "
                f"{tags.dtype} {tags.shape}",
            )
        classes, inverse = np.unique(tags, return_inverse=True)
        sums = np.zeros((classes.size, array.shape[1]))
        np.add.at(sums, inverse, array)
        counts = np.bincount(inverse, minlength=classes.size).astype(np.float64)
        centre = (sums / counts[:, None]).mean(axis=0)
    x = centre @ jl_matrix(array.shape[1], r, seed + 1)
    norm = float(np.linalg.norm(x))
    if not norm > 0:
        raise LearningConfigError("features", "have a zero mean embedding: no data signal")
    unit: NDArray[np.float64] = x / norm
    return unit


def signal_of_data(
    signal: str,
    features: NDArray[Any] | torch.Tensor,
    labels: NDArray[Any] | torch.Tensor,
    r: int,
    seed: int,
) -> NDArray[np.float64]:
    """``x_i`` of the data signal ``signal`` names (``reduction.signal``, one of
    :data:`~secfpp.federation.DATA_SIGNALS`): :func:`data_signal` of the training images'
    ``features``, with their ``labels`` for ``data-balanced`` and without for ``data``."""
    if signal not in DATA_SIGNALS:
        raise LearningConfigError("signal", f"must be one of {DATA_SIGNALS}, not {signal!r}")
    return data_signal(features, r, seed, labels=labels if signal == "data-balanced" else None)


class Reduction(ABC):
    """A fixed linear map from ``vec(P)`` (length ``n_ctx * d``) to ``x`` (length ``r``)."""

    name: str
    dim: int
    r: int

    @abstractmethod
    def reduce(self, prompt: NDArray[Any]) -> NDArray[np.float64]:
        """``x_i`` (``(r,)`` float64) of a prompt given as ``n_ctx x d`` or flat."""

    def _flat(self, prompt: NDArray[Any]) -> NDArray[np.float64]:
        array = np.asarray(prompt, dtype=np.float64).reshape(-1)
        if array.size != self.dim:
            raise LearningConfigError("prompt", f"must have {self.dim} entries, not {array.size}")
        return array


class JLReduction(Reduction):
    """``x = vec(P) @ R``, ``R`` = :func:`jl_matrix` ``(n_ctx * d, r, seed)``."""

    name = "jl"

    def __init__(self, *, n_ctx: int, ctx_dim: int, r: int = 128, seed: int) -> None:
        self.dim = n_ctx * ctx_dim
        self.r = r
        self.seed = seed
        self.matrix = jl_matrix(self.dim, r, seed)  # (D, r)

    def reduce(self, prompt: NDArray[Any]) -> NDArray[np.float64]:
        return self._flat(prompt) @ self.matrix


class TokenPCAReduction(Reduction):
    """Token vectors on the top-``k`` directions ``W`` (``k x d``): ``x = vec(P @ W^T)``."""

    name = "token-pca"

    def __init__(
        self, *, n_ctx: int, token_embedding: NDArray[Any] | torch.Tensor, k: int = 8
    ) -> None:
        self.directions = token_principal_directions(token_embedding, k)  # (k, d)
        self.n_ctx = n_ctx
        self.ctx_dim = int(self.directions.shape[1])
        self.dim = n_ctx * self.ctx_dim
        self.r = n_ctx * k

    def reduce(self, prompt: NDArray[Any]) -> NDArray[np.float64]:
        tokens = self._flat(prompt).reshape(self.n_ctx, self.ctx_dim)
        return (tokens @ self.directions.T).reshape(-1)  # (n_ctx * k,)


def get_reduction(
    method: str,
    *,
    n_ctx: int,
    ctx_dim: int,
    seed: int | None = None,
    r: int = 128,
    k: int = 8,
    token_embedding: NDArray[Any] | torch.Tensor | None = None,
) -> Reduction:
    """The federation's reduction: ``"jl"`` (needs the public ``seed``) or ``"token-pca"``."""
    if method == "jl":
        if seed is None:
            raise LearningConfigError(
                "seed", "is required for the 'jl' reduction (public federation seed)"
            )
        return JLReduction(n_ctx=n_ctx, ctx_dim=ctx_dim, r=r, seed=seed)
    if method == "token-pca":
        if token_embedding is None:
            raise LearningConfigError(
                "token_embedding", "is required for the 'token-pca' reduction"
            )
        reduction = TokenPCAReduction(n_ctx=n_ctx, token_embedding=token_embedding, k=k)
        if reduction.ctx_dim != ctx_dim:
            raise LearningConfigError(
                "ctx_dim", f"must equal the table's width {reduction.ctx_dim}, not {ctx_dim}"
            )
        return reduction
    raise LearningConfigError("method", f"must be 'jl' or 'token-pca', not {method!r}")

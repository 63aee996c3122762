"""Lagrange coded computing over GF(p) (DESIGN.md section 3).

Public points: ``beta_k = k`` for ``k = 1..K+T`` and ``alpha_j = K+T+1+j`` for participant
index ``j = 0..N-1`` (fixed at registration). All are distinct as long as
``K+T+N < p``.

**Share.** A quantized vector ``x`` (length ``d``) is zero-padded to ``K*L``,
``L = ceil(d/K)``, and cut into chunks ``X_1..X_K`` (each length ``L``). The sharing
polynomial ``u`` of degree ``K+T-1`` is uniform among those with ``u(beta_k) = X_k``
(``k = 1..K``), and ``shares[j] = u(alpha_j)``, shape (N, L). Any ``T`` rows are uniform
and independent of ``x``.

It is drawn by fixing ``T`` evaluations of ``u`` uniformly at random: the masks
``Z_1..Z_T`` (from an injected CSPRNG) are the values ``u(alpha_0..alpha_{T-1})``, the
first ``T`` shares, and the other ``N - T`` shares are ``B @ [X; Z]`` with
``B[j, m] = l_m(alpha_j)``, the Lagrange basis over the ``K+T`` distinct points
``beta_1..beta_K, alpha_0..alpha_{T-1}``. For fixed ``X`` the map from ``u`` to
``(u(alpha_0), .., u(alpha_{T-1}))`` is a bijection (interpolation through ``K+T``
distinct points), so uniform ``Z`` gives exactly the uniform ``u`` of the textbook
construction that puts ``Z`` at ``beta_{K+1..K+T}`` (docs/protocol.md section 3): the shares have
the same joint distribution, and decoding (which uses only ``u(beta_1..beta_K)``) is
unchanged. The product is ``(N-T) x (K+T)`` instead of ``N x (K+T)``: with a committee of
``c = 81`` and ``T = 30`` that is 37% less of the work of sharing.

**Compute.** A polynomial ``f`` of degree ``deg f`` applied to shares yields evaluations
of ``f(u(z))``, degree ``deg f * (K+T-1)``.

**Decode.** From ``R = deg f * (K+T-1) + 1`` evaluations, interpolate and evaluate at
``beta_1..beta_K``. With ``n > R`` evaluations the received vectors form a Reed-Solomon
codeword of length ``n`` and dimension ``R`` (per column), so up to ``floor((n-R)/2)``
wrong evaluations can be corrected: :meth:`LagrangeCode.decode` computes the syndromes of
every column, locates wrong rows with Berlekamp-Massey on a random linear combination of
them (a wrong row stays wrong in the combination except with probability ``1/p``), drops
them, and checks every column of what is left for consistency
(:mod:`crypto.reed_solomon`; O(n**2) plus two field products with the result vectors).
An inconsistent set raises :class:`DecodeError`; nothing is ever decoded silently from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from secfpp.crypto.errors import DecodeError, ParameterError
from secfpp.crypto.field import FieldArray, PreparedLeft, PrimeField
from secfpp.crypto.linalg import lagrange_matrix, matmul
from secfpp.crypto.reed_solomon import ReedSolomonCode
from secfpp.crypto.rng import RandomSource, SystemRandom

__all__ = ["Decoded", "LagrangeCode"]


@dataclass(frozen=True)
class Decoded:
    """Result of a decode.

    Attributes:
        values: field elements ``f(u(beta_k))`` for ``k = 1..K``, shape (K, L).
        used: participant indices whose evaluations were accepted.
        rejected: participant indices whose evaluations were found wrong and corrected.
    """

    values: FieldArray
    used: tuple[int, ...]
    rejected: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class LagrangeCode:
    """An LCC code: ``K`` data chunks, ``T`` random chunks, ``N`` participants."""

    field: PrimeField
    k: int
    t: int
    n: int

    def __post_init__(self) -> None:
        for name, value, low in (("k", self.k, 1), ("t", self.t, 0), ("n", self.n, 1)):
            if not isinstance(value, int) or value < low:
                raise ParameterError(name, f"must be an int >= {low}, not {value!r}")
        if self.k + self.t + self.n >= self.field.prime:
            raise ParameterError("n", f"K+T+N = {self.k + self.t + self.n} must be < p")
        if self.n < self.k + self.t:
            raise ParameterError(
                "n", f"must be >= K+T = {self.k + self.t} to decode even linear results"
            )

    # -- public points ---------------------------------------------------------------
    @property
    def betas(self) -> tuple[int, ...]:
        """``beta_1..beta_{K+T}``: the data chunks sit at the first K of them."""
        return tuple(range(1, self.k + self.t + 1))

    def alpha(self, index: int) -> int:
        """Evaluation point of participant ``index`` (0-based)."""
        if not 0 <= index < self.n:
            raise ParameterError("index", f"must be in [0, {self.n}), not {index}")
        return self.k + self.t + 1 + index

    def recovery_threshold(self, degree: int) -> int:
        """Evaluations needed to decode a degree-``degree`` computation."""
        if degree < 1:
            raise ParameterError("degree", f"must be >= 1, not {degree}")
        return degree * (self.k + self.t - 1) + 1

    def chunk_length(self, length: int) -> int:
        """``L = ceil(length / K)``: the length of each share."""
        return -(-length // self.k)

    @cached_property
    def encoding_matrix(self) -> FieldArray:
        """``B`` (N-T, K+T): ``B[j, m] = l_m(alpha_{T+j})`` over ``beta_1..beta_K`` and
        ``alpha_0..alpha_{T-1}`` (module docstring, "Share")."""
        points = self.betas[: self.k] + tuple(self.alpha(j) for j in range(self.t))
        targets = [self.alpha(j) for j in range(self.t, self.n)]
        return lagrange_matrix(points, targets, self.field.prime)

    @cached_property
    def _prepared_encoding(self) -> PreparedLeft | FieldArray:
        if self.field.narrow:
            return self.field.prepare_left(self.encoding_matrix)
        return self.encoding_matrix

    # -- share -----------------------------------------------------------------------
    def share(self, x: FieldArray, rng: RandomSource | None = None) -> FieldArray:
        """Shares of ``x`` for every participant: row ``j`` is ``u(alpha_j)``, shape (N, L)."""
        x = self.field.check(x, "x")
        if x.ndim != 1 or x.size == 0:
            raise ParameterError("x", f"must be a non-empty 1-D vector, not shape {x.shape}")
        rng = rng if rng is not None else SystemRandom()
        chunk = self.chunk_length(x.size)
        data = np.zeros(self.k * chunk, dtype=np.int64)
        data[: x.size] = x
        masks = rng.field_elements(self.field.prime, (self.t, chunk))  # u(alpha_0..T-1)
        stacked = np.vstack([data.reshape(self.k, chunk), masks])
        shares = np.empty((self.n, chunk), dtype=np.int64)
        shares[: self.t] = masks
        if self.field.narrow:
            shares[self.t :] = self.field.matmul(self._prepared_encoding, stacked)
        else:
            shares[self.t :] = matmul(self.field, self.encoding_matrix, stacked)  # float64 limbs
        return shares

    # -- decode ----------------------------------------------------------------------
    def decode(
        self,
        evaluations: Mapping[int, FieldArray],
        *,
        degree: int,
        rng: RandomSource | None = None,
    ) -> Decoded:
        """Decode ``f(u(beta_k))``, ``k = 1..K``, from evaluations keyed by participant index.

        Args:
            evaluations: participant index -> its result vector (all the same length).
            degree: ``deg f`` (1 for sums, 2 for squared distances).
            rng: randomness for the column combination used to locate errors.

        Raises:
            DecodeError: fewer than ``R`` evaluations, or more than ``floor((n-R)/2)``
                of them inconsistent.
        """
        threshold = self.recovery_threshold(degree)
        indices = tuple(sorted(evaluations))
        for j in indices:
            self.alpha(j)
        if len(indices) < threshold:
            raise DecodeError(
                f"need {threshold} evaluations for degree {degree}, received {len(indices)}",
                received=indices,
            )
        rows = [np.asarray(evaluations[j]) for j in indices]
        if len({r.shape for r in rows}) != 1 or rows[0].ndim != 1:
            raise DecodeError("evaluations must be 1-D vectors of one length", received=indices)
        matrix = np.vstack(rows)
        try:
            matrix = self.field.check(matrix, "evaluations")
        except ParameterError:
            for j, row in zip(indices, rows, strict=True):  # name the offending participant
                self.field.check(row, f"evaluations[{j}]")
            raise
        points = tuple(self.alpha(j) for j in indices)
        code = ReedSolomonCode(self.field, points, threshold)
        rng = rng if rng is not None else SystemRandom()
        values, bad = code.decode(matrix, self.betas[: self.k], rng, labels=indices)
        dropped = set(bad)
        used = tuple(j for i, j in enumerate(indices) if i not in dropped)
        return Decoded(values, used, tuple(indices[i] for i in bad))

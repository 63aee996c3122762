"""Lagrange coded computing over GF(p) (DESIGN.md section 3).

Public points: ``beta_k = k`` for ``k = 1..K+T`` and ``alpha_j = K+T+1+j`` for participant
index ``j = 0..N-1`` (fixed at registration). All are distinct as long as
``K+T+N < p``.

**Share.** A quantized vector ``x`` (length ``d``) is zero-padded to ``K*L``,
``L = ceil(d/K)``, and cut into chunks ``X_1..X_K`` (each length ``L``). ``T`` chunks
``Z_1..Z_T`` are drawn uniformly from the field with an injected CSPRNG. The polynomial
``u`` of degree ``K+T-1`` with ``u(beta_k) = X_k`` and ``u(beta_{K+t}) = Z_t`` is
evaluated at every ``alpha_j``: ``shares = A @ [X; Z]`` with ``A[j, m] = l_m(alpha_j)``,
shape (N, L). Any ``T`` rows are uniform and independent of ``x``.

**Compute.** A polynomial ``f`` of degree ``deg f`` applied to shares yields evaluations
of ``f(u(z))``, degree ``deg f * (K+T-1)``.

**Decode.** From ``R = deg f * (K+T-1) + 1`` evaluations, interpolate and evaluate at
``beta_1..beta_K``. With ``n > R`` evaluations the received vectors form a Reed-Solomon
codeword of length ``n`` and dimension ``R`` (per column), so up to ``floor((n-R)/2)``
wrong evaluations can be corrected: :meth:`LagrangeCode.decode` locates them with
Berlekamp-Welch on a random linear combination of the columns (a wrong row stays wrong
in the combination except with probability ``1/p``), drops them, and checks every column
of what is left for consistency. An inconsistent set raises :class:`DecodeError`; nothing
is ever decoded silently from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from crypto.errors import DecodeError, ParameterError
from crypto.field import FieldArray, PreparedLeft, PrimeField
from crypto.linalg import lagrange_matrix, poly_divmod, poly_eval, solve
from crypto.rng import RandomSource, SystemRandom

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
        """``A`` (N, K+T) with ``A[j, m] = l_m(alpha_j)`` over the betas."""
        alphas = [self.alpha(j) for j in range(self.n)]
        return lagrange_matrix(self.betas, alphas, self.field.prime)

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
        padding = rng.field_elements(self.field.prime, (self.t, chunk))
        stacked = np.vstack([data.reshape(self.k, chunk), padding])
        return self.field.matmul(self._prepared_encoding, stacked)

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
        rows = [self.field.check(np.asarray(evaluations[j]), f"evaluations[{j}]") for j in indices]
        if len({r.shape for r in rows}) != 1 or rows[0].ndim != 1:
            raise DecodeError("evaluations must be 1-D vectors of one length", received=indices)
        matrix = np.vstack(rows)
        rejected: tuple[int, ...] = ()
        good = list(range(len(indices)))
        if not self._consistent(indices, matrix, good, threshold):
            bad = self._locate_errors(indices, matrix, threshold, rng or SystemRandom())
            rejected = tuple(indices[i] for i in bad)
            good = [i for i in good if i not in bad]
            if not self._consistent(indices, matrix, good, threshold):
                raise DecodeError(
                    "evaluations stay inconsistent after removing "
                    f"{list(rejected)}; refusing to decode",
                    rejected=rejected,
                    received=indices,
                )
        basis = good[:threshold]
        points = [self.alpha(indices[i]) for i in basis]
        interp = lagrange_matrix(points, self.betas[: self.k], self.field.prime)
        values = self.field.matmul(interp, matrix[basis])
        return Decoded(values, tuple(indices[i] for i in good), rejected)

    def _consistent(
        self, indices: tuple[int, ...], matrix: FieldArray, good: list[int], threshold: int
    ) -> bool:
        """Do the rows ``good`` lie on one polynomial of degree < threshold (per column)?"""
        basis, rest = good[:threshold], good[threshold:]
        if not rest:
            return True
        predict = lagrange_matrix(
            [self.alpha(indices[i]) for i in basis],
            [self.alpha(indices[i]) for i in rest],
            self.field.prime,
        )
        return bool(np.array_equal(self.field.matmul(predict, matrix[basis]), matrix[rest]))

    def _locate_errors(
        self, indices: tuple[int, ...], matrix: FieldArray, threshold: int, rng: RandomSource
    ) -> list[int]:
        """Berlekamp-Welch on one random combination of the columns; row positions of errors."""
        p = self.field.prime
        n = len(indices)
        max_errors = (n - threshold) // 2
        coeffs = rng.field_elements(p, (matrix.shape[1], 1))
        y = [int(v) for v in self.field.matmul(matrix, coeffs)[:, 0]]
        xs = [self.alpha(j) for j in indices]
        if max_errors == 0:
            raise DecodeError(
                f"evaluations are inconsistent and {n} received with threshold {threshold} "
                "leave no redundancy to correct any",
                received=indices,
            )
        # Unknowns: E_0..E_{e-1} (E monic of degree e) and Q_0..Q_{R+e-1}.
        # Equations: Q(x_i) - y_i * E(x_i) = y_i * x_i**e for every received i.
        e = max_errors
        system = []
        rhs = []
        for xi, yi in zip(xs, y, strict=True):
            powers = [pow(xi, m, p) for m in range(threshold + e)]
            system.append([(-yi * powers[m]) % p for m in range(e)] + powers)
            rhs.append(yi * powers[e] % p)
        solution = solve(system, rhs, p)
        failure = DecodeError(
            f"more than {max_errors} of {n} evaluations are wrong: cannot correct "
            f"(received {list(indices)})",
            received=indices,
        )
        if solution is None:
            raise failure
        locator = [*solution[:e], 1]
        quotient, remainder = poly_divmod(solution[e:], locator, p)
        if remainder:
            raise failure
        bad = [
            i
            for i, (xi, yi) in enumerate(zip(xs, y, strict=True))
            if poly_eval(quotient, xi, p) != yi
        ]
        if not bad or len(bad) > max_errors:
            raise failure
        return bad

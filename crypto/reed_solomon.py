"""Decoding Reed-Solomon codes with errors over GF(p): syndromes and Berlekamp-Massey.

**Code.** Distinct points ``x_0..x_{n-1}`` of GF(p) and a dimension ``R``: codewords are
``(f(x_0), ..., f(x_{n-1}))`` for polynomials ``f`` of degree ``< R`` (a generalized
Reed-Solomon code). Received rows may be vectors (``L`` columns), each column one word.

**Syndromes.** With the barycentric weights ``v_i = 1 / prod_{j != i} (x_i - x_j)``,
``sum_i v_i g(x_i) = 0`` for every ``g`` of degree ``<= n-2``. Hence the ``n - R``
syndromes ``S_k = sum_i v_i y_i X_i**k`` (``k = 0..n-R-1``, ``X_i = x_i - s`` for a
shift ``s`` that makes every ``X_i`` nonzero) vanish exactly on codewords, and for
``y = f(x) + e`` they are ``S_k = sum_{i in E} (v_i e_i) X_i**k``: a sum of ``|E|``
geometric sequences.

**Locator.** If ``|E| <= floor((n-R)/2)``, Berlekamp-Massey finds from ``S`` the
shortest linear recurrence, whose connection polynomial is ``Lambda(z) = prod_{i in E}
(1 - X_i z)``; the wrong rows are the ``i`` with ``Q(X_i) = 0``,
``Q(z) = z**|E| Lambda(1/z) = prod_{i in E} (z - X_i)``. With more errors the locator's
degree exceeds the bound or its roots miss the points, and the word is reported
uncorrectable rather than guessed.

**Many columns** (:meth:`ReedSolomonCode.decode`). Errors are located on one random
combination ``y = Y @ c`` of the columns: a wrong row stays wrong in it except with
probability ``1/p``. Then the other rows are checked for consistency on
:data:`CHECK_COMBINATIONS` fresh random combinations of the columns (Freivalds' check):
``R`` rows are interpolated to all the others and each predicted combination must equal
the received one. A row that differs from the interpolant in any column passes one check
with probability ``1/p`` (the difference vector is nonzero and the weights are uniform
and drawn after the results are fixed), so all pass with probability at most ``p**-2``
(below ``2**-60`` for both fields). Only then are the targets interpolated from the ``R``
rows on every column. A row the locating combination hid therefore makes the decode
fail; nothing is decoded from rows that do not lie on one polynomial of degree ``< R``
per column, except with probability ``p**-2``. If the true number of wrong rows is at most
``floor((n-R)/2)``, what is decoded is the true polynomial (two polynomials that agree on
``n - 2 floor((n-R)/2) >= R`` points are equal).

**Cost** for ``n`` rows of ``L`` columns, ``r = n - R`` and ``e`` rows found wrong: the
combination and the checks' combinations O(n L); the weights at most O(n**2) and the
syndromes O(n r) vectorized multiplications, Berlekamp-Massey O(r e) and the root search
O(n e), all on one column; the targets one (len(targets), R) @ (R, L) field product
(:func:`crypto.linalg.matmul`). An exact every-column comparison instead cost a
((r - e), R) @ (R, L) product: 9 s at n = 2048 for the distance stage's L = 32 796.
Wrong rows make the decode cheaper, not dearer (``r - e`` rows to check). Nothing is cubic: the
Berlekamp-Welch linear system this replaces cost O(n**3) (6.5-11 s at n = 256).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from secfpp.crypto.errors import DecodeError, ParameterError
from secfpp.crypto.field import FieldArray, PrimeField
from secfpp.crypto.linalg import barycentric_weights, field_sum, lagrange_matrix, matmul, mul
from secfpp.crypto.rng import RandomSource

__all__ = ["ReedSolomonCode", "berlekamp_massey"]

_SYNDROME_BLOCK = 64  # powers X**k computed per vectorized step of the syndromes
CHECK_COMBINATIONS = 2
"""Independent random column combinations the consistency check compares (module doc)."""


def berlekamp_massey(sequence: Sequence[int], prime: int) -> list[int]:
    """Shortest linear recurrence of ``sequence`` over GF(p) (Massey, 1969).

    Returns the connection polynomial ``[1, c_1, ..., c_L]`` (lowest degree first, length
    ``L + 1``): ``s_k + c_1 s_{k-1} + ... + c_L s_{k-L} = 0`` for ``L <= k < len(sequence)``.
    O(len(sequence) * L) multiplications.

    >>> berlekamp_massey([1, 1, 2, 3, 5, 8], 101)  # Fibonacci: s_k = s_{k-1} + s_{k-2}
    [1, 100, 100]
    """
    s = [int(v) % prime for v in sequence]
    conn, prev = [1], [1]
    length, gap, inv_last = 0, 1, 1
    for k, value in enumerate(s):
        window = s[k - length : k][::-1] if length else []  # s_{k-1}, ..., s_{k-L}
        discrepancy = (value + sum(map(operator.mul, conn[1 : length + 1], window))) % prime
        if discrepancy == 0:
            gap += 1
            continue
        factor = discrepancy * inv_last % prime
        update = conn + [0] * max(0, len(prev) + gap - len(conn))
        end = gap + len(prev)
        update[gap:end] = [
            (u - factor * c) % prime for u, c in zip(update[gap:end], prev, strict=True)
        ]
        if 2 * length <= k:
            prev, length, gap = conn, k + 1 - length, 1
            inv_last = pow(discrepancy, prime - 2, prime)
        else:
            gap += 1
        conn = update
    return (conn + [0] * (length + 1))[: length + 1]


@dataclass(frozen=True, eq=False)
class ReedSolomonCode:
    """Evaluations at ``points`` of the polynomials of degree ``< dimension`` (module doc).

    Attributes:
        field: GF(p).
        points: ``x_0..x_{n-1}``, distinct mod p.
        dimension: ``R``, with ``1 <= R <= n``.
    """

    field: PrimeField
    points: tuple[int, ...]
    dimension: int

    def __post_init__(self) -> None:
        n = len(self.points)
        if not isinstance(self.dimension, int) or not 1 <= self.dimension <= n:
            raise ParameterError(
                "dimension",
                f"must be an int in [1, {n}] (the number of points), not {self.dimension!r}",
            )
        if len({x % self.field.prime for x in self.points}) != n:
            raise ParameterError("points", "must be distinct modulo p")

    @property
    def redundancy(self) -> int:
        """``n - R``: the number of syndromes."""
        return len(self.points) - self.dimension

    @property
    def max_errors(self) -> int:
        """``floor((n - R) / 2)``: wrong rows that can be located."""
        return self.redundancy // 2

    @cached_property
    def _shifted(self) -> FieldArray:
        """``X_i = x_i - s``, with ``s`` the least non-negative integer not among the points."""
        p = self.field.prime
        taken = {x % p for x in self.points}
        s = next(c for c in range(len(taken) + 1) if c not in taken)
        return np.array([(x - s) % p for x in self.points], dtype=np.int64)

    @cached_property
    def weights(self) -> FieldArray:
        """``v_i = 1 / prod_{j != i} (x_i - x_j)`` (n,)."""
        return barycentric_weights(list(self.points), self.field.prime)

    def syndromes(self, received: FieldArray) -> FieldArray:
        """``S_k = sum_i v_i y_i X_i**k`` (n-R,) of one word ``y`` (n,); zero iff a codeword.

        O(n (n-R)) multiplications, vectorized over blocks of 64 powers.
        """
        p = self.field.prime
        received = np.asarray(received, dtype=np.int64)
        if received.shape != (len(self.points),):
            raise ParameterError(
                "received", f"must have shape ({len(self.points)},), not {received.shape}"
            )
        r = self.redundancy
        if r == 0:
            return np.zeros(0, dtype=np.int64)
        block = min(r, _SYNDROME_BLOCK)
        powers = np.empty((block, len(self.points)), dtype=np.int64)  # X**0 .. X**(block-1)
        powers[0] = 1
        for k in range(1, block):
            powers[k] = mul(powers[k - 1], self._shifted, p)
        step = mul(powers[-1], self._shifted, p)  # X**block
        out = np.empty(r, dtype=np.int64)
        term = mul(self.weights, received, p)  # v_i y_i X_i**k0 for k0 = 0, block, ...
        for k0 in range(0, r, block):
            rows = min(block, r - k0)
            out[k0 : k0 + rows] = field_sum(mul(term[None, :], powers[:rows], p), p)
            term = mul(term, step, p)
        return out

    def locate(self, received: FieldArray) -> tuple[int, ...] | None:
        """Positions of the wrong entries of one received word ``y`` (n,).

        Returns ``()`` for a codeword and None when no polynomial of degree ``< R``
        disagrees with ``y`` in at most :attr:`max_errors` positions.
        """
        p = self.field.prime
        conn = berlekamp_massey([int(v) for v in self.syndromes(received)], p)
        degree = len(conn) - 1
        if degree > self.max_errors:
            return None
        # Q(X) = X**degree * Lambda(1/X) by Horner over conn (highest power of Q first).
        q = np.full(len(self.points), conn[0], dtype=np.int64)
        for c in conn[1:]:
            q = np.mod(mul(q, self._shifted, p) + c, p)
        roots = tuple(int(i) for i in np.flatnonzero(q == 0))
        return roots if len(roots) == degree else None

    def decode(
        self,
        received: FieldArray,
        targets: Sequence[int],
        rng: RandomSource,
        *,
        labels: Sequence[int] | None = None,
    ) -> tuple[FieldArray, tuple[int, ...]]:
        """Evaluate at ``targets`` the polynomials through the rows of ``received``, correcting.

        Args:
            received: (n, L), row ``i`` the values at ``points[i]`` of ``L`` polynomials of
                degree ``< R`` (column-wise), up to :attr:`max_errors` wrong rows.
            targets: points to evaluate the decoded polynomials at.
            rng: randomness for the column combination that errors are located on.
            labels: names of the rows in errors (default: positions).

        Returns:
            values (len(targets), L) and the positions of the rows found wrong, ascending.

        Raises:
            DecodeError: the rows cannot be corrected: more than :attr:`max_errors` are
                wrong, or the rows left after removing the located ones still disagree in
                some column. ``received`` and ``rejected`` of the error are labels.
        """
        received = np.asarray(received, dtype=np.int64)
        n, p = len(self.points), self.field.prime
        names = tuple(labels) if labels is not None else tuple(range(n))
        if received.ndim != 2 or received.shape[0] != n:
            raise ParameterError("received", f"must have shape ({n}, L), not {received.shape}")
        if len(names) != n:
            raise ParameterError("labels", f"must have {n} entries, not {len(names)}")
        errors: tuple[int, ...] = ()
        if self.redundancy and received.shape[1]:
            coeffs = rng.field_elements(p, (1, received.shape[1]))
            combined = matmul(self.field, coeffs, received.T)[0]
            located = self.locate(combined)
            if located is None:
                raise DecodeError(
                    f"more than {self.max_errors} of {n} evaluations are wrong: cannot correct",
                    received=names,
                )
            errors = located
        bad = set(errors)
        rows = [i for i in range(n) if i not in bad]
        basis, rest = rows[: self.dimension], rows[self.dimension :]
        basis_rows = _take_rows(received, basis)
        if rest and received.shape[1]:
            weights = rng.field_elements(p, (CHECK_COMBINATIONS, received.shape[1]))
            # (n, CHECK_COMBINATIONS); the long matrix on the right, as in the locating step
            combined = matmul(self.field, weights, received.T).T
            predict = lagrange_matrix(
                [self.points[i] for i in basis], [self.points[i] for i in rest], p
            )
            if not np.array_equal(matmul(self.field, predict, combined[basis]), combined[rest]):
                rejected = tuple(names[i] for i in errors)
                raise DecodeError(
                    f"evaluations are inconsistent after removing {list(rejected)} (at most "
                    f"{self.max_errors} of {n} can be corrected); refusing to decode",
                    rejected=rejected,
                    received=names,
                )
        at_targets = lagrange_matrix([self.points[i] for i in basis], list(targets), p)
        return matmul(self.field, at_targets, basis_rows), errors


def _take_rows(matrix: FieldArray, rows: list[int]) -> FieldArray:
    """``matrix[rows]``, as a view when ``rows`` is a contiguous range."""
    if rows and rows[-1] - rows[0] + 1 == len(rows):
        return matrix[rows[0] : rows[-1] + 1]
    return matrix[rows]

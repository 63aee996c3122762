"""Small exact linear algebra over GF(p): Lagrange matrices, solving, polynomials.

These matrices are tiny (at most a few hundred rows: one per participant), so they are
computed with Python integers, exactly, for any prime the core supports. Bulk products
of these matrices with long share vectors go through :meth:`PrimeField.matmul`.

Polynomials are lists of coefficients, lowest degree first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from crypto.field import FieldArray

__all__ = [
    "lagrange_matrix",
    "poly_divmod",
    "poly_eval",
    "solve",
]


def lagrange_matrix(nodes: Sequence[int], points: Sequence[int], prime: int) -> FieldArray:
    """Matrix ``M`` (len(points), len(nodes)) with ``M[j, k] = l_k(points[j])``.

    ``l_k`` is the Lagrange basis polynomial over ``nodes``:
    ``l_k(z) = prod_{m != k} (z - nodes[m]) / (nodes[k] - nodes[m])``. For a polynomial
    ``u`` of degree ``< len(nodes)``, ``u(points) = M @ u(nodes)``. Nodes must be
    distinct mod p.
    """
    nodes = [n % prime for n in nodes]
    if len(set(nodes)) != len(nodes):
        raise ValueError("Argument 'nodes' must be distinct modulo p")
    # Barycentric weights w_k = 1 / prod_{m != k} (x_k - x_m).
    weights = []
    for k, xk in enumerate(nodes):
        denom = 1
        for m, xm in enumerate(nodes):
            if m != k:
                denom = denom * (xk - xm) % prime
        weights.append(pow(denom, prime - 2, prime))
    out = np.zeros((len(points), len(nodes)), dtype=np.int64)
    for j, z in enumerate(points):
        z %= prime
        if z in nodes:
            out[j, nodes.index(z)] = 1
            continue
        full = 1
        for xm in nodes:
            full = full * (z - xm) % prime
        for k, xk in enumerate(nodes):
            out[j, k] = full * pow((z - xk) % prime, prime - 2, prime) % prime * weights[k] % prime
    return out


def solve(matrix: list[list[int]], rhs: list[int], prime: int) -> list[int] | None:
    """One solution ``x`` of ``matrix @ x = rhs`` over GF(p), or None if inconsistent.

    Gaussian elimination with Python integers; free variables are set to 0. The
    system may be under-determined (Berlekamp-Welch with fewer errors than allowed).
    """
    rows = len(matrix)
    cols = len(matrix[0]) if rows else 0
    aug = [[v % prime for v in row] + [b % prime] for row, b in zip(matrix, rhs, strict=True)]
    pivots: list[int] = []
    r = 0
    for c in range(cols):
        pivot = next((i for i in range(r, rows) if aug[i][c]), None)
        if pivot is None:
            continue
        aug[r], aug[pivot] = aug[pivot], aug[r]
        inv = pow(aug[r][c], prime - 2, prime)
        aug[r] = [v * inv % prime for v in aug[r]]
        for i in range(rows):
            if i != r and aug[i][c]:
                f = aug[i][c]
                row_r = aug[r]
                aug[i] = [(vi - f * vr) % prime for vi, vr in zip(aug[i], row_r, strict=True)]
        pivots.append(c)
        r += 1
        if r == rows:
            break
    if any(aug[i][cols] for i in range(r, rows)):
        return None
    x = [0] * cols
    for i, c in enumerate(pivots):
        x[c] = aug[i][cols]
    return x


def poly_eval(coeffs: Sequence[int], z: int, prime: int) -> int:
    """``sum_i coeffs[i] * z**i mod p`` by Horner's rule."""
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * z + c) % prime
    return acc


def poly_divmod(num: Sequence[int], den: Sequence[int], prime: int) -> tuple[list[int], list[int]]:
    """Quotient and remainder of polynomial division over GF(p) (``den`` nonzero)."""
    den = list(den)
    while den and den[-1] % prime == 0:
        den.pop()
    if not den:
        raise ZeroDivisionError("polynomial division by zero")
    rem = [c % prime for c in num]
    quot = [0] * max(len(rem) - len(den) + 1, 1)
    inv_lead = pow(den[-1], prime - 2, prime)
    for shift in range(len(rem) - len(den), -1, -1):
        coef = rem[shift + len(den) - 1] * inv_lead % prime
        quot[shift] = coef
        if coef:
            for i, d in enumerate(den):
                rem[shift + i] = (rem[shift + i] - coef * d) % prime
    rem = rem[: len(den) - 1]
    while rem and rem[-1] == 0:
        rem.pop()
    return quot, rem

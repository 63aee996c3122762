"""The decoder that ``crypto/lcc.py`` used before issue 12: Berlekamp-Welch, cubic in N.

Kept only so that ``python -m bench.crypto.decode`` can time old against new on the same
inputs. The dense linear system of Berlekamp-Welch is solved with Python integers
(O(n**3)); Lagrange matrices are built entry by entry with one ``pow`` each. The code
below is the pre-issue-12 ``LagrangeCode.decode`` path, unchanged apart from names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from secfpp.crypto.errors import DecodeError
from secfpp.crypto.field import FieldArray
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.rng import RandomSource

__all__ = ["legacy_decode"]


def legacy_decode(
    code: LagrangeCode, evaluations: Mapping[int, FieldArray], *, degree: int, rng: RandomSource
) -> tuple[FieldArray, tuple[int, ...]]:
    """Values ``f(u(beta_k))`` (K, L) and the rejected participants, the pre-issue-12 way."""
    threshold = code.recovery_threshold(degree)
    indices = tuple(sorted(evaluations))
    if len(indices) < threshold:
        raise DecodeError(f"need {threshold} evaluations", received=indices)
    matrix = np.vstack([code.field.check(np.asarray(evaluations[j])) for j in indices])
    rejected: tuple[int, ...] = ()
    good = list(range(len(indices)))
    if not _consistent(code, indices, matrix, good, threshold):
        bad = _locate_errors(code, indices, matrix, threshold, rng)
        rejected = tuple(indices[i] for i in bad)
        good = [i for i in good if i not in bad]
        if not _consistent(code, indices, matrix, good, threshold):
            raise DecodeError("evaluations stay inconsistent", rejected=rejected, received=indices)
    basis = good[:threshold]
    points = [code.alpha(indices[i]) for i in basis]
    interp = _lagrange_matrix(points, code.betas[: code.k], code.field.prime)
    return code.field.matmul(interp, matrix[basis]), rejected


def _consistent(
    code: LagrangeCode,
    indices: tuple[int, ...],
    matrix: FieldArray,
    good: list[int],
    threshold: int,
) -> bool:
    basis, rest = good[:threshold], good[threshold:]
    if not rest:
        return True
    predict = _lagrange_matrix(
        [code.alpha(indices[i]) for i in basis],
        [code.alpha(indices[i]) for i in rest],
        code.field.prime,
    )
    return bool(np.array_equal(code.field.matmul(predict, matrix[basis]), matrix[rest]))


def _locate_errors(
    code: LagrangeCode,
    indices: tuple[int, ...],
    matrix: FieldArray,
    threshold: int,
    rng: RandomSource,
) -> list[int]:
    p = code.field.prime
    n = len(indices)
    max_errors = (n - threshold) // 2
    coeffs = rng.field_elements(p, (matrix.shape[1], 1))
    y = [int(v) for v in code.field.matmul(matrix, coeffs)[:, 0]]
    xs = [code.alpha(j) for j in indices]
    failure = DecodeError(f"more than {max_errors} of {n} evaluations are wrong", received=indices)
    if max_errors == 0:
        raise failure
    # Unknowns: E_0..E_{e-1} (E monic of degree e) and Q_0..Q_{R+e-1}.
    # Equations: Q(x_i) - y_i * E(x_i) = y_i * x_i**e for every received i.
    e = max_errors
    system = []
    rhs = []
    for xi, yi in zip(xs, y, strict=True):
        powers = [pow(xi, m, p) for m in range(threshold + e)]
        system.append([(-yi * powers[m]) % p for m in range(e)] + powers)
        rhs.append(yi * powers[e] % p)
    solution = _solve(system, rhs, p)
    if solution is None:
        raise failure
    locator = [*solution[:e], 1]
    quotient, remainder = _poly_divmod(solution[e:], locator, p)
    if remainder:
        raise failure
    bad = [
        i for i, (xi, yi) in enumerate(zip(xs, y, strict=True)) if _poly_eval(quotient, xi, p) != yi
    ]
    if not bad or len(bad) > max_errors:
        raise failure
    return bad


def _lagrange_matrix(nodes: Sequence[int], points: Sequence[int], prime: int) -> FieldArray:
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


def _solve(matrix: list[list[int]], rhs: list[int], prime: int) -> list[int] | None:
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


def _poly_eval(coeffs: Sequence[int], z: int, prime: int) -> int:
    """``sum_i coeffs[i] * z**i mod p`` by Horner's rule."""
    acc = 0
    for c in reversed(coeffs):
        acc = (acc * z + c) % prime
    return acc


def _poly_divmod(num: Sequence[int], den: Sequence[int], prime: int) -> tuple[list[int], list[int]]:
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

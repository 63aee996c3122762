"""Exact field products against float64 GEMM of the same shape, and the N = 100 round.

Prints, from one process with one BLAS thread:

1. for each main shape, the exact field product's seconds against a plain float64 GEMM
   of the same shape (``a @ b`` on float64 copies of the operands) and their ratio
   ``gemm / field`` (1.0 = GEMM speed):

   * the aggregation encoding (``B`` (N-T, K+T) @ ``[X; Z]`` (K+T, L), prepared left
     operand, :meth:`PrimeField.matmul`, ``p = 2**31 - 1``) and its decode
     (``(K, K+T) @ (K+T, L)``, :func:`crypto.linalg.matmul`) for N = 100 all-to-all and
     the N = 1,000 committees c = 81 and c = 379 (``bench.committee``'s settings), with
     ``d = 100,000``;
   * the distance stage (``p = 2**61 - 1``, r = 128, 8 clusters + 8 probes) at N = 1,000:
     a member's set sums (0/1 membership (16, N) @ shares (N, r)) and inner products
     (shares (N, r) @ sums (r, 16)), and the c = 81 committee's decode
     (``(1, 2T+1) @ (2T+1, values)``);

2. the N = 100, d = 100,000 secure-aggregation round of ``bench.crypto_round`` (every
   participant quantizes, shares, packs and seals; every participant opens and sums;
   the coordinator decodes), as the daemon does it in its steady state (warm key rings,
   batched packing, the inbox opened into one buffer) and with bare private keys and one
   call per envelope (one X25519 per envelope and side), each with its ratio to a plain
   float64 sum of the 100 update vectors measured in the same run.

Every time is CPU seconds of this process (``time.process_time``): on a shared machine
wall-clock time also counts the waits for a core, which grow with an operation's length
and so bias a ratio of a long and a short operation. Compare the ratios, measured side
by side; the header gives the load average at the start.

Usage:  python -m bench.field_products [--quick] [--repeat 7] [--no-round]
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

from secfpp.crypto.committee import plan_committee
from secfpp.crypto.field import FieldArray, PrimeField
from secfpp.crypto.linalg import matmul
from secfpp.crypto.params import MERSENNE_31, MERSENNE_61, CryptoParams
from secfpp.process.memory import retain_freed_memory

D = 100_000
REDUCED_DIM = 128
SETS = 16  # 8 clusters + 8 probes (bench.committee)


@dataclass(frozen=True)
class Shape:
    """One product: ``label``, left (m, k) and right (k, cols) in GF(prime)."""

    label: str
    prime: int
    m: int
    k: int
    cols: int
    prepared: bool = False  # the encoding's left operand is prepared once per code
    zero_one: bool = False  # the membership matrix: 0/1 entries


def _best(fn: Callable[[], object], repeat: int) -> float:
    """Least CPU seconds of ``repeat`` runs (CPU time: waiting for a shared core is not
    counted, which would penalize the longer of two operations timed side by side)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def shapes(quick: bool) -> list[Shape]:
    """The main shapes (module docstring); ``quick``: N = 100 only, smaller d."""
    d = 8192 if quick else D
    out = []
    p100 = CryptoParams.for_federation(100, reduced_dim=REDUCED_DIM).aggregation_lcc()
    codes = [("N=100", 100, p100.k, p100.t)]
    if not quick:
        for fc in (0.1, 0.25):
            plan = plan_committee(1000, collusion_fraction=fc, dropout_fraction=0.25)
            spec = plan.aggregation_code
            codes.append((f"N=1000 c={plan.size}", plan.size, spec.k, spec.t))
    for label, n, k, t in codes:
        cols = -(-d // k)
        out.append(Shape(f"{label} encoding", MERSENNE_31, n - t, k + t, cols, prepared=True))
        out.append(Shape(f"{label} decode", MERSENNE_31, k, k + t, cols))
    n_dist = 100 if quick else 1000
    out.append(Shape(f"N={n_dist} set sums", MERSENNE_61, SETS, n_dist, REDUCED_DIM, zero_one=True))
    out.append(Shape(f"N={n_dist} inner products", MERSENNE_61, n_dist, REDUCED_DIM, SETS))
    if not quick:
        plan = plan_committee(1000, collusion_fraction=0.1, dropout_fraction=0.25)
        values = 1000 * SETS + 8 * 7 // 2
        threshold = 2 * plan.clustering_code.t + 1
        out.append(Shape(f"c={plan.size} distance decode", MERSENNE_61, 1, threshold, values))
    return out


def product_time(shape: Shape, repeat: int, seed: int = 0) -> tuple[float, float]:
    """(field seconds, float64 GEMM seconds) for ``shape``, best of ``repeat`` each."""
    gen = np.random.default_rng(seed)
    field = PrimeField(shape.prime)
    if shape.zero_one:
        a: FieldArray = gen.integers(0, 2, (shape.m, shape.k))
    else:
        a = gen.integers(0, shape.prime, (shape.m, shape.k))
    b = gen.integers(0, shape.prime, (shape.k, shape.cols))
    af, bf = a.astype(np.float64), b.astype(np.float64)
    if shape.prepared:
        left = field.prepare_left(a)
        run: Callable[[], object] = lambda: field.matmul(left, b)  # noqa: E731
    else:
        run = lambda: matmul(field, a, b)  # noqa: E731
    run()  # first call: buffers and pages
    t_field = _best(run, repeat)
    t_gemm = _best(lambda: af @ bf, repeat)
    return t_field, t_gemm


def load_average() -> str:
    try:
        return ", ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover - platforms without getloadavg
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 100 shapes, d = 8192")
    parser.add_argument("--repeat", type=int, default=7, help="best of this many runs")
    parser.add_argument("--no-round", action="store_true", help="products only")
    args = parser.parse_args(argv)
    retain_freed_memory()  # as the daemon and the coordinator do (secfpp/process/memory.py)
    print(
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"load average {load_average()}, one BLAS thread, CPU seconds, best of {args.repeat}"
    )
    print(f"\n{'product':<32} {'m x k @ k x cols':>22} {'field ms':>9} {'gemm ms':>8} {'ratio':>6}")
    for shape in shapes(args.quick):
        t_field, t_gemm = product_time(shape, args.repeat)
        dims = f"{shape.m}x{shape.k} @ {shape.k}x{shape.cols}"
        bits = "2^31-1" if shape.prime == MERSENNE_31 else "2^61-1"
        print(
            f"{shape.label + ' (' + bits + ')':<32} {dims:>22} {t_field * 1e3:>9.3f} "
            f"{t_gemm * 1e3:>8.3f} {t_gemm / t_field:>6.2f}"
        )
    if args.no_round:
        return
    from bench.crypto_round import aggregation_round

    n, d = (10, 8192) if args.quick else (100, D)
    print(f"\n== secure-aggregation round, N = {n}, d = {d} (bench.crypto_round), CPU seconds")
    print(
        f"{'path':<10} {'share+seal':>10} {'open+sum':>9} {'decode':>7} {'total s':>8} "
        f"{'plain s':>8} {'ratio':>6}"
    )
    for warm in (True, False):
        r = aggregation_round(n, d, warm_rings=warm, clock=time.process_time)
        print(
            f"{'daemon' if warm else 'bare':<10} {r['share_seal']:>10.3f} {r['open_sum']:>9.3f} "
            f"{r['decode']:>7.3f} {r['total']:>8.3f} {r['plain']:>8.5f} "
            f"{r['total'] / r['plain']:>6.0f}"
        )
    print(f"load average at the end {load_average()}")


if __name__ == "__main__":
    main()

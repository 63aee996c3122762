"""Benchmark of decoding with errors (issue 12, item 3): prints a table (not a test).

For N participants, K and T as ``CryptoParams.for_federation(N)`` picks them, and each
coded stage:

* **distance** (degree 2, ``p = 2**61 - 1``): result vectors of the SecPC distance stage
  with 8 clusters and 8 probes, ``L = 16 N + 28`` values (and a shorter ``L`` where noted);
* **aggregation** (degree 1, ``p = 2**31 - 1``): member-set sums of updates with
  ``d = 100 000`` entries, ``L = ceil(d / K)`` per result, and a long ``L = 4096``,

every participant's result is an evaluation of random polynomials of degree ``< R``;
``errors`` of them (0, 1 or the most the code corrects, ``floor((N-R)/2)``) are replaced
by random vectors at random participants. Each decode is checked (the rejected
participants are exactly the corrupted ones and the values are the true ones) and timed:
wall-clock and CPU seconds of ``LagrangeCode.decode``, median of 3 runs (1 run when a
decode takes more than 5 s). ``old s`` is the pre-issue-12 Berlekamp-Welch decoder
(:mod:`bench.crypto.legacy_decode`) on the same input, where it finishes in reasonable time.

One process, one BLAS thread (as the coordinator's decode worker). The development machine
is shared, so wall-clock times are noisy; CPU seconds are the steadier figure.

Usage:  python -m bench.crypto.decode [--quick] [--sizes 64 512] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

from bench.crypto.legacy_decode import legacy_decode
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.linalg import lagrange_matrix, matmul
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rng import DeterministicRandom

_DISTINCT_COLUMNS = 64  # columns drawn independently; longer vectors repeat them
_UPDATE_LENGTH = 100_000


@dataclass(frozen=True)
class Case:
    """One decode to time."""

    code: LagrangeCode
    degree: int
    evaluations: dict[int, np.ndarray]
    expected: np.ndarray
    corrupted: tuple[int, ...]


def make_case(
    n: int, stage: str, length: int, errors: int, seed: int = 0, code: LagrangeCode | None = None
) -> Case:
    """Results of ``n`` participants for ``stage``, ``errors`` of them replaced by noise;
    ``code`` defaults to the one ``CryptoParams.for_federation(n)`` picks for the stage."""
    if code is None:
        params = CryptoParams.for_federation(n)
        code = params.clustering_lcc() if stage == "distance" else params.aggregation_lcc()
    degree = 2 if stage == "distance" else 1
    p, threshold = code.field.prime, code.recovery_threshold(degree)
    rng = DeterministicRandom(seed)
    alphas = [code.alpha(j) for j in range(n)]
    base = rng.field_elements(p, (threshold, min(length, _DISTINCT_COLUMNS)))
    words = matmul(code.field, lagrange_matrix(alphas[:threshold], alphas, p), base)
    targets = lagrange_matrix(alphas[:threshold], code.betas[: code.k], p)
    expected = matmul(code.field, targets, base)
    reps = -(-length // base.shape[1])
    words = np.tile(words, reps)[:, :length]
    expected = np.tile(expected, reps)[:, :length]
    corrupted = tuple(sorted(int(j) for j in np.argsort(rng.uniform(n))[:errors]))
    for j in corrupted:
        words[j] = rng.field_elements(p, length)
    return Case(code, degree, {j: words[j] for j in range(n)}, expected, corrupted)


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_new(case: Case) -> tuple[float, float]:
    """(median wall s, median CPU s) of ``LagrangeCode.decode``; checks every result."""

    def run() -> None:
        decoded = case.code.decode(case.evaluations, degree=case.degree, rng=DeterministicRandom(1))
        assert decoded.rejected == case.corrupted, "wrong participants rejected"
        assert np.array_equal(decoded.values, case.expected), "wrong values decoded"

    runs = [_timed(run)]
    if runs[0][0] < 5.0:
        runs += [_timed(run) for _ in range(2)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def time_old(case: Case) -> float:
    """Wall seconds of the pre-issue-12 decoder on the same input (one run, checked)."""

    def run() -> None:
        values, rejected = legacy_decode(
            case.code, case.evaluations, degree=case.degree, rng=DeterministicRandom(1)
        )
        assert rejected == case.corrupted, "legacy decoder rejected the wrong participants"
        assert np.array_equal(values, case.expected), "legacy decoder decoded wrong values"

    return _timed(run)[0]


def rows(quick: bool, sizes: list[int] | None = None) -> list[tuple[int, str, int, str]]:
    """(N, stage, L, errors) to run; errors is "0", "1" or "max"."""
    if sizes is None:
        sizes = [64, 512] if quick else [64, 128, 256, 512, 1024, 2048]
    errors = ["0", "1", "max"]
    out = []
    for n in sizes:
        k = CryptoParams.for_federation(n).aggregation_code.k
        for e in errors:
            out.append((n, "distance", 16 * n + 28, e))
        if n == 2048:
            out.append((n, "distance", 2048, "max"))
        for e in errors:
            out.append((n, "aggregation", -(-_UPDATE_LENGTH // k), e))
        out.append((n, "aggregation", 4096, "max"))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 64 and 512 only")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="N values to run")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    table: list[dict[str, object]] = []
    old_limit = 64 if args.quick else 256
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2-core machine, shared)")
    print(
        f"{'N':>5} {'stage':>11} {'deg':>3} {'K':>4} {'T':>4} {'R':>5} {'errors':>6} "
        f"{'L':>6} {'wall s':>7} {'cpu s':>7} {'old s':>7}"
    )
    for n, stage, length, errs in rows(args.quick, args.sizes):
        probe = make_case(n, stage, 1, 0)
        threshold = probe.code.recovery_threshold(probe.degree)
        count = {"0": 0, "1": 1, "max": (n - threshold) // 2}[errs]
        case = make_case(n, stage, length, count)
        wall, cpu = time_new(case)
        old = f"{time_old(case):>7.2f}" if n <= old_limit and count <= 1 else f"{'-':>7}"
        print(
            f"{n:>5} {stage:>11} {case.degree:>3} {case.code.k:>4} {case.code.t:>4} "
            f"{threshold:>5} {count:>6} {length:>6} {wall:>7.3f} {cpu:>7.3f} {old}",
            flush=True,
        )
        table.append(
            {
                "n": n,
                "stage": stage,
                "degree": case.degree,
                "k": case.code.k,
                "t": case.code.t,
                "r": threshold,
                "errors": count,
                "length": length,
                "wall_s": wall,
                "cpu_s": cpu,
            }
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Benchmark of the crypto core: prints seconds per round and ratios (not a test).

Measures, in one process with one BLAS thread:

1. a full secure-aggregation round: every participant quantizes its update, shares it
   (LCC), packs and seals one envelope per recipient; every participant opens its
   envelopes and sums them (one cluster of everybody); the coordinator decodes the sum
   (with the Reed-Solomon consistency check, since all N results arrive). K and T
   tolerate N/4 dropouts with privacy against T = N/4 colluders. Reported with the ratio
   to a plaintext numpy sum of the same vectors;
2. the coded SecPC distance stage for N participants, r = 128, 8 clusters (+ 8
   probes): sharing, every participant's coded distances, decoding;
3. field matmul throughput as a fraction of float64 GEMM on the round's shapes.

Usage:  python -m bench.crypto.round [--quick] [--n 10 50 100] [--d 8192 100000]
            [--secpc-n 32 100] [--dropout 0.25] [--warm-rings] [--cpu] [--json PATH]

``--json`` also writes every figure (seconds per phase, the plain sum, the field/GEMM
fractions) to a file, as :mod:`bench.report` reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from secfpp.crypto.aggregation import decode_cluster_mean, member_sums, prepare_update
from secfpp.crypto.clustering import Membership
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rng import DeterministicRandom, SystemRandom
from secfpp.crypto.secpc import ReferenceSets, coded_distances, decode_distances
from secfpp.crypto.transport import (
    KeyRing,
    ShareContext,
    generate_keypair,
    open_share,
    open_share_into,
    seal_share,
)
from secfpp.crypto.wire import (
    pack_field_vector,
    pack_field_vectors,
    unpack_field_vector,
    unpack_field_vectors,
    vector_size,
)

CLOCK: list[Callable[[], float]] = [time.perf_counter]  # main(--cpu): time.process_time


def _timed(fn: Callable[[], object], clock: Callable[[], float] | None = None) -> float:
    clock = clock or CLOCK[0]
    start = clock()
    fn()
    return clock() - start


def aggregation_round(
    n: int,
    d: int,
    seed: int = 0,
    *,
    warm_rings: bool = False,
    clock: Callable[[], float] = time.perf_counter,
    dropout: float = 0.0,
) -> dict[str, float]:
    """One full secure-aggregation round; returns seconds per phase (of ``clock``).

    ``share_seal`` is also given in its parts: ``quantize`` (clip, scale, stochastic
    rounding), ``encode`` (the LCC sharing: the ``T`` random chunks and the field product
    of the ``P x (K + T)`` encoding matrix with the ``(K + T) x d / K`` chunks) and
    ``pack_seal`` (packing and AES-GCM sealing one envelope per recipient).

    ``warm_rings``: the daemon's steady state (``secfpp.participant.protocol``): every
    participant seals and opens through a :class:`KeyRing` that already met every peer
    (one X25519 per pair for the federation's lifetime, see ``bench.crypto.committee``), packs
    its shares in one batch (:func:`pack_field_vectors`) and opens its inbox into the
    rows of one buffer, unpacked at once (:func:`open_share_into`,
    :func:`unpack_field_vectors`). Otherwise: bare private keys (one X25519 exchange per
    envelope and side) and one pack, open and unpack call per envelope.

    ``dropout``: a fraction ``floor(dropout * N)`` of the participants (drawn with ``seed``)
    drop after sharing: their shares are in everybody's inbox, but they neither open nor
    sum, so the coordinator decodes from the other results (at most ``D`` may be missing,
    what the code tolerates). The decoded mean is still over all ``N`` updates.
    """
    params = CryptoParams.for_federation(n, reduced_dim=128)
    spec, code = params.aggregation_field, params.aggregation_lcc()
    prime = spec.prime
    rng = SystemRandom()
    pairs = [generate_keypair(rng) for _ in range(n)]
    keys: list[tuple[X25519PrivateKey | KeyRing, X25519PublicKey]] = list(pairs)
    if warm_rings:
        keys = [(KeyRing(pair.private), pair.public) for pair in pairs]
        for own, _ in keys:
            for _, peer in keys:
                own.exchange(peer)  # an earlier round met every peer (untimed)
    updates = np.random.default_rng(seed).normal(0, 0.01, (n, d))
    inbox: list[dict[int, bytes]] = [{} for _ in range(n)]
    dropped = set(np.random.default_rng(seed + 1).permutation(n)[: int(dropout * n)].tolist())

    def context(i: int, j: int) -> ShareContext:
        return ShareContext("bench", 1, "sharing", i, j)

    parts = {"quantize": 0.0, "encode": 0.0, "seal": 0.0}

    def share_and_seal() -> None:
        for i in range(n):
            t0 = clock()
            q = prepare_update(updates[i], spec, l2_clip=params.l2_clip, rng=rng)
            t1 = clock()
            shares = code.share(q, rng)
            t2 = clock()
            if warm_rings:
                payloads = pack_field_vectors(shares, prime=prime)
            else:
                payloads = [pack_field_vector(shares[j], prime=prime) for j in range(n)]
            for j in range(n):
                inbox[j][i] = seal_share(keys[i][0], keys[j][1], payloads[j], context=context(i, j))
            parts["quantize"] += t1 - t0
            parts["encode"] += t2 - t1
            parts["seal"] += clock() - t2

    results: dict[int, np.ndarray] = {}
    length = code.chunk_length(d)

    def open_and_sum() -> None:
        if warm_rings:
            plain = np.empty((n, vector_size(prime, length)), dtype=np.uint8)
            for j in range(n):
                if j in dropped:
                    continue
                senders = sorted(inbox[j])
                for row, i in enumerate(senders):
                    open_share_into(
                        keys[j][0], keys[i][1], inbox[j][i], plain[row], context=context(i, j)
                    )
                values, bad = unpack_field_vectors(plain, prime=prime, length=length)
                assert not bad
                opened = {i: values[row] for row, i in enumerate(senders)}
                results[j] = member_sums(code.field, opened, [tuple(range(n))])[0]
            return
        for j in range(n):
            if j in dropped:
                continue
            opened = {
                i: unpack_field_vector(
                    open_share(keys[j][0], keys[i][1], env, context=context(i, j)),
                    prime=prime,
                    expected_length=length,
                )
                for i, env in inbox[j].items()
            }
            results[j] = member_sums(code.field, opened, [tuple(range(n))])[0]

    mean: list[np.ndarray] = []

    def decode() -> None:
        m, _ = decode_cluster_mean(code, results, length=d, spec=spec, contributors=n)
        mean.append(m)

    t_share = _timed(share_and_seal, clock)
    t_open = _timed(open_and_sum, clock)
    t_decode = _timed(decode, clock)
    error = float(np.max(np.abs(mean[0] - updates.mean(axis=0))))
    t_plain = min(_timed(lambda: updates.sum(axis=0), clock) for _ in range(5))
    return {
        "k": code.k,
        "t": code.t,
        "dropped": len(dropped),
        "share_seal": t_share,
        "quantize": parts["quantize"],
        "encode": parts["encode"],
        "pack_seal": parts["seal"],
        "open_sum": t_open,
        "decode": t_decode,
        "total": t_share + t_open + t_decode,
        "plain": t_plain,
        "max_error": error,
    }


def secpc_stage(n: int, r: int = 128, clusters: int = 8, seed: int = 1) -> dict[str, float]:
    """The coded distance stage with ``clusters`` clusters and one probe (half) each."""
    params = CryptoParams.for_federation(n, reduced_dim=r)
    spec, code = params.clustering_field, params.clustering_lcc()
    rng = DeterministicRandom(seed)
    vectors = np.random.default_rng(seed).normal(0, 0.5, (n, r))
    from secfpp.crypto.quantize import quantize

    groups = np.array_split(np.arange(n), clusters)
    membership = Membership(
        tuple((c, tuple(int(i) for i in g)) for c, g in enumerate(groups)),
        tuple((c, tuple(int(i) for i in g[: len(g) // 2])) for c, g in enumerate(groups)),
        clusters,
    )
    built = membership.reference_sets(
        range(n), min_aggregation_size=1, min_reference_size=3, salt="bench"
    )
    assert built is not None
    refs: ReferenceSets = built
    shares: list[np.ndarray] = []
    results: dict[int, np.ndarray] = {}

    def share() -> None:
        for i in range(n):
            q = quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip)
            shares.append(code.share(q, rng))

    def compute() -> None:
        for j in range(n):
            results[j] = coded_distances(code.field, {i: shares[i][j] for i in range(n)}, refs)

    t_share = _timed(share)
    t_compute = _timed(compute)
    t_decode = _timed(lambda: decode_distances(code, results, refs, spec))
    return {
        "k": code.k,
        "t": code.t,
        "share": t_share,
        "compute": t_compute,
        "decode": t_decode,
        "total": t_share + t_compute + t_decode,
        "values": refs.result_length,
    }


def matmul_ratio(n: int, k: int, cols: int, repeat: int = 5) -> tuple[float, float]:
    """(field seconds, float64 GEMM seconds) for (n, k) @ (k, cols), best of ``repeat``."""
    params = CryptoParams.for_federation(max(n, 8))
    field = params.aggregation_field.field
    gen = np.random.default_rng(0)
    a = gen.integers(0, field.prime, (n, k))
    b = gen.integers(0, field.prime, (k, cols))
    prepared = field.prepare_left(a)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    t_field = min(_timed(lambda: field.matmul(prepared, b)) for _ in range(repeat))
    t_gemm = min(_timed(lambda: af @ bf) for _ in range(repeat))
    return t_field, t_gemm


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (smoke run)")
    parser.add_argument("--n", type=int, nargs="+", default=None, help="round sizes N")
    parser.add_argument("--d", type=int, nargs="+", default=None, help="update lengths d")
    parser.add_argument(
        "--secpc-n", type=int, nargs="+", default=None, help="distance-stage sizes N"
    )
    parser.add_argument(
        "--dropout", type=float, default=0.0, help="fraction dropping after sharing"
    )
    parser.add_argument(
        "--warm-rings", action="store_true", help="the daemon's steady state (key rings, batches)"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="CPU seconds (process_time) instead of wall-clock"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.cpu:
        CLOCK[0] = time.process_time
    sizes_n = args.n or ([10] if args.quick else [10, 50, 100])
    sizes_d = args.d or ([8192] if args.quick else [8192, 100_000])
    secpc_n = args.secpc_n or ([32] if args.quick else [32, 100])
    timer = "cpu" if args.cpu else "wall"
    out: dict[str, Any] = {
        "rounds": [],
        "secpc": [],
        "matmul": [],
        "timer": timer,
        "warm_rings": args.warm_rings,
    }

    print("== secure aggregation round (N/4 dropouts tolerated, T = N/4 colluders)")
    print(
        f"{'N':>4} {'d':>7} {'K':>3} {'T':>3} {'share+seal':>10} {'open+sum':>9} "
        f"{'decode':>7} {'total s':>8} {'plain s':>8} {'ratio':>7} {'max err':>8}"
    )
    for n in sizes_n:
        for d in sizes_d:
            r = aggregation_round(
                n, d, warm_rings=args.warm_rings, clock=CLOCK[0], dropout=args.dropout
            )
            out["rounds"].append({"n": n, "d": d, **r})
            print(
                f"{n:>4} {d:>7} {r['k']:>3} {r['t']:>3} {r['share_seal']:>10.3f} "
                f"{r['open_sum']:>9.3f} {r['decode']:>7.3f} {r['total']:>8.3f} "
                f"{r['plain']:>8.5f} {r['total'] / r['plain']:>7.0f} {r['max_error']:>8.1e}"
            )

    print("\n== coded SecPC distance stage (r = 128, K = 1, 8 clusters + their probes)")
    print(
        f"{'N':>4} {'K':>3} {'T':>3} {'values':>7} {'share':>7} {'compute':>8} "
        f"{'decode':>7} {'total s':>8}"
    )
    for n in secpc_n:
        s = secpc_stage(n, clusters=min(8, n // 2))
        out["secpc"].append({"n": n, **s})
        print(
            f"{n:>4} {s['k']:>3} {s['t']:>3} {s['values']:>7} {s['share']:>7.3f} "
            f"{s['compute']:>8.3f} {s['decode']:>7.3f} {s['total']:>8.3f}"
        )

    print("\n== field matmul (p = 2^31-1) vs float64 GEMM, same shapes")
    print(f"{'shape':>22} {'field s':>9} {'gemm s':>9} {'fraction':>9}")
    shapes = (
        [(10, 7, 1171)]
        if args.quick
        else [(10, 7, 1171), (50, 38, 325), (100, 75, 2000), (75, 75, 2000), (256, 256, 4096)]
    )
    for n, k, cols in shapes:
        t_field, t_gemm = matmul_ratio(n, k, cols)
        out["matmul"].append({"shape": [n, k, cols], "field": t_field, "gemm": t_gemm})
        print(f"{(n, k, cols)!s:>22} {t_field:>9.5f} {t_gemm:>9.5f} {t_gemm / t_field:>9.0%}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

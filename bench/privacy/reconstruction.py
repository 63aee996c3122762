"""How much of the pairwise-distance matrix a coordinator reconstructs from distance stages.

Every decoded value is a linear functional of the squared pairwise distances
``d_kl = |x_k - x_l|^2`` (``k < l``, ``n (n - 1) / 2`` unknowns):

    D[i, S]   = (1/m) sum_{k in S} d_ik - (1/m^2) sum_{k < l in S} d_kl        (m = |S|)
    E[a, b]   = (1/(m_a m_b)) sum_{k in a, l in b} d_kl
                - (1/m_a^2) sum_{k < l in a} d_kl - (1/m_b^2) sum_{k < l in b} d_kl

so after ``R`` rounds the coordinator holds ``A d = b`` for a matrix ``A`` of its requests;
``rank(A) / (n (n - 1) / 2)`` is the fraction of the matrix it has pinned down, and the
least-squares (minimum-norm) solution's relative error what it can say about the rest.
Worst case for the participants: prompts do not change between rounds (in a federation
they are retrained every round, so old equations go stale) and everybody is present.

Two coordinators:

* ``rules``: follows crypto.refset_rules (sets of at least 3, probes drawn from the
  beacon, one split or merge per round) and picks greedily, each round, the change
  (no change, any merge, or a split of any cluster into one of ``--candidates`` random
  subsets) whose next request adds the most rank. It knows the next round's beacon when
  it chooses (the beacon is committed one round ahead, so it is drawn but not secret
  from the coordinator) and uses it.
* ``rules, no change``: the same rules, but the membership never changes; only the
  probes, drawn afresh from every round's beacon, differ from round to round.
* ``free``: main's rules before this change, disjoint sets of at least 2 that the
  coordinator picks freely each round (here: random partitions into pairs and probes
  of two, greedily for rank): 4 rounds give all 28 distances of 8 participants.

``--distance-noise z ...`` runs the same requests with the distance stage's distributed DP
noise (``dp.distance_noise_multiplier = z``, :mod:`crypto.dp.distance`): every decoded
value carries the noise the mechanism puts on it (its std depends on the set sizes), the
attacker weights its least squares by it, and the table gives the privacy ledger's epsilon
for those releases. Prompts are scaled into the mechanism's L2 clip (``--l2-clip``).

    python -m bench.privacy.reconstruction --participants 8 16 --rounds 20 --out docs/results/...
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.clustering import Membership
from secfpp.crypto.dp.distance import DistanceNoise
from secfpp.crypto.dp.ledger import epsilon_spent
from secfpp.crypto.refset_rules import AnsweredSets, check_membership_change, probe_salt
from secfpp.crypto.refusal import check_distance_request
from secfpp.crypto.secpc import ReferenceSets, plaintext_distances

FED = "bench-reconstruction"
DELTA = 1e-5


def _pair_index(n: int) -> dict[tuple[int, int], int]:
    return {p: k for k, p in enumerate(itertools.combinations(range(n), 2))}


def observation_rows(refs: ReferenceSets, n: int) -> NDArray[np.float64]:
    """The rows of ``A`` one request adds (module docstring), in the layout of
    :func:`crypto.secpc.plaintext_distances`: ``D`` row-major, then ``E`` upper pairs."""
    index = _pair_index(n)

    def within(members: tuple[int, ...], scale: float, row: NDArray[np.float64]) -> None:
        for k, j in itertools.combinations(members, 2):
            row[index[(k, j)]] -= scale

    rows = []
    for i in refs.participants:
        for members in refs.sets:
            row = np.zeros(len(index))
            m = len(members)
            for k in members:
                if k != i:
                    row[index[(min(i, k), max(i, k))]] += 1.0 / m
            within(members, 1.0 / m**2, row)
            rows.append(row)
    for a, b in refs.cluster_pairs:
        ma, mb = refs.clusters[a][1], refs.clusters[b][1]
        row = np.zeros(len(index))
        for k in ma:
            for j in mb:
                row[index[(min(k, j), max(k, j))]] += 1.0 / (len(ma) * len(mb))
        within(ma, 1.0 / len(ma) ** 2, row)
        within(mb, 1.0 / len(mb) ** 2, row)
        rows.append(row)
    return np.asarray(rows)


def _observe(x: NDArray[np.float64], refs: ReferenceSets) -> NDArray[np.float64]:
    d = plaintext_distances(x, refs)
    upper = [d.centre[a, b] for a, b in refs.cluster_pairs]
    return np.concatenate([d.point.reshape(-1), np.asarray(upper)])


def _rank(a: NDArray[np.float64]) -> int:
    return 0 if a.size == 0 else int(np.linalg.matrix_rank(a, tol=1e-9))


def _refs(membership: Membership, n: int, number: int, beacon: bytes) -> ReferenceSets | None:
    return membership.reference_sets(
        range(n),
        min_aggregation_size=3,
        min_reference_size=3,
        salt=probe_salt(FED, number, beacon),
    )


def _changes(membership: Membership, rng: np.random.Generator, candidates: int) -> list[Membership]:
    """Memberships one split or one merge away (and ``membership`` itself)."""
    out = [membership]
    clusters = dict(membership.clusters)
    ids = sorted(clusters)
    for a, b in itertools.combinations(ids, 2):
        merged = {**clusters, a: tuple(sorted(clusters[a] + clusters[b]))}
        del merged[b]
        out.append(Membership(tuple(sorted(merged.items())), (), membership.next_id))
    if len(ids) < 8:
        for c in ids:
            members = clusters[c]
            if len(members) < 6:
                continue
            for _ in range(candidates):
                size = int(rng.integers(3, len(members) - 2))
                child = tuple(sorted(rng.choice(members, size=size, replace=False).tolist()))
                rest = tuple(m for m in members if m not in child)
                split = {**clusters, c: rest, membership.next_id: child}
                out.append(Membership(tuple(sorted(split.items())), (), membership.next_id + 1))
    return out


def run_rules(
    x: NDArray[np.float64],
    rounds: int,
    rng: np.random.Generator,
    candidates: int,
    *,
    passive: bool = False,
) -> list[tuple[ReferenceSets, NDArray[np.float64]]]:
    """The rule-bound greedy coordinator's requests, checked as participants check them;
    ``passive``: it never changes the membership (only the beacon's fresh probes)."""
    n = x.shape[0]
    membership = Membership.initial(range(n))
    beacons = [rng.bytes(32) for _ in range(rounds + 2)]
    asked: list[tuple[ReferenceSets, NDArray[np.float64]]] = []
    held = np.zeros((0, n * (n - 1) // 2))
    previous: AnsweredSets | None = None
    for number in range(1, rounds + 1):
        refs = _refs(membership, n, number, beacons[number])
        assert refs is not None
        check_distance_request(refs, have_shares_from=range(n), min_reference_size=3)
        check_membership_change(previous, refs, number)
        rows = observation_rows(refs, n)
        held = np.vstack([held, rows])
        asked.append((refs, rows))
        previous = AnsweredSets.of(number, refs)
        best, gain = membership, -1
        for candidate in [] if passive else _changes(membership, rng, candidates):
            nxt = _refs(candidate, n, number + 1, beacons[number + 1])
            if nxt is None:
                continue
            g = _rank(np.vstack([held, observation_rows(nxt, n)]))
            if g > gain:
                best, gain = candidate, g
        membership = best
    return asked


def run_free(
    x: NDArray[np.float64], rounds: int, rng: np.random.Generator, candidates: int
) -> list[tuple[ReferenceSets, NDArray[np.float64]]]:
    """Main's rules before this change: any disjoint sets of at least two, chosen freely."""
    n = x.shape[0]
    asked: list[tuple[ReferenceSets, NDArray[np.float64]]] = []
    held = np.zeros((0, n * (n - 1) // 2))
    for _ in range(rounds):
        best: tuple[int, ReferenceSets] | None = None
        for _ in range(candidates):
            order = rng.permutation(n).tolist()
            pairs = [tuple(sorted(order[k : k + 2])) for k in range(0, n - n % 2, 2)]
            if n % 2:
                pairs[-1] = tuple(sorted((*pairs[-1], order[-1])))
            clusters = tuple(sorted((k, p) for k, p in enumerate(pairs)))
            refs = ReferenceSets(tuple(range(n)), clusters)
            g = _rank(np.vstack([held, observation_rows(refs, n)]))
            if best is None or g > best[0]:
                best = (g, refs)
        assert best is not None
        rows = observation_rows(best[1], n)
        held = np.vstack([held, rows])
        asked.append((best[1], rows))
    return asked


def entry_noise_std(refs: ReferenceSets, mechanism: DistanceNoise | None) -> NDArray[np.float64]:
    """Std (real squared-distance units) of the DP noise on every decoded value of ``refs``.

    Every present participant adds ``N_Z(0, sigma^2)`` to every decoded integer slot
    (:mod:`crypto.dp.distance`), so a point-centre value of a set of ``m`` members carries
    ``sqrt(n) sigma / (s^2 m^2)`` and a centre-centre value ``sqrt(n) sigma / (s^2 m_a^2
    m_b^2)``. Zero without a mechanism.
    """
    n = len(refs.participants)
    sizes = [len(m) for m in refs.sets]
    weights = [float(m * m) for _ in refs.participants for m in sizes]
    for a, b in refs.cluster_pairs:
        weights.append(float(len(refs.clusters[a][1]) * len(refs.clusters[b][1])) ** 2)
    if mechanism is None:
        return np.zeros(len(weights))
    s2 = float(1 << mechanism.bits) ** 2
    return math.sqrt(n) * mechanism.share_sigma / (s2 * np.asarray(weights))


def recovery(
    x: NDArray[np.float64],
    asked: list[tuple[ReferenceSets, NDArray[np.float64]]],
    mechanism: DistanceNoise | None,
    rng: np.random.Generator,
) -> list[dict[str, float]]:
    """Rank fraction and relative error of the (noise-weighted) least-squares distance
    matrix, and the ledger's epsilon at ``DELTA`` for the releases so far, per round.

    The attacker knows every value's noise std and weights its equations by it. The noise
    is drawn Gaussian with the mechanism's std (the sum of ``n`` discrete Gaussians of
    ``sigma`` in the tens of thousands of lattice units is Gaussian to within ``1e-300``
    in distribution, :func:`crypto.dp.accounting.ddgauss_tau`).
    """
    n = x.shape[0]
    pairs = itertools.combinations(range(n), 2)
    truth = np.array([((x[k] - x[j]) ** 2).sum() for k, j in pairs])
    unknowns = truth.size
    a_rows, b_vals, out, records = [], [], [], []
    for number, (refs, rows) in enumerate(asked, start=1):
        values = _observe(x, refs)
        exact = rows @ truth
        assert np.allclose(values, exact, rtol=1e-9, atol=1e-9), "rows disagree with secpc"
        std = entry_noise_std(refs, mechanism)
        noisy = values + std * rng.standard_normal(values.shape)
        weight = 1.0 / std if mechanism is not None else np.ones_like(values)
        a_rows.append(rows * weight[:, None])
        b_vals.append(noisy * weight)
        a, b = np.vstack(a_rows), np.concatenate(b_vals)
        solution, *_ = np.linalg.lstsq(a, b, rcond=None)
        epsilon = math.inf
        if mechanism is not None:
            records.append(mechanism.record(federation_id=FED, round=number, refs=refs))
            epsilon = epsilon_spent(records, delta=DELTA, method="rdp")
        out.append(
            {
                "rank": _rank(a),
                "rank_fraction": _rank(a) / unknowns,
                "relative_error": float(np.linalg.norm(solution - truth) / np.linalg.norm(truth)),
                "epsilon": epsilon,
                "noise_std": float(np.median(std)),
            }
        )
    return out


def _mechanism(z: float, *, l2_clip: float, dim: int) -> DistanceNoise | None:
    """The federation's distance noise at ``z`` (``0``: none); 16 bits, ``m_min = 3``."""
    if z == 0:
        return None
    return DistanceNoise(
        noise_multiplier=z,
        l2_clip=l2_clip,
        bits=16,
        reduced_dim=dim,
        min_reference=3,
        min_contributors=3,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--groups", type=int, default=2, help="domains the prompts form")
    parser.add_argument("--candidates", type=int, default=12)
    parser.add_argument(
        "--distance-noise",
        type=float,
        nargs="+",
        default=[0.0, 0.5, 2.0],
        help="dp.distance_noise_multiplier values (0: no noise)",
    )
    parser.add_argument(
        "--l2-clip", type=float, default=1.0, help="dp.distance_l2_clip: prompts scaled to it"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write markdown results here")
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    lines = [
        "# Reconstruction of the pairwise-distance matrix (issue 26, item 2)",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average "
        f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}",
        f"- command: python -m bench.privacy.reconstruction {' '.join(given)}",
        "- rank: linear combinations of the n(n-1)/2 squared distances pinned down; error: "
        "relative L2 error of the attacker's noise-weighted least-squares distance vector. "
        "Prompts fixed across rounds (worst case), everybody present, scaled so the largest "
        f"has L2 norm {args.l2_clip:g} (dp.distance_l2_clip). z: dp.distance_noise_multiplier "
        "(crypto/dp/distance.py; 0 = off); noise std: median std of a decoded value (real "
        f"squared-distance units); epsilon: the privacy ledger's RDP epsilon at delta = {DELTA:g} "
        "for the distance releases so far (the rounds' aggregation releases come on top).",
        "",
        "| n | coordinator | z | rounds | rank / unknowns | relative error | noise std | epsilon |",
        "|---|---|---|---|---|---|---|---|",
    ]
    shown = sorted({1, 2, 4, 8, args.rounds} & set(range(1, args.rounds + 1)))
    for n in args.participants:
        rng = np.random.default_rng(args.seed + n)
        centres = rng.standard_normal((args.groups, args.dim)) * 2
        x = centres[np.arange(n) % args.groups] + rng.standard_normal((n, args.dim))
        x *= args.l2_clip / float(np.linalg.norm(x, axis=1).max())  # inside the clip
        unknowns = n * (n - 1) // 2
        runs = (
            ("rules, greedy", run_rules),
            ("rules, no change", lambda *a: run_rules(*a, passive=True)),
            ("free (main)", run_free),
        )
        for name, run in runs:
            asked = run(x, args.rounds, np.random.default_rng(args.seed), args.candidates)
            for z in args.distance_noise:
                mechanism = _mechanism(z, l2_clip=args.l2_clip, dim=args.dim)
                if name == "free (main)" and mechanism is not None:
                    continue  # main's old rules: shown without noise only
                per_round = recovery(x, asked, mechanism, np.random.default_rng(args.seed + 1))
                for r in shown:
                    row = per_round[r - 1]
                    eps = "-" if mechanism is None else f"{row['epsilon']:.3g}"
                    std = "0" if mechanism is None else f"{row['noise_std']:.3g}"
                    lines.append(
                        f"| {n} | {name} | {z:g} | {r} | {row['rank']} / {unknowns} "
                        f"({row['rank_fraction']:.0%}) | {row['relative_error']:.3f} | {std} "
                        f"| {eps} |"
                    )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps({"markdown": text}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

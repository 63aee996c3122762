"""The probe split test on simulated prompts: false splits and power, per group layout.

Each run draws groups of points in ``r = 128`` dimensions (unit per-coordinate spread,
group centres ``gap * sqrt(r)`` from the origin in random directions, so about
``gap * sqrt(2 r)`` apart), adds fresh jitter (0.2) every round, and runs SecPC's
clustering step (:func:`crypto.clustering.secpc_step` on plaintext distances, which the
coded path reproduces exactly) for three rounds from one cluster. Reported per layout:
the fraction of runs with a split, and with a split whose clusters have purity >= 0.9.

Layouts: one group of 6 / 8 / 10 / 16 (every split is false), two groups 4 + 4, 5 + 5,
7 + 3, and 5 + 5 / 4 + 4 / 7 + 3 with a near-identical pair of outliers (offset ``1.5``,
``3`` or ``5`` times ``sqrt(r)``, 0.01 apart) inside the first group, the case that
blocked DESIGN.md's singleton test.

Usage: ``python -m bench.clustering [--runs 150] [--threshold 0.05]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from secfpp.crypto.clustering import ClusteringConfig, Membership, secpc_step
from secfpp.crypto.secpc import plaintext_distances

__all__ = ["main", "rate"]


def _groups(rng: np.random.Generator, sizes: tuple[int, ...], gap: float, r: int) -> np.ndarray:
    centres = rng.standard_normal((len(sizes), r))
    centres *= gap * np.sqrt(r) / np.linalg.norm(centres, axis=1, keepdims=True)
    return centres[np.repeat(np.arange(len(sizes)), sizes)] + rng.standard_normal((sum(sizes), r))


def rate(
    sizes: tuple[int, ...],
    gap: float,
    *,
    runs: int,
    config: ClusteringConfig,
    pair: float = 0.0,
    rounds: int = 3,
    r: int = 128,
) -> tuple[float, float]:
    """``(fraction split, fraction split with purity >= 0.9)`` over ``runs`` seeds."""
    truth = np.repeat(np.arange(len(sizes)), sizes)
    n = len(truth)
    split = good = 0
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        x = _groups(rng, sizes, gap, r)
        if pair:
            x[0] += pair * rng.standard_normal(r)
            x[1] = x[0] + 0.01 * rng.standard_normal(r)
        membership = Membership.initial(range(n))
        for number in range(1, rounds + 1):
            refs = membership.reference_sets(
                range(n),
                min_aggregation_size=config.min_aggregation_size,
                min_reference_size=config.min_reference_size,
                salt=f"{seed}|{number}",
            )
            assert refs is not None
            noisy = x + 0.2 * rng.standard_normal(x.shape)
            result = secpc_step(
                plaintext_distances(list(noisy), refs),
                membership,
                config,
                salt=f"{seed}|{number}",
            )
            membership = result.membership
            if result.splits:
                split += 1
                purity = sum(np.bincount(truth[list(m)]).max() for _, m in membership.clusters)
                good += purity / n >= 0.9
                break
    return split / runs, good / runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.clustering", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=150)
    parser.add_argument(
        "--false-split-rate", type=float, default=ClusteringConfig().false_split_rate
    )
    args = parser.parse_args(argv)
    config = ClusteringConfig(false_split_rate=args.false_split_rate)
    started = time.monotonic()
    print(
        f"== one group (every split is false), {args.runs} runs, "
        f"false-split rate {args.false_split_rate}"
    )
    for n in (6, 8, 10, 16):
        print(f"  {n:>2} members: split in {rate((n,), 0.0, runs=args.runs, config=config)[0]:.0%}")
    print("== two groups: split / split with purity >= 0.9")
    layouts: list[tuple[str, tuple[int, ...], float]] = [
        ("4 + 4", (4, 4), 0.0),
        ("5 + 5", (5, 5), 0.0),
        ("7 + 3", (7, 3), 0.0),
        ("5 + 5, pair 1.5", (5, 5), 1.5),
        ("5 + 5, pair 3", (5, 5), 3.0),
        ("5 + 5, pair 5", (5, 5), 5.0),
        ("4 + 4, pair 3", (4, 4), 3.0),
        ("7 + 3, pair 3", (7, 3), 3.0),
    ]
    for gap in (1.0, 1.5, 2.5):
        cells = []
        for name, sizes, pair in layouts:
            s, g = rate(sizes, gap, runs=args.runs, config=config, pair=pair)
            cells.append(f"{name}: {s:.0%}/{g:.0%}")
        print(f"  gap {gap}: " + "; ".join(cells))
    print(f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

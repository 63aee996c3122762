"""How reliably SecPC parts the domains of the demo's setting, and how often it splits one.

For each seed, the demo's federation (default: 8 participants, ``two-domain``: half on
handwritten digits, half on printed letters, Dirichlet(0.5) labels inside each domain,
300 images each, 2 local epochs per round, SecPC from round 1) runs in simulation mode
(:func:`demo.simulation.simulate`: the real coordinator app and participant engines in one
process, real training on the shipped ``tiny-offline`` CLIP). It records, per round, the
published clusters' purity against the true domains and the split statistic ``W2/W1``.

* **parted**: purity >= 0.9 by round ``--by`` (default 3), and the round it first happened;
* **membership changes** per round, and how many came after the domains had parted
  (flip-flops; a stable clustering has none);
* **false splits**: the same federation size on the ``single`` setting (everybody on
  handwritten digits; ``--single DOMAIN`` for another): the fraction of seeds with more than
  one cluster after any round (``--single-seeds N`` for more seeds than ``--seeds``,
  ``--no-single`` to skip).

``--setting`` is a built-in setting or a setting text of :func:`demo.partition.resolve_setting`
(registered domains, folders or CSV files joined by ``+``: ``greek_letters+math_symbols``,
``mine=./photos+printed_letters``).

``--distance-noise z``: the federations run with distance-stage DP noise
(``dp.distance_noise_multiplier = z``; the data signal is a unit vector, so the default
``dp.distance_l2_clip`` 1 clips nothing). ``bench.clustering.signal_replay --distance-noise``
replays
the same mechanism on the data signal without training (much faster).

Usage: ``python -m bench.clustering.split_rate [--seeds 10] [--participants 8] [--rounds 3]``
(``--quick``: 1 seed, 1 round, 6 participants, 60 images: the smoke run the test suite runs).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import itertools
import json
import logging
import time
from pathlib import Path
from typing import Any

from bench.accuracy.run import _participants
from demo.partition import setting_partition
from demo.report import cluster_purity
from demo.simulation import SimulationConfig, simulate
from secfpp.federation import DEFAULT_SIGNAL, SIGNALS
from secfpp.participant.learning import configure_threads, load_backbone

__all__ = ["main", "run_setting"]


def run_setting(
    setting: str,
    *,
    seeds: list[int],
    participants: int,
    rounds: int,
    epochs: int,
    images: int,
    false_split_rate: float | None,
    alpha: float,
    backbone: Any,
    direction: bool = True,
    signal: str = DEFAULT_SIGNAL,
    distance_noise: float | None = None,
) -> list[dict[str, Any]]:
    """One simulated federation per seed; per-round purity, clusters and ``W2/W1``."""
    rows: list[dict[str, Any]] = []
    for seed in seeds:
        started = time.monotonic()
        built = setting_partition(
            setting, participants, alpha=alpha, seed=seed, images_per_participant=images
        )
        data = _participants(built.parts, backbone, per_participant=images, seed=seed)
        domains = {d.name: d.group for d in data}
        config = SimulationConfig(
            strategy="secfpp",
            rounds=rounds,
            epochs=epochs,
            warmup_rounds=0,
            min_aggregation_size=3,
            max_clusters=4,
            init_seed=seed,
            clustering={} if false_split_rate is None else {"false_split_rate": false_split_rate},
            reduce_direction=direction,
            signal=signal,
            dp={} if distance_noise is None else {"distance_noise_multiplier": distance_noise},
        )
        result = simulate(data, backbone, config, seed=seed)
        purity = [cluster_purity(r.clusters, domains) for r in result.rounds]  # type: ignore[arg-type]  # names, not ints: cluster_purity only compares keys
        sets = [sorted(sorted(c) for c in r.clusters) for r in result.rounds]
        changes = [int(a != b) for a, b in itertools.pairwise(sets)]
        after_parted = [
            c
            for number, c in zip(range(2, len(sets) + 1), changes, strict=True)
            if any(p >= 0.9 for p in purity[: number - 1])
        ]
        parted_at = next(
            (r.number for r, p in zip(result.rounds, purity, strict=True) if p >= 0.9), None
        )
        rows.append(
            {
                "setting": setting,
                "seed": seed,
                "purity": purity,
                "clusters": [len(r.clusters) for r in result.rounds],
                "split_ratios": [r.split_ratios for r in result.rounds],
                "parted_at": parted_at,
                "membership_changes": changes,
                "changes_after_parted": sum(after_parted),
                "stages": [r.stage for r in result.rounds],
                "seconds": round(time.monotonic() - started, 1),
            }
        )
        print(
            f"  {setting:>10} seed {seed}: clusters {rows[-1]['clusters']}, purity "
            + " ".join(f"{p:.2f}" for p in purity)
            + ", W2/W1 "
            + " ".join(
                "/".join(f"{v:.3f}" for v in r.values()) or "-" for r in rows[-1]["split_ratios"]
            )
            + f" ({rows[-1]['seconds']:.0f} s)",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.clustering.split_rate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--participants", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--by", type=int, default=3, help="parted by this round counts")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument(
        "--setting",
        default="two-domain",
        help="a built-in setting or domain texts joined by '+' (names, NAME=FOLDER, NAME=FILE.csv)",
    )
    parser.add_argument(
        "--single", default="single", help="the one-domain setting of the false-split run"
    )
    parser.add_argument(
        "--false-split-rate", type=float, default=None, help="default: the federation default"
    )
    parser.add_argument("--signal", choices=SIGNALS, default=DEFAULT_SIGNAL)
    parser.add_argument("--alpha", type=float, default=0.5, help="Dirichlet label skew")
    parser.add_argument(
        "--no-direction", action="store_true", help="cluster x_i = reduce(P_i) itself"
    )
    parser.add_argument(
        "--single-seeds", type=int, default=None, help="seeds of the single run (default --seeds)"
    )
    parser.add_argument("--no-single", action="store_true", help="skip the false-split run")
    parser.add_argument(
        "--distance-noise",
        type=float,
        default=None,
        help="dp.distance_noise_multiplier: distance-stage DP noise (crypto/dp/distance.py)",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/split_rate.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.rounds, args.by, args.images, args.participants = 1, 1, 1, 60, 6
    from demo.partition import resolve_setting

    try:
        single_spec = resolve_setting(args.single)
        resolve_setting(args.setting)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    if len(single_spec.domains) != 1:
        raise SystemExit(f"--single must name one domain, not {args.single!r}")
    logging.basicConfig(level=logging.WARNING)
    configure_threads(1)
    from secfpp.participant.backbones import tiny_offline_checkpoint_path

    backbone = load_backbone("tiny-offline", tiny_offline_checkpoint_path(), device="auto")
    seeds = list(range(args.seeds))
    common = dict(
        seeds=seeds,
        participants=args.participants,
        rounds=args.rounds,
        epochs=args.epochs,
        images=args.images,
        false_split_rate=args.false_split_rate,
        alpha=args.alpha,
        backbone=backbone,
        direction=not args.no_direction,
        signal=args.signal,
        distance_noise=args.distance_noise,
    )
    started = time.monotonic()
    print(f"== {args.setting}: {args.participants} participants, {args.seeds} seeds")
    multi = run_setting(args.setting, **common)
    n_single = args.seeds if args.single_seeds is None else args.single_seeds
    if not args.no_single:
        print(
            f"== {args.single}: {args.participants} participants, {n_single} seeds (false splits)"
        )
    single_common = {**common, "seeds": list(range(n_single))}
    single = [] if args.no_single else run_setting(args.single, **single_common)
    parted = [r for r in multi if r["parted_at"] is not None and r["parted_at"] <= args.by]
    false = [r for r in single if max(r["clusters"]) > 1]
    summary = {
        "setting": args.setting,
        "single_setting": args.single,
        "participants": args.participants,
        "seeds": args.seeds,
        "rounds": args.rounds,
        "by_round": args.by,
        "parted": len(parted),
        "parted_rounds": [r["parted_at"] for r in multi],
        "false_splits": len(false),
        "single_seeds": len(single),
        "changes_after_parted": sum(r["changes_after_parted"] for r in multi),
        "false_split_rate": args.false_split_rate,
        "alpha": args.alpha,
        "direction": not args.no_direction,
        "signal": args.signal,
        "distance_noise": args.distance_noise,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(
        f"\nparted (purity >= 0.9 by round {args.by}): {len(parted)} of {args.seeds} seeds; "
        f"first round with purity >= 0.9 per seed: {summary['parted_rounds']}"
    )
    print(
        "membership changes after the domains parted (flip-flops): "
        f"{summary['changes_after_parted']} in {len(multi)} runs"
    )
    if single:
        print(
            f"false splits on the single-domain federation: {len(false)} of {len(single)} "
            f"({100 * len(false) / len(single):.0f}%)"
        )
    print(f"{summary['seconds']:.0f} s in all")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "runs": multi + single}, indent=1))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

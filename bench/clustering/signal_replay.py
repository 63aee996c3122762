"""SecPC's clustering step replayed on the data signal of the benchmark settings (plaintext).

For each setting, Dirichlet ``alpha``, federation size and seed, the participants of
:func:`demo.partition.setting_partition` get their data signal ``x_i``
(:func:`participant.learning.reduction.data_signal`: the unit direction of the JL-reduced
mean of their per-class mean frozen image embeddings, what they share with
``reduction.signal = "data-balanced"``, or with ``--signal data`` the plain mean),
and :func:`crypto.clustering.secpc_step` runs ``--rounds`` rounds on plaintext distances
(which the coded path reproduces exactly) from one cluster, with the coordinator's calibrated
split rule (``--false-split-rate``, default: the federation's; ``--null-draws``). No
training is involved: the data signal does not depend on the prompts. Reported per case:

* single-domain federations: how many ever split (false splits);
* multi-domain federations: the first round after which every true domain has its own
  cluster (purity 1 with as many clusters as domains, or ``-``), and the membership changes
  after that round (flip-flops).

Usage: ``python -m bench.clustering.signal_replay [--seeds 20] [--rounds 6] [--alphas 0.5 5]
[--sizes 8 10]`` (``--quick``: 2 seeds, 3 rounds, alpha 0.5, 10 participants, 60 images).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.clustering import ClusteringConfig, Membership, secpc_step
from secfpp.crypto.dp.distance import DistanceNoise
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import Distances, centres_from_points, plaintext_distances
from secfpp.federation import DATA_SIGNALS, DEFAULT_SIGNAL

if TYPE_CHECKING:
    from demo.partition import DomainLoader

__all__ = ["case_signals", "federation_config", "main", "replay"]

SETTINGS = ("single", "two-domain", "unequal", "three-domain")  # the default settings


def replay(
    x: NDArray[np.float64],
    domains: Sequence[str],
    config: ClusteringConfig,
    *,
    rounds: int,
    noise: DistanceNoise | None = None,
    seed: int = 0,
    salt: str = "replay",
) -> list[list[tuple[int, ...]]]:
    """The clusters after each of ``rounds`` clustering steps on the rows of ``x`` (one
    participant each), from one cluster; probes (and the split rule's null draws) are drawn
    with the public per-round salt ``f"{salt}|{round}"`` (a beacon of its own per seed: pass
    a ``salt`` that names the seed).

    With ``noise`` (distance-stage DP, :mod:`crypto.dp.distance`) the step sees what the
    coordinator decodes then: ``D`` plus every participant's discrete Gaussian share
    (scaled as decoding scales), clamped at 0, and ``E`` derived from it
    (:func:`crypto.secpc.centres_from_points`); the shares come from
    ``DeterministicRandom(seed)``."""
    rng = DeterministicRandom(f"replay-noise|{seed}")
    n = x.shape[0]
    membership = Membership.initial(range(n))
    history: list[list[tuple[int, ...]]] = []
    for number in range(1, rounds + 1):
        refs = membership.reference_sets(
            range(n),
            min_aggregation_size=config.min_aggregation_size,
            min_reference_size=config.min_reference_size,
            salt=f"{salt}|{number}",
        )
        if refs is None:
            raise ValueError(f"{n} participants are too few for reference sets")
        distances = plaintext_distances(list(x), refs)
        if noise is not None:
            point = np.maximum(distances.point + noise.point_noise(refs, rng=rng), 0.0)
            distances = Distances(refs, point, centres_from_points(refs, point))
        membership = secpc_step(distances, membership, config, salt=f"{salt}|{number}").membership
        history.append(sorted(tuple(sorted(m)) for _, m in membership.clusters))
    return history


def _parted(clusters: list[tuple[int, ...]], domains: Sequence[str]) -> bool:
    """Every true domain has a cluster of its own (and no cluster mixes domains)."""
    return len(clusters) == len(set(domains)) and all(
        len({domains[i] for i in c}) == 1 for c in clusters
    )


def _case(history: list[list[tuple[int, ...]]], domains: Sequence[str]) -> dict[str, Any]:
    if len(set(domains)) == 1:
        return {"false_split": any(len(c) > 1 for c in history)}
    first = next((k + 1 for k, c in enumerate(history) if _parted(c, domains)), None)
    changes = 0
    if first is not None:
        changes = sum(a != b for a, b in zip(history[first - 1 :], history[first:], strict=False))
    return {"parted_round": first, "changes_after": changes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.clustering.signal_replay", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--settings",
        nargs="+",
        default=list(SETTINGS),
        help="built-in settings or domain texts joined by '+' (registered names, NAME=FOLDER, "
        "NAME=FILE.csv; '@SHARE' for unequal groups); one domain: false splits",
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.5, 5.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 10])
    parser.add_argument("--images", type=int, default=300, help="images per participant")
    parser.add_argument("--false-split-rate", type=float, default=None)
    parser.add_argument("--null-draws", type=int, default=None)
    parser.add_argument(
        "--signals",
        type=Path,
        default=None,
        help="an .npz cache of the data signals: read when it holds a case, written after",
    )
    parser.add_argument(
        "--distance-noise",
        type=float,
        nargs="+",
        default=[0.0],
        help="dp.distance_noise_multiplier values to replay (0: none); each case's data "
        "signals are the same for every value",
    )
    parser.add_argument(
        "--signal",
        choices=DATA_SIGNALS,
        default=DEFAULT_SIGNAL,
        help="the data signal replayed (reduction.signal; default: a new federation's)",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/signal_replay.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.rounds, args.alphas, args.sizes, args.images = 2, 3, [0.5], [10], 60
    from demo.partition import resolve_setting
    from secfpp.participant.backbones import register_offline_models, tiny_offline_checkpoint_path
    from secfpp.participant.learning import configure_threads, load_backbone

    try:
        specs = {setting: resolve_setting(setting) for setting in args.settings}
    except ValueError as exc:
        raise SystemExit(f"--settings: {exc}") from None
    config = federation_config(args.false_split_rate, args.null_draws)
    configure_threads(1)
    register_offline_models()
    backbone = load_backbone("tiny-offline", tiny_offline_checkpoint_path(), device="auto")
    print(
        f"== data signal, false_split_rate {config.false_split_rate}, null_draws "
        f"{config.null_draws}, {args.rounds} rounds, {args.seeds} seeds"
    )
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    cache: dict[str, NDArray[Any]] = {}
    if args.signals is not None and args.signals.exists():
        with np.load(args.signals) as stored:
            cache = {k: stored[k] for k in stored.files}
    for setting in args.settings:
        for alpha in args.alphas:
            for size in args.sizes:
                signals = case_signals(
                    setting,
                    alpha,
                    size,
                    range(args.seeds),
                    images=args.images,
                    backbone=backbone,
                    cache=cache,
                    signal=args.signal,
                )
                for z in args.distance_noise:
                    noise = _noise(size, z)
                    cases = [
                        _case(
                            replay(x, domains, config, rounds=args.rounds, noise=noise, seed=s),
                            domains,
                        )
                        for s, (x, domains) in enumerate(signals)
                    ]
                    single = len(specs[setting].domains) == 1
                    rows.append(_row(setting, alpha, size, z, cases, single=single))
    print(f"{time.monotonic() - started:.0f} s")
    if args.signals is not None:
        args.signals.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.signals, **cache)  # type: ignore[arg-type]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rules = {
        "false_split_rate": config.false_split_rate,
        "null_draws": config.null_draws,
        "signal": args.signal,
    }
    args.out.write_text(json.dumps({"rules": rules, "rows": rows}, indent=1))
    print(f"written: {args.out}")
    return 0


def federation_config(
    false_split_rate: float | None = None, null_draws: int | None = None
) -> ClusteringConfig:
    """The clustering step's factors in a federation created with the defaults (and these two
    split-rule settings when given): ``min_aggregation_size`` and ``min_reference_size`` 3."""
    from secfpp.federation import ClusteringPolicy

    chosen = {
        k: v
        for k, v in (("false_split_rate", false_split_rate), ("null_draws", null_draws))
        if v is not None
    }
    policy = ClusteringPolicy.model_validate(chosen)
    return ClusteringConfig(
        false_split_rate=policy.false_split_rate,
        null_draws=policy.null_draws,
        min_aggregation_size=3,
        min_reference_size=3,
    )


def case_signals(
    setting: str,
    alpha: float,
    size: int,
    seeds: Iterable[int],
    *,
    images: int,
    backbone: Any,
    cache: dict[str, NDArray[Any]],
    load: DomainLoader | None = None,
    signal: str = DEFAULT_SIGNAL,
) -> list[tuple[NDArray[np.float64], list[str]]]:
    """Per seed, the data signals ``x`` (one row per participant) of ``setting`` with ``size``
    participants at Dirichlet ``alpha`` and ``images`` images each, and every participant's
    true domain; computed once and kept in ``cache`` (keys
    ``signal|setting|alpha|size|seed|images`` and the same with ``|domains``, what
    ``--signals`` stores). ``signal``: ``data-balanced`` (the default) or ``data``
    (:func:`participant.learning.reduction.data_signal`). ``load``: the domain loader of
    :func:`demo.partition.setting_partition` (default: render or read it each time)."""
    from bench.accuracy.run import _participants
    from demo.partition import load_train_domain, setting_partition
    from secfpp.participant.learning.reduction import signal_of_data

    out = []
    for seed in seeds:
        key = f"{signal}|{setting}|{alpha}|{size}|{seed}|{images}"
        if key not in cache:
            built = setting_partition(
                setting,
                size,
                alpha=alpha,
                seed=seed,
                images_per_participant=images,
                load=load or load_train_domain,
            )
            data = _participants(built.parts, backbone, per_participant=images, seed=seed)
            cache[key] = np.stack(
                [signal_of_data(signal, d.train.features, d.train.labels, 128, seed) for d in data]
            )
            cache[f"{key}|domains"] = np.array([d.group for d in data])
        out.append((cache[key], [str(d) for d in cache[f"{key}|domains"]]))
    return out


def _noise(size: int, z: float) -> DistanceNoise | None:
    """The distance noise of a ``size``-member federation created with
    ``dp.distance_noise_multiplier = z`` (defaults otherwise; its clustering bits)."""
    if z == 0:
        return None
    from secfpp.federation import FederationCreate

    create = FederationCreate(
        name="replay", n_participants=size, dp={"distance_noise_multiplier": z}
    )
    config = create.resolve()
    return DistanceNoise.for_params(
        config.crypto_params(), noise_multiplier=z, l2_clip=config.dp.distance_l2_clip
    )


def _row(
    setting: str,
    alpha: float,
    size: int,
    z: float,
    cases: list[dict[str, Any]],
    *,
    single: bool,
) -> dict[str, Any]:
    """One row of the report; ``single``: the setting has one domain (count false splits)."""
    row: dict[str, Any] = {
        "setting": setting,
        "alpha": alpha,
        "participants": size,
        "distance_noise": z,
    }
    if single:
        row["false_splits"] = sum(c["false_split"] for c in cases)
        text = f"false splits {row['false_splits']} of {len(cases)}"
    else:
        found = [c["parted_round"] for c in cases]
        row["parted"] = sum(r is not None for r in found)
        row["parted_rounds"] = found
        row["changes_after"] = sum(c["changes_after"] for c in cases)
        text = (
            f"parted {row['parted']} of {len(cases)}, rounds "
            f"{', '.join('-' if r is None else str(r) for r in found)}; "
            f"membership changes afterwards {row['changes_after']}"
        )
    row["seeds"] = len(cases)
    print(f"{setting:>12} alpha {alpha:<4} n {size:>2} z {z:g}: {text}", flush=True)
    return row


if __name__ == "__main__":
    raise SystemExit(main())

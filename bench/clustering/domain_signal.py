"""How much of the prompts' spread lies between the true domains: can any clustering find them?

A plaintext diagnostic (it sees every participant's ``x_i``, which the coordinator never
does): the federation of a named setting (:mod:`demo.partition`) trains as one cluster
(PromptFL-style rounds, the global prompt ``G`` moves by the mean update), and after each
round it takes the vectors SecPC would cluster, ``x_i`` = the unit direction of
``reduce(P_i) - reduce(G)`` (``r = 128``, :class:`participant.trainer.PromptTrainer`), and
computes for a partition ``Q`` of the ``n`` participants the between-part fraction

``beta(Q) = sum_q |Q_q| |mean_q - mean|^2 / sum_i |x_i - mean|^2``

(the full-dimensional two-means statistic SecPC's split test estimates from distances,
:func:`crypto.split_test.probe_between_fraction`). It prints ``beta`` of the true-domain
partition and the largest ``beta`` over all two-part partitions with parts of at least
``--min-part`` members (exhaustive: ``n <= 12``), and whether that best partition is the
true one. When the domain partition is not the best one, even exact plaintext two-means
with every prompt in view would not part the domains: no split rule on distances can.

Usage: ``python -m bench.clustering.domain_signal [--setting two-domain] [--alpha 0.5] [--seeds 3]
[--rounds 3] [--participants 8]`` (``--quick``: one seed, one round, 6 participants).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["best_partition", "between_fraction", "main"]


def between_fraction(x: NDArray[np.float64], labels: Sequence[object]) -> float:
    """``beta(Q)`` (module doc) of the partition given by ``labels``; ``x`` is ``(n, r)``.
    0 when every row is equal."""
    centred = x - x.mean(axis=0)
    total = float((centred**2).sum())
    if not total > 0:
        return 0.0
    tags = np.asarray([str(t) for t in labels])
    between = 0.0
    for tag in sorted(set(tags.tolist())):
        part = centred[tags == tag]
        between += part.shape[0] * float((part.mean(axis=0) ** 2).sum())
    return between / total


def best_partition(x: NDArray[np.float64], min_part: int) -> tuple[float, tuple[int, ...]]:
    """The two-part partition of the rows of ``x`` (parts of at least ``min_part``) with the
    largest ``beta``: ``(beta, members of the smaller part)``; ties to the first found."""
    n = x.shape[0]
    if n > 12:
        raise ValueError(f"exhaustive search is for n <= 12 rows, not {n}")
    if n < 2 * min_part:
        raise ValueError(f"{n} rows cannot make two parts of {min_part}")
    best: tuple[float, tuple[int, ...]] = (-1.0, ())
    for size in range(min_part, n // 2 + 1):
        for part in itertools.combinations(range(n), size):
            chosen = set(part)
            value = between_fraction(x, [i in chosen for i in range(n)])
            if value > best[0]:
                best = (value, part)
    return best


def _run(args: argparse.Namespace, seed: int, backbone: Any) -> list[dict[str, Any]]:
    from bench.accuracy.run import _participants
    from demo.partition import setting_partition
    from demo.simulation import SimulationConfig, _trainer
    from secfpp.crypto.rng import SystemRandom

    built = setting_partition(
        args.setting,
        args.participants,
        alpha=args.alpha,
        seed=seed,
        images_per_participant=args.images,
    )
    data = _participants(built.parts, backbone, per_participant=args.images, seed=seed)
    settings = {"ctx_init": args.ctx_init} if args.ctx_init else {}
    config = SimulationConfig(lr=args.lr, epochs=args.epochs, strategy_settings=settings)
    trainers = [
        _trainer(d, backbone, config, SystemRandom(), seed * 1000 + k) for k, d in enumerate(data)
    ]
    domains = [d.group for d in data]
    truth = {i for i, g in enumerate(domains) if g == domains[0]}
    rng = np.random.default_rng(seed)
    width = backbone.text.width
    g = rng.normal(0.0, 0.02, size=(config.n_ctx * width,))
    rows = []
    for number in range(1, args.rounds + 1):
        outs = [t.train(number, g.reshape(config.n_ctx, width)) for t in trainers]
        x = np.stack([np.asarray(o.reduced, dtype=np.float64) for o in outs])
        best, part = best_partition(x, args.min_part)
        is_domain = set(part) in (truth, set(range(len(data))) - truth)
        rows.append(
            {
                "seed": seed,
                "round": number,
                "beta_domains": round(between_fraction(x, domains), 4),
                "beta_best": round(best, 4),
                "best_is_domains": is_domain,
                "best_part": list(part),
            }
        )
        print(
            f"  seed {seed} round {number}: beta(domains) {rows[-1]['beta_domains']:.3f}, "
            f"best partition {rows[-1]['beta_best']:.3f} "
            f"({'the domains' if is_domain else 'not the domains: ' + str(list(part))})",
            flush=True,
        )
        updates = [np.asarray(o.update, dtype=np.float64).reshape(-1) for o in outs]
        g = g + np.mean(updates, axis=0)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.clustering.domain_signal", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--setting", default="two-domain")
    parser.add_argument("--alpha", type=float, default=0.5, help="Dirichlet label skew")
    parser.add_argument("--participants", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--ctx-init", default="a photo of a", help="'' for random context")
    parser.add_argument("--min-part", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/domain_signal.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.rounds, args.participants, args.images = 1, 1, 6, 60
    from secfpp.participant.backbones import register_offline_models, tiny_offline_checkpoint_path
    from secfpp.participant.learning import configure_threads, load_backbone

    configure_threads(1)
    register_offline_models()
    backbone = load_backbone("tiny-offline", tiny_offline_checkpoint_path(), device="auto")
    print(f"== {args.setting}, alpha {args.alpha}, {args.participants} participants, lr {args.lr}")
    rows = [row for seed in range(args.seeds) for row in _run(args, seed, backbone)]
    found = sum(r["best_is_domains"] for r in rows)
    mean_dom = float(np.mean([r["beta_domains"] for r in rows]))
    mean_best = float(np.mean([r["beta_best"] for r in rows]))
    print(
        f"\nbest two-part partition is the domains in {found} of {len(rows)} (seed, round); "
        f"mean beta(domains) {mean_dom:.3f}, mean best {mean_best:.3f}"
    )
    summary = {
        "setting": args.setting,
        "alpha": args.alpha,
        "participants": args.participants,
        "lr": args.lr,
        "ctx_init": args.ctx_init or None,
        "found": found,
        "cases": len(rows),
        "mean_beta_domains": round(mean_dom, 4),
        "mean_beta_best": round(mean_best, 4),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

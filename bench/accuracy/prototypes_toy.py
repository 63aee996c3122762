"""IGPP against VPDR on a small synthetic federation (docs/strategies.md, "Measured").

Six participants of the ``tiny-test`` backbone's width share class prototypes through the real
coordinator and secure aggregation (:func:`demo.simulation.simulate`). The data are synthetic
features: ``n_classes`` class centres that differ only in the first ``informative`` dimensions
(standard normal there, zero elsewhere), plus isotropic noise of std ``noise``, then
L2-normalized; 30 training and 30 held-out examples per participant. Classification uses the
prototype logits only (``mix_weight = 1``), so what is measured is the prototypes' quality after
the local-DP release at each epsilon.

Usage: ``python -m bench.accuracy.prototypes_toy [--epsilons 1 4 16 2000] [--seeds 0 1] [--rounds
5]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import time

import numpy as np
import torch

from demo.simulation import ParticipantData, SimulationConfig, simulate
from secfpp.participant.backbones import register_offline_models
from secfpp.participant.learning import Backbone, FeatureSet, configure_threads, load_backbone

__all__ = ["main", "participants"]

N_PARTICIPANTS = 6
N_CLASSES = 10
PER_SPLIT = 30


def participants(
    seed: int, *, dim: int, informative: int = 6, noise: float = 0.6
) -> list[ParticipantData]:
    """The synthetic federation of ``seed``: ``N_PARTICIPANTS`` participants, ``2 * PER_SPLIT``
    unit feature vectors each (``(60, dim)`` float32), labels uniform over ``N_CLASSES``."""
    rng = np.random.default_rng(seed)
    names = tuple(f"c{i}" for i in range(N_CLASSES))
    centres = np.zeros((N_CLASSES, dim))
    centres[:, :informative] = rng.normal(0.0, 1.0, (N_CLASSES, informative))
    out = []
    for i in range(N_PARTICIPANTS):
        y = rng.integers(0, N_CLASSES, 2 * PER_SPLIT)
        x = centres[y] + rng.normal(0.0, noise, (2 * PER_SPLIT, dim))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        f = torch.tensor(x, dtype=torch.float32)
        labels = torch.tensor(y)
        train = FeatureSet(f[:PER_SPLIT], labels[:PER_SPLIT], names, f"toy{seed}-train{i}")
        test = FeatureSet(f[PER_SPLIT:], labels[PER_SPLIT:], names, f"toy{seed}-test{i}")
        out.append(ParticipantData(f"p{i}", train, test, names))
    return out


def run(
    strategy: str, epsilon: float, seeds: list[int], rounds: int, backbone: Backbone
) -> list[float]:
    """Mean final held-out accuracy over participants, one value per seed."""
    accs = []
    for seed in seeds:
        config = SimulationConfig(
            strategy=strategy,
            rounds=rounds,
            epochs=2,
            n_ctx=2,
            lr=0.01,
            min_aggregation_size=2,
            prototypes={"epsilon": epsilon, "mix_weight": 1.0},
        )
        result = simulate(
            participants(seed, dim=backbone.embed_dim),
            backbone,
            config,
            seed=seed,
            deterministic=True,
        )
        accs.append(float(np.mean(list(result.final_accuracy().values()))))
    return accs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0, 16.0, 2000.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    register_offline_models()
    configure_threads(1)
    backbone = load_backbone(
        "tiny-test", None, device="cpu", init_seed=0, allow_random_weights=True
    )
    print("| epsilon | IGPP | VPDR |\n|---|---|---|")
    for eps in args.epsilons:
        started = time.monotonic()
        row = [
            float(np.mean(run(name, eps, args.seeds, args.rounds, backbone)))
            for name in ("protopfl-igpp", "protopfl-vpdr")
        ]
        print(
            f"| {eps:g} | {row[0]:.3f} | {row[1]:.3f} |  ({time.monotonic() - started:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()

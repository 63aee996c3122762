"""Accuracy benchmark: the shape of the SecFPP paper's comparison (seed 004, Tables 1-2).

On a single-domain split (handwritten digits) and a multi-domain split (handwritten +
printed digits), ``N`` participants with Dirichlet(``alpha``) label skew, the same rounds
and local epochs for every method, this prints the mean per-participant held-out accuracy
(mean and standard deviation over seeds) of:

* ``zero-shot``: CLIP's hand-written prompt, nothing learned;
* ``local``: each participant learns its prompt alone;
* ``promptfl``: one global prompt, securely aggregated over everybody;
* ``dpfpl``: global + low-rank/residual local prompt, without noise and at
  ``epsilon`` in {0.4, 0.1} (LDP on the local low-rank gradients, GDP on the aggregated
  global update, each calibrated with dp-accounting to the target epsilon, delta 1e-5);
* ``secfpp``: clustered global prompts (SecPC) + local prompts, no noise; its final
  clusters are recorded as each member's true domain (``clusters`` column).

Every federated method runs through :func:`demo.simulation.simulate`: the real
coordinator app and participant engines, in one process. Results go to a table on
stdout and to ``--out`` as CSV and PNG.

Usage: ``python -m bench.accuracy [--seeds 3] [--rounds 8] [--quick]``
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

from crypto.dp import calibrate_noise_multiplier
from demo.partition import Domain, Part, multi_domain_partition, single_domain_partition
from demo.simulation import ParticipantData, SimulationConfig, simulate
from participant.learning import Backbone, FeatureSet, configure_threads, load_backbone

__all__ = ["main"]

DELTA = 1e-5
TEMPLATE = "a photo of the digit {}."
METHODS = ("zero-shot", "local", "promptfl", "dpfpl", "dpfpl eps=0.4", "dpfpl eps=0.1", "secfpp")


def _domain(name: str, seed: int) -> Domain:
    from participant.data.synthetic import handwritten_digits, printed_digits

    loader = handwritten_digits if name == "handwritten" else printed_digits
    data = loader("train", seed=seed)
    return Domain(name, data.images, data.labels.astype(np.int64), data.class_names)


def _participants(
    parts: Sequence[Part], backbone: Backbone, *, per_participant: int, seed: int
) -> list[ParticipantData]:
    """Features of each part (capped), split 80/20 into train and held-out test."""
    from participant.backbones.zeroshot import encode_images, images_to_tensor

    out = []
    rng = np.random.default_rng(seed)
    for part in parts:
        idx = part.indices
        if len(idx) > per_participant:
            idx = np.sort(rng.choice(idx, size=per_participant, replace=False))
        order = rng.permutation(len(idx))
        cut = round(0.8 * len(idx))
        pixels = images_to_tensor(part.domain.images[idx], backbone.preprocess)
        feats = encode_images(backbone.model, pixels.to(backbone.device)).float().cpu()
        labels = torch.as_tensor(part.domain.labels[idx], dtype=torch.long)
        names = tuple(part.domain.classnames)
        sets = [
            FeatureSet(feats[sel], labels[sel], names, f"bench-{part.participant}-{k}")
            for k, sel in enumerate((order[:cut], order[cut:]))
        ]
        out.append(
            ParticipantData(f"p{part.participant}", sets[0], sets[1], names, part.domain.name)
        )
    return out


def _template_accuracy(data: ParticipantData, backbone: Backbone) -> float:
    from participant.backbones.zeroshot import class_text_features

    text = class_text_features(backbone.model, backbone.tokenizer, data.classnames, [TEMPLATE])
    predicted = (data.test.features.to(backbone.device) @ text.T).argmax(dim=1).cpu()
    return float((predicted == data.test.labels).float().mean())


def _config(
    method: str, base: SimulationConfig, *, steps_per_round: int, sampling_rate: float
) -> SimulationConfig:
    if method in ("local", "promptfl", "secfpp"):
        return replace(base, strategy=method)
    dp = {"rank": 2, "clip_norm": 1.0, "update_clip_norm": 1.0}
    ldp = {"ldp_rank": dp["rank"], "ldp_clip_norm": dp["clip_norm"]}
    if method == "dpfpl":
        return replace(
            base,
            strategy="dpfpl",
            l2_clip=1.0,
            strategy_settings={**dp, "noise_multiplier": 0.0, "global_noise_multiplier": 0.0},
            dp={"mechanism": "none", **ldp, "ldp_noise_multiplier": 0.0},
        )
    epsilon = float(method.split("=")[1])
    z_global = calibrate_noise_multiplier(epsilon=epsilon, delta=DELTA, rounds=base.rounds)
    # Two noised releases (grad u, grad v) per local step, Poisson-subsampled minibatches.
    z_local = calibrate_noise_multiplier(
        epsilon=epsilon,
        delta=DELTA,
        rounds=2 * steps_per_round * base.rounds,
        sampling_rate=sampling_rate,
    )
    return replace(
        base,
        strategy="dpfpl",
        l2_clip=1.0,
        strategy_settings={**dp, "noise_multiplier": z_local, "global_noise_multiplier": z_global},
        dp={
            "mechanism": "gaussian",
            "noise_multiplier": z_global,
            "delta": DELTA,
            **ldp,
            "ldp_noise_multiplier": z_local,
        },
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--participants", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--per-participant", type=int, default=300)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-accuracy"))
    parser.add_argument("--quick", action="store_true", help="2 rounds, 1 seed (smoke run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seeds = 2, 1
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("absl").setLevel(logging.ERROR)  # RDP order warnings are harmless
    configure_threads(1)
    from participant.backbones import register_offline_models, tiny_offline_checkpoint_path

    register_offline_models()
    backbone = load_backbone("tiny-offline", tiny_offline_checkpoint_path(), device="auto")
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    started = time.monotonic()
    for split in ("single-domain", "multi-domain"):
        for seed in range(args.seeds):
            if split == "single-domain":
                parts = single_domain_partition(
                    _domain("handwritten", seed), args.participants, alpha=args.alpha, seed=seed
                )
            else:
                parts = multi_domain_partition(
                    [_domain("handwritten", seed), _domain("printed", seed)],
                    args.participants,
                    alpha=args.alpha,
                    seed=seed,
                )
            data = _participants(parts, backbone, per_participant=args.per_participant, seed=seed)
            n_train = min(len(d.train.labels) for d in data)
            base = SimulationConfig(
                rounds=args.rounds,
                epochs=args.epochs,
                warmup_rounds=1,
                init_seed=seed,
                n_ctx=4,
                min_aggregation_size=2,
            )
            steps = args.epochs * math.ceil(n_train / base.batch_size)
            for method in args.methods:
                t0 = time.monotonic()
                clusters = ""
                if method == "zero-shot":
                    accs = [_template_accuracy(d, backbone) for d in data]
                else:
                    config = _config(
                        method,
                        base,
                        steps_per_round=steps,
                        sampling_rate=min(1.0, base.batch_size / n_train),
                    )
                    result = simulate(data, backbone, config, seed=seed, deterministic=True)
                    accs = list(result.final_accuracy().values())
                    if method == "secfpp" and result.rounds:
                        clusters = _clusters_by_group(result.rounds[-1].clusters, data)
                row = {
                    "split": split,
                    "seed": seed,
                    "method": method,
                    "mean_accuracy": float(np.mean(accs)),
                    "seconds": time.monotonic() - t0,
                    "clusters": clusters,
                }
                rows.append(row)
                print(
                    f"{split:>13} seed {seed} {method:>14}: {row['mean_accuracy']:.3f} "
                    f"({row['seconds']:.0f} s){'  clusters ' + clusters if clusters else ''}",
                    flush=True,
                )
    _write(rows, args.out, args.methods)
    print(f"total {time.monotonic() - started:.0f} s; CSV and PNG in {args.out}")
    return 0


def _clusters_by_group(clusters: Sequence[Sequence[str]], data: Sequence[ParticipantData]) -> str:
    """Final clusters as each member's true group, e.g. ``hhhhh|ppppp`` (h: handwritten)."""
    group = {d.name: d.group[:1] for d in data}
    return "|".join("".join(sorted(group[m] for m in members)) for members in clusters)


def _write(rows: list[dict[str, object]], out: Path, methods: Sequence[str]) -> None:
    with (out / "runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = []
    print(f"\n{'method':>14} {'single-domain':>16} {'multi-domain':>16}")
    for method in methods:
        cells = []
        entry: dict[str, object] = {"method": method}
        for split in ("single-domain", "multi-domain"):
            values = [
                float(r["mean_accuracy"])
                for r in rows  # type: ignore[arg-type]
                if r["method"] == method and r["split"] == split
            ]
            mean, std = float(np.mean(values)), float(np.std(values))
            entry[f"{split} mean"], entry[f"{split} std"] = mean, std
            cells.append(f"{mean:.3f} ± {std:.3f}")
        summary.append(entry)
        print(f"{method:>14} {cells[0]:>16} {cells[1]:>16}")
    with (out / "summary.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    x = np.arange(len(methods))
    for k, split in enumerate(("single-domain", "multi-domain")):
        means = [float(e[f"{split} mean"]) for e in summary]  # type: ignore[arg-type]
        stds = [float(e[f"{split} std"]) for e in summary]  # type: ignore[arg-type]
        ax.bar(x + (k - 0.5) * 0.38, means, 0.38, yerr=stds, capsize=3, label=split)
    ax.set_xticks(x, list(methods), rotation=20)
    ax.set_ylabel("mean held-out accuracy")
    ax.set_ylim(0, 1)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())

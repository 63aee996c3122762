"""Accuracy benchmark: the shape of the SecFPP paper's comparison (seed 004, Tables 1-2).

On the named settings of :data:`demo.partition.SETTINGS` (``single``: handwritten digits;
``two-domain``: handwritten digits | printed letters; ``three-domain``: + Fashion-MNIST
clothing; ``unequal``: digits 7 : letters 3) or any setting text of
:func:`demo.partition.resolve_setting` (registered domains, folders or CSV files joined by ``+``,
e.g. ``greek_letters+math_symbols`` or ``mine=./photos+fashion``), each domain a different task
with its own class names, ``N`` participants with Dirichlet(``alpha``) label skew inside each
domain, on average ``--images`` training and ``--test-images`` held-out images each (the
held-out split has the participant's own label mix), the same rounds, local epochs, learning
rate and prompt initialization for every method, this measures each method of
:data:`bench.accuracy.methods.METHODS` (local only, PromptFL, DP-FPL at three epsilons, SecFPP,
SecFPP with the true domains as clusters, SecFPP without clustering; zero-shot as reference):

* per seed: every participant's final held-out accuracy, their mean and 10th percentile,
  seconds per round, and for SecFPP the clusters, purity and membership changes per round;
* over seeds: mean and standard deviation of the per-seed means, mean of the 10th percentiles.

Results go to ``--out`` (JSON, default ``bench/results/accuracy.json``); ``python -m
bench.accuracy.render`` turns it into the table of ``docs/results/accuracy.md``.
``--jobs 2`` runs (setting, seed) pairs in two processes (one torch thread each).

Usage: ``python -m bench.accuracy [--seeds 3] [--rounds 8] [--jobs 2] [--quick]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import logging
import multiprocessing
import platform
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from bench.accuracy.methods import METHODS, BenchConfig, run_method
from demo.partition import Part, resolve_setting, setting_partition
from demo.simulation import ParticipantData
from secfpp.federation import DEFAULT_SIGNAL, SIGNALS
from secfpp.participant.learning import Backbone, FeatureSet, configure_threads, load_backbone

__all__ = ["DEFAULT_OUT", "main", "run_unit", "setting_rank", "summarize"]

DEFAULT_OUT = Path("bench/results/accuracy.json")
SETTING_ORDER = ("single", "two-domain", "three-domain", "unequal")


def setting_rank(setting: str) -> tuple[int, str]:
    """Sort key: the built-in settings in :data:`SETTING_ORDER`, then any other by name."""
    if setting in SETTING_ORDER:
        return (SETTING_ORDER.index(setting), "")
    return (len(SETTING_ORDER), setting)


def _participants(
    parts: Sequence[Part],
    backbone: Backbone,
    *,
    per_participant: int,
    seed: int,
    train_fraction: float = 0.8,
) -> list[ParticipantData]:
    """Features of each part (capped at ``per_participant``), split ``train_fraction`` /
    rest into train and held-out test; ``group`` is the part's domain name."""
    from secfpp.participant.backbones.zeroshot import encode_images, images_to_tensor

    out = []
    rng = np.random.default_rng(seed)
    for part in parts:
        idx = part.indices
        if len(idx) > per_participant:
            idx = np.sort(rng.choice(idx, size=per_participant, replace=False))
        order = rng.permutation(len(idx))
        cut = round(train_fraction * len(idx))
        images = part.domain.images[idx]
        if images.ndim == 3:  # grayscale (N, H, W) -> (N, H, W, 3)
            images = np.repeat(images[..., None], 3, axis=-1)
        pixels = images_to_tensor(images, backbone.preprocess)
        feats = encode_images(cast(Any, backbone.model), pixels.to(backbone.device)).float().cpu()
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


def _template_accuracy(data: ParticipantData, backbone: Backbone, template: str) -> float:
    """Held-out accuracy of the hand-written prompt ``template`` (e.g. ``"a photo of a {}."``)."""
    from secfpp.participant.backbones.zeroshot import class_text_features

    text = class_text_features(
        cast(Any, backbone.model), backbone.tokenizer, data.classnames, [template]
    )
    predicted = (data.test.features.to(backbone.device) @ text.T).argmax(dim=1).cpu()
    return float((predicted == data.test.labels).float().mean())


_BACKBONE: Backbone | None = None


def _backbone() -> Backbone:
    global _BACKBONE
    if _BACKBONE is None:
        configure_threads(1)
        from secfpp.participant.backbones import (
            register_offline_models,
            tiny_offline_checkpoint_path,
        )

        register_offline_models()
        _BACKBONE = load_backbone("tiny-offline", tiny_offline_checkpoint_path(), device="auto")
    return _BACKBONE


def run_unit(
    setting: str,
    seed: int,
    methods: Sequence[str],
    bench: BenchConfig,
    *,
    participants: int,
    images: int,
    test_images: int,
    alpha: float,
    min_size: int = 10,
) -> dict[str, Any]:
    """Every method on one setting and seed: ``{"setting", "seed", "description", "domains",
    "participants": {name: true domain}, "methods": {m: run}}`` (``min_size``: the fewest
    images a participant gets, :func:`demo.partition.dirichlet_split`)."""
    logging.getLogger("absl").setLevel(logging.ERROR)  # RDP order warnings are harmless
    started, started_cpu = time.monotonic(), time.process_time()
    backbone = _backbone()
    total = images + test_images
    built = setting_partition(
        setting,
        participants,
        alpha=alpha,
        seed=seed,
        images_per_participant=total,
        min_size=min_size,
    )
    data = _participants(
        built.parts, backbone, per_participant=total, seed=seed, train_fraction=images / total
    )
    spec = resolve_setting(setting)
    out: dict[str, Any] = {
        "setting": setting,
        "seed": seed,
        "description": spec.description,
        "domains": list(spec.domains),
        "participants": {d.name: d.group for d in data},
        "methods": {},
    }
    for method in methods:
        if method == "secfpp-true-domains" and len(built.domain_names) == 1:
            continue  # one true domain: the same federation as secfpp-no-clustering
        t0, cpu = time.monotonic(), time.process_time()
        if method == "zero-shot":
            accuracy = {
                d.name: _template_accuracy(
                    d, backbone, built.prompt_templates[built.true_domain[k]]
                )
                for k, d in enumerate(data)
            }
            row: dict[str, Any] = {
                "mean": round(float(np.mean(list(accuracy.values()))), 5),
                "p10": round(float(np.percentile(list(accuracy.values()), 10)), 5),
                "accuracy": {k: round(v, 5) for k, v in accuracy.items()},
                "seconds": round(time.monotonic() - t0, 2),
                "seconds_per_round": None,
                "cpu_seconds": round(time.process_time() - cpu, 2),
                "cpu_seconds_per_round": None,
            }
        else:
            row = run_method(method, data, backbone, bench, seed=seed).as_dict()
        out["methods"][method] = row
        purity = " purity " + " ".join(f"{p:.2f}" for p in row.get("purity") or [])
        print(
            f"{setting:>12} seed {seed} {method:>20}: mean {row['mean']:.3f} p10 "
            f"{row['p10']:.3f} ({row['seconds']:.0f} s, CPU {row['cpu_seconds']:.0f} s)"
            f"{purity if row.get('purity') else ''}",
            flush=True,
        )
    out["seconds"] = round(time.monotonic() - started, 1)
    out["cpu_seconds"] = round(time.process_time() - started_cpu, 1)
    return out


def summarize(units: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """Per setting and method: mean and std over seeds of the mean participant accuracy,
    mean of the per-seed 10th percentiles, seconds per round, and the per-seed rows.

    Every setting of ``units`` is kept (built-in ones first, in :data:`SETTING_ORDER`); its
    description and domains come from the units (older units without them: the built-in
    setting's)."""
    out: dict[str, Any] = {}
    for setting in sorted({u["setting"] for u in units}, key=setting_rank):
        mine = sorted((u for u in units if u["setting"] == setting), key=lambda u: u["seed"])
        if "domains" in mine[0]:
            description, domains = mine[0]["description"], list(mine[0]["domains"])
        else:
            spec = resolve_setting(setting)
            description, domains = spec.description, list(spec.domains)
        entry: dict[str, Any] = {
            "description": description,
            "domains": domains,
            "seeds": [u["seed"] for u in mine],
            "methods": {},
        }
        for method in methods:
            rows = [
                dict(u["methods"][method], seed=u["seed"]) for u in mine if method in u["methods"]
            ]
            if not rows:
                continue
            means = [r["mean"] for r in rows]
            per_round = [r["seconds_per_round"] for r in rows if r["seconds_per_round"] is not None]
            cpu_round = [r["cpu_seconds_per_round"] for r in rows if r["cpu_seconds_per_round"]]
            entry["methods"][method] = {
                "label": METHODS[method].label,
                "mean": round(float(np.mean(means)), 5),
                "std": round(float(np.std(means)), 5),
                "p10": round(float(np.mean([r["p10"] for r in rows])), 5),
                "seconds_per_round": round(float(np.mean(per_round)), 2) if per_round else None,
                "cpu_seconds_per_round": (
                    round(float(np.mean(cpu_round)), 2) if cpu_round else None
                ),
                "runs": rows,
            }
        out[setting] = entry
    return out


def _write(
    args: argparse.Namespace,
    argv: list[str] | None,
    bench: BenchConfig,
    methods: Sequence[str],
    units: Sequence[dict[str, Any]],
    started: float,
    *,
    complete: bool,
) -> float:
    """Write the JSON of the units done so far (``meta.complete`` says whether all are)."""
    total = time.monotonic() - started
    units = sorted(units, key=lambda u: (u["seed"], setting_rank(u["setting"])))
    result = {
        "meta": {
            "command": "python -m bench.accuracy "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "complete": complete,
            "quick": bool(args.quick),
            "participants": args.participants,
            "seeds": len({u["seed"] for u in units}),
            "alpha": args.alpha,
            "train_images_per_participant": args.images,
            "test_images_per_participant": args.test_images,
            "backbone": "tiny-offline",
            "bench": bench.as_dict(),
            "dp_delta": 1e-5,
            "jobs": args.jobs,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "total_seconds": round(total, 1),
            "total_cpu_seconds": round(sum(u["cpu_seconds"] for u in units), 1),
            "unit_seconds": {f"{u['setting']}/{u['seed']}": u["seconds"] for u in units},
            "unit_cpu_seconds": {f"{u['setting']}/{u['seed']}": u["cpu_seconds"] for u in units},
        },
        "methods": {m: asdict(METHODS[m]) for m in methods},
        "settings": summarize(units, methods),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--settings",
        nargs="+",
        default=list(SETTING_ORDER),
        help="built-in settings or domain texts joined by '+' (registered names, NAME=FOLDER, "
        "NAME=FILE.csv; '@SHARE' for unequal groups)",
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--participants", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=BenchConfig.lr)
    parser.add_argument(
        "--ctx-init", default=BenchConfig.ctx_init, help="'' for random context (CoOp)"
    )
    parser.add_argument("--alpha", type=float, default=0.5, help="Dirichlet label skew")
    parser.add_argument(
        "--signal", choices=SIGNALS, default=DEFAULT_SIGNAL, help="what SecPC clusters"
    )
    parser.add_argument(
        "--images", type=int, default=240, help="training images per participant (mean)"
    )
    parser.add_argument(
        "--test-images", type=int, default=200, help="held-out images per participant (mean)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="processes, one (setting, seed) each")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 1 seed, 2 rounds of 1 epoch, 9 participants, 48 + 24 images each",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.rounds, args.epochs, args.participants = 1, 2, 1, 9
        args.images, args.test_images = 48, 24
    bench = BenchConfig(
        rounds=args.rounds,
        epochs=args.epochs,
        lr=args.lr,
        ctx_init=args.ctx_init or None,
        signal=args.signal,
    )
    if args.participants < 9:
        raise SystemExit(
            f"--participants must be >= 9 (a federation of each true domain, 3 + 3 + 3 and "
            f"6 + 3, needs 3 participants), not {args.participants}"
        )
    for setting in args.settings:
        try:
            resolve_setting(setting)
        except ValueError as exc:
            raise SystemExit(f"--settings: {exc}") from None
    logging.basicConfig(level=logging.WARNING)
    methods = [m for m in METHODS if m in args.methods]
    # Seed-major, so that a run cut short leaves whole seeds in the partial file.
    settings = sorted(dict.fromkeys(args.settings), key=setting_rank)
    jobs = [(s, seed) for seed in range(args.seeds) for s in settings]
    common: dict[str, Any] = dict(
        participants=args.participants,
        images=args.images,
        test_images=args.test_images,
        alpha=args.alpha,
    )
    started = time.monotonic()
    units: list[dict[str, Any]] = []
    if args.jobs > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
            futures = [pool.submit(run_unit, s, seed, methods, bench, **common) for s, seed in jobs]
            for future in as_completed(futures):
                units.append(future.result())
                _write(args, argv, bench, methods, units, started, complete=False)
    else:
        for s, seed in jobs:
            units.append(run_unit(s, seed, methods, bench, **common))
            _write(args, argv, bench, methods, units, started, complete=False)
    total = _write(args, argv, bench, methods, units, started, complete=True)
    print(f"total {total:.0f} s; written {args.out} (render: python -m bench.accuracy.render)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

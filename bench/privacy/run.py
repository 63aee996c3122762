"""Privacy benchmark: membership inference on every strategy, and what SecFPP's coordinator sees.

For each setting of ``--settings`` (named settings of :mod:`demo.partition`: ``single``,
``two-domain``, ``three-domain``, ``unequal``) and each of ``--seeds`` seeds, and for each method
(local, PromptFL, DP-FPL / FedDPA / IGPP / VPDR at every ``--budgets`` epsilon, SecFPP), one
*target* federation runs through :func:`demo.simulation.simulate` (the real coordinator app and
participant engines, in one process); each participant trains on its members
(``--member-fraction`` of its images) and keeps the rest as held-out non-members of the same
distribution. Training follows the accuracy benchmark (:class:`bench.accuracy.methods.
BenchConfig`: lr, ``ctx_init``, no warm-up, smallest aggregated cluster), with fewer rounds and
images. Then, per (setting, seed) (:mod:`bench.privacy.unit`):

1. **Membership inference** against every participant's final model (what it classifies
   with): the loss-threshold attack and online LiRA with ``--shadows`` shadow federations of
   the same method and settings, each participant training on a random half of its candidates
   (:mod:`bench.privacy.mia`). AUC and TPR at 1% FPR over all participants' candidates.
   **Sensitivity check**: local training for many epochs on a small local dataset must give
   an attack AUC measurably above 0.5 (two standard errors), else the attacks are too weak
   for their numbers on the other methods to mean anything; the report says which.
2. **What the coordinator sees**: attribute attacks (a participant's majority label) from
   PromptFL's per-participant updates versus SecFPP's decoded distances
   (:mod:`bench.privacy.coordinator`); once per invocation, KSG mutual information between a
   reduced prompt and the squared distance SecPC decodes (:mod:`bench.privacy.mi`).

Per setting the seeds are summarized (:mod:`bench.privacy.summary`). Output:
``--out/privacy.json`` (``units``: per (setting, seed) rows; ``results``: per setting),
``privacy.md`` (tables), ``privacy.png`` (accuracy against attack AUC, one panel per setting);
``--doc docs/results/privacy.md`` rewrites that page's privacy-table region (nothing else);
``python -m bench.accuracy.render`` reads ``results`` for the accuracy table's privacy columns.

Usage: ``python -m bench.privacy [--settings ...] [--seeds 1] [--quick] [--workers 2]
[--doc docs/results/privacy.md]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from bench.accuracy.methods import BenchConfig
from bench.common import Method, RecordedRun
from bench.privacy.jobs import Job, load_bench_backbone, run_jobs
from bench.privacy.summary import SETTING_ORDER, SHARED_SETTINGS, merge_reports, summarize
from bench.privacy.unit import UnitSpec, evaluate_mia, finish_unit, prepare_unit, unavailable

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_SETTINGS",
    "SHARED_SETTINGS",
    "evaluate_mia",
    "main",
    "merge_reports",
    "plan_methods",
    "unavailable",
]

DP_FAMILIES = ("dpfpl", "feddpa", "protopfl-igpp", "protopfl-vpdr")
ORDER = ("local", "promptfl", *DP_FAMILIES, "secfpp")
#: The accuracy benchmark's DP-FPL budgets (bench.accuracy.methods.METHODS), so that its
#: table's privacy columns find a row for every DP-FPL epsilon.
DEFAULT_BUDGETS = (0.1, 0.4, 1.0)
DEFAULT_SETTINGS = SETTING_ORDER
#: The defaults of ``--quick`` (tiny federations, one budget, the small leakage grid).
QUICK = {
    "participants": 4,
    "per_participant": 40,
    "rounds": 2,
    "shadows": 2,
    "sensitivity_images": 20,
    "sensitivity_epochs": 3,
    "mi_samples": 400,
    "budgets": [1.0],
}


def plan_methods(budgets: Sequence[float], strategies: Sequence[str] = ORDER) -> list[Method]:
    """Every row of the table: DP families once per budget (largest first), the others once."""
    out = []
    for name in strategies:
        if name in DP_FAMILIES:
            out += [Method(name, float(eps)) for eps in sorted(set(budgets), reverse=True)]
        else:
            out.append(Method(name))
    return out


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.privacy", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--settings", nargs="+", default=list(DEFAULT_SETTINGS), choices=SETTING_ORDER
    )
    parser.add_argument("--seeds", type=int, default=1, help="seeds per setting: --seed, +1, ...")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--participants", type=int, default=10)
    parser.add_argument("--per-participant", type=int, default=100)
    parser.add_argument("--member-fraction", type=float, default=0.8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--shadows", type=int, default=4, help="even; LiRA shadow federations")
    parser.add_argument("--lr", type=float, default=BenchConfig.lr)
    parser.add_argument(
        "--ctx-init", default=BenchConfig.ctx_init, help="'' for random context (CoOp)"
    )
    parser.add_argument("--budgets", type=float, nargs="+", default=list(DEFAULT_BUDGETS))
    parser.add_argument("--strategies", nargs="+", default=list(ORDER))
    parser.add_argument("--sensitivity-images", type=int, default=40)
    parser.add_argument("--sensitivity-epochs", type=int, default=15)
    parser.add_argument("--mi-samples", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--doc", type=Path, default=None, help="rewrite its privacy-table region")
    parser.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="a report of an earlier invocation with the same settings: keep its units and rows "
        "for what was not run now (same data, member masks and seeds; noise the coordinator "
        "draws is fresh in every run, as in production)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny federations (a smoke test): other defaults, which options given still override",
    )
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args(argv)
    args.ctx_init = args.ctx_init or None
    args.min_aggregation_size = min(BenchConfig.min_aggregation_size, args.participants - 1)
    if args.shadows < 2 or args.shadows % 2:
        parser.error(f"--shadows must be an even number >= 2, not {args.shadows}")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, not {args.seeds}")
    if not args.budgets or any(not eps > 0 for eps in args.budgets):
        parser.error(f"--budgets must be positive epsilons, not {args.budgets}")
    return args


def _spec(args: argparse.Namespace) -> UnitSpec:
    return UnitSpec(
        participants=args.participants,
        per_participant=args.per_participant,
        member_fraction=args.member_fraction,
        rounds=args.rounds,
        epochs=args.epochs,
        shadows=args.shadows,
        lr=args.lr,
        ctx_init=args.ctx_init,
        min_aggregation_size=args.min_aggregation_size,
        sensitivity_images=args.sensitivity_images,
        sensitivity_epochs=args.sensitivity_epochs,
    )


def _cost_rank(job: Job) -> int:
    """Long jobs first: FedDPA, then everything else (the sort is stable)."""
    return 0 if job.config.strategy == "feddpa" else 1


def _keep(outcomes: dict[tuple[str, int], RecordedRun | str]) -> None:
    """Save the finished federations (without their round views) when the report failed."""
    import pickle
    import tempfile

    slim = {k: v if isinstance(v, str) else replace(v, views={}) for k, v in outcomes.items()}
    fd, path = tempfile.mkstemp(prefix="privacy-outcomes-", suffix=".pkl")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(slim, f)
    print(f"the report failed; the federations' results are in {path}", flush=True)


def _progress(key: tuple[str, int], run: RecordedRun | str) -> None:
    kind = "target" if key[1] == 0 else f"shadow {key[1]}"
    if isinstance(run, str):
        print(f"  {key[0]:>36} {kind:>8}: FAILED {run}", flush=True)
        return
    acc = float(np.mean(list(run.accuracy.values())))
    print(
        f"  {key[0]:>36} {kind:>8}: accuracy {acc:.3f} ({run.seconds:.0f} s, "
        f"CPU {run.cpu_seconds:.0f} s)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    from bench.privacy.coordinator import leakage_rows
    from bench.privacy.report import render_markdown, save_plot, write_doc_region

    args = _arguments(argv)
    started, started_cpu = time.monotonic(), time.process_time()
    spec = _spec(args)
    backbone = load_bench_backbone()
    methods = plan_methods(args.budgets, args.strategies)
    seeds = range(args.seed, args.seed + args.seeds)
    ordered = [s for s in SETTING_ORDER if s in args.settings]
    units = [prepare_unit(s, seed, methods, spec, backbone) for seed in seeds for s in ordered]
    # FedDPA's federations take several times the others' (a per-example Fisher every round):
    # started first, they do not leave one worker busy at the end while the other idles.
    jobs = sorted((job for unit in units for job in unit.jobs), key=_cost_rank)
    print(f"{len(jobs)} federations on {args.workers} worker(s)", flush=True)
    outcomes = run_jobs(jobs, workers=args.workers, backbone=backbone, on_done=_progress)
    try:
        done = [finish_unit(unit, outcomes, spec, backbone) for unit in units]
    except Exception:
        _keep(outcomes)
        raise
    mi = leakage_rows(quick=bool(args.quick), samples=int(args.mi_samples), seed=int(args.seed))
    workers_cpu = sum(v.cpu_seconds for v in outcomes.values() if isinstance(v, RecordedRun))
    report: dict[str, Any] = {
        "generated": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": time.monotonic() - started,
        "cpu_seconds": time.process_time() - started_cpu + (workers_cpu if args.workers > 1 else 0),
        "invocations": 1,
        "settings": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("out", "doc", "merge")
        },
        "units": done,
        "results": summarize(done),
        "coordinator": {"mutual_information": mi},
    }
    if args.merge is not None:
        order = [m.label for m in plan_methods(args.budgets)]
        report = merge_reports(json.loads(args.merge.read_text()), report, order)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "privacy.json").write_text(json.dumps(report, indent=1) + "\n")
    body = render_markdown(report)
    (args.out / "privacy.md").write_text(body)
    save_plot(report, args.out / "privacy.png")
    if args.doc is not None:
        write_doc_region(args.doc, body)
    print(body)
    print(
        f"total {report['seconds']:.0f} s (CPU {report['cpu_seconds']:.0f} s); report in "
        f"{args.out}/privacy.{{json,md,png}}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

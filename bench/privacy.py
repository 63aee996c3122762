"""Privacy benchmark: membership inference on every strategy, and what SecFPP's coordinator sees.

For each method (local, PromptFL, DP-FPL / FedDPA / IGPP / VPDR at three budgets, SecFPP) one
*target* federation runs through :func:`demo.simulation.simulate` (the real coordinator app and
participant engines, in one process) on a named setting of :mod:`demo.partition`; each
participant trains on its members (``--member-fraction`` of its images) and keeps the rest as
held-out non-members of the same distribution. Then:

1. **Membership inference** against every participant's final model (what it classifies
   with): the loss-threshold attack and online LiRA with ``--shadows`` shadow federations of
   the same method and settings, each participant training on a random half of its candidates
   (:mod:`bench.privacy_mia`). AUC and TPR at 1% FPR over all participants' candidates.
   **Sensitivity check**: local training for many epochs on a small local dataset must give
   an attack AUC measurably above 0.5 (two standard errors), else the attacks are too weak
   for their numbers on the other methods to mean anything; the report says which.
2. **What the coordinator sees**: KSG mutual information between a reduced prompt and the
   squared distance SecPC decodes, against the prompt's self-information and the centre
   (:mod:`bench.privacy_mi`); attribute attacks (a participant's majority label) from
   PromptFL's per-participant updates versus SecFPP's decoded distances
   (:mod:`bench.privacy_coordinator`).

Output: ``--out/privacy.json`` (the report), ``privacy.md`` (tables), ``privacy.png``
(accuracy against attack AUC); ``--readme README.md`` rewrites the README's privacy-table region.

Usage: ``python -m bench.privacy [--quick] [--workers 2] [--readme README.md]``
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

from bench.common import (
    CONFIG_BUILDERS,
    Candidates,
    Method,
    RecordedRun,
    candidate_sets,
    method_config,
)
from bench.privacy_jobs import Job, load_bench_backbone, run_jobs
from bench.privacy_metrics import AttackScore, attack_score
from bench.privacy_mia import lira_scores, logit_confidence, loss_scores, paired_halves
from demo.simulation import SimulationConfig

__all__ = ["evaluate_mia", "main", "plan_methods"]

DP_FAMILIES = ("dpfpl", "feddpa", "protopfl-igpp", "protopfl-vpdr")
ORDER = ("local", "promptfl", *DP_FAMILIES, "secfpp")


def plan_methods(budgets: Sequence[float], strategies: Sequence[str] = ORDER) -> list[Method]:
    """Every row of the table: DP families once per budget, the others once."""
    out = []
    for name in strategies:
        if name in DP_FAMILIES:
            out += [Method(name, float(eps)) for eps in budgets]
        else:
            out.append(Method(name))
    return out


def unavailable(method: Method) -> str | None:
    """Why ``method`` cannot run here (its strategy or its config builder is missing)."""
    from participant.learning.strategies import STRATEGIES

    if method.strategy not in STRATEGIES:
        return f"strategy {method.strategy!r} is not registered"
    if method.strategy not in CONFIG_BUILDERS:
        return f"no benchmark config builder for {method.strategy!r}"
    return None


def evaluate_mia(
    candidates: Sequence[Candidates],
    target: RecordedRun,
    shadows: Sequence[RecordedRun],
    shadow_masks: Sequence[Sequence[np.ndarray]],
) -> tuple[AttackScore, AttackScore]:
    """Loss-threshold and LiRA scores over all participants' candidates.

    ``shadow_masks[k][p]``: which of participant ``p``'s candidates shadow ``k`` trained on.
    """
    loss, member, phi = [], [], []
    phi_shadow: list[list[np.ndarray]] = [[] for _ in shadows]
    in_shadow: list[list[np.ndarray]] = [[] for _ in shadows]
    for p, c in enumerate(candidates):
        y = c.labels.numpy()
        z = target.logits[c.name]
        loss.append(loss_scores(z, y))
        phi.append(logit_confidence(z, y))
        member.append(c.member)
        for k, run in enumerate(shadows):
            phi_shadow[k].append(logit_confidence(run.logits[c.name], y))
            in_shadow[k].append(shadow_masks[k][p])
    is_member = np.concatenate(member)
    lira = lira_scores(
        np.concatenate(phi),
        np.stack([np.concatenate(r) for r in phi_shadow]),
        np.stack([np.concatenate(r) for r in in_shadow]),
    )
    return attack_score(np.concatenate(loss), is_member), attack_score(lira, is_member)


def _jobs(
    label: str,
    config: SimulationConfig,
    candidates: Sequence[Candidates],
    shadow_masks: Sequence[Sequence[np.ndarray]],
    seed: int,
) -> list[Job]:
    jobs = [Job((label, 0), config, tuple(candidates), tuple(c.member for c in candidates), seed)]
    for k, masks in enumerate(shadow_masks, start=1):
        jobs.append(Job((label, k), config, tuple(candidates), tuple(masks), seed + 1000 * k))
    return jobs


def _shadow_masks(
    candidates: Sequence[Candidates], shadows: int, seed: int
) -> list[list[np.ndarray]]:
    rng = np.random.default_rng([seed, 23])
    per = [paired_halves(len(c.labels), shadows // 2, rng) for c in candidates]
    return [[per[p][k] for p in range(len(candidates))] for k in range(shadows)]


def _sensitivity(score: tuple[AttackScore, AttackScore], detail: str) -> dict[str, Any]:
    loss, lira = score
    best = max((loss, "loss threshold"), (lira, "LiRA"), key=lambda t: t[0].auc - 2 * t[0].auc_se)
    sensitive = best[0].auc - 2 * best[0].auc_se > 0.5
    verdict = (
        "The evaluation is sensitive: "
        if sensitive
        else "The evaluation is NOT sensitive enough (read the table's AUCs near 0.5 as 'not "
        "measurable here', not as 'private'): "
    )
    statement = (
        f"{verdict}{detail} gives loss-attack AUC {loss.auc:.3f} ± {loss.auc_se:.3f} and LiRA AUC "
        f"{lira.auc:.3f} ± {lira.auc_se:.3f} (TPR@1%FPR {lira.tpr_at_1pct_fpr:.3f}); criterion: "
        f"the better attack's AUC minus two standard errors above 0.5 ({best[1]}: "
        f"{best[0].auc - 2 * best[0].auc_se:.3f})."
    )
    return {
        "detail": detail,
        "loss_attack": loss.as_dict(),
        "lira": lira.as_dict(),
        "sensitive": bool(sensitive),
        "statement": statement,
    }


#: Settings two invocations must share for their rows to be one table.
SHARED_SETTINGS = (
    "setting",
    "participants",
    "per_participant",
    "member_fraction",
    "rounds",
    "epochs",
    "shadows",
    "budgets",
    "seed",
    "sensitivity_images",
    "sensitivity_epochs",
    "mi_samples",
    "quick",
)


def merge_reports(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` with ``old``'s rows for the methods ``new`` did not run, in table order.

    The sensitivity check and the KSG rows are ``new``'s (both invocations compute them
    identically); the attribute attacks are ``old``'s when ``new`` ran neither PromptFL nor SecFPP.
    """
    for key in SHARED_SETTINGS:
        if old["settings"].get(key) != new["settings"].get(key):
            raise ValueError(
                f"Argument 'merge' is a report with {key} = {old['settings'].get(key)!r}, but this "
                f"run has {new['settings'].get(key)!r}"
            )
    rows = {r["method"]: r for r in old["methods"]}
    rows.update({r["method"]: r for r in new["methods"]})
    order = {
        m.label: i
        for i, m in enumerate(plan_methods(sorted(set(new["settings"]["budgets"]), reverse=True)))
    }
    merged = dict(new)
    merged["methods"] = sorted(rows.values(), key=lambda r: order.get(r["method"], len(order)))
    merged["seconds"] = old["seconds"] + new["seconds"]
    merged["invocations"] = old.get("invocations", 1) + 1
    strategies = sorted({*old["settings"]["strategies"], *new["settings"]["strategies"]})
    merged["settings"] = {**new["settings"], "strategies": strategies}
    if not new["coordinator"]["attribute_attacks"]:
        merged["coordinator"] = {
            **new["coordinator"],
            "attribute_attacks": old["coordinator"]["attribute_attacks"],
        }
    return merged


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.privacy", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--setting", default="single")
    parser.add_argument("--participants", type=int, default=10)
    parser.add_argument("--per-participant", type=int, default=150)
    parser.add_argument("--member-fraction", type=float, default=0.8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--shadows", type=int, default=4, help="even; LiRA shadow federations")
    parser.add_argument("--budgets", type=float, nargs=3, default=[0.5, 2.0, 8.0])
    parser.add_argument("--strategies", nargs="+", default=list(ORDER))
    parser.add_argument("--sensitivity-images", type=int, default=40)
    parser.add_argument("--sensitivity-epochs", type=int, default=15)
    parser.add_argument("--mi-samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument(
        "--readme", type=Path, default=None, help="rewrite its privacy-table region"
    )
    parser.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="a report of an earlier invocation with the same settings: keep its rows for the "
        "methods not run now (same data, member masks and seeds; noise the coordinator draws "
        "is fresh in every run, as in production)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny federations (a smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.participants, args.per_participant, args.rounds, args.shadows = 4, 40, 2, 2
        args.sensitivity_images, args.sensitivity_epochs, args.mi_samples = 20, 3, 400
        args.budgets = [1.0, 1.0, 1.0] if args.budgets == [0.5, 2.0, 8.0] else args.budgets
    if args.shadows < 2 or args.shadows % 2:
        parser.error(f"--shadows must be an even number >= 2, not {args.shadows}")
    return args


def main(argv: list[str] | None = None) -> int:
    from bench.privacy_coordinator import coordinator_report
    from bench.privacy_report import render_markdown, save_plot, write_readme_region

    args = _arguments(argv)
    started = time.monotonic()
    backbone = load_bench_backbone()
    _, candidates = candidate_sets(
        args.setting,
        backbone,
        participants=args.participants,
        per_participant=args.per_participant,
        member_fraction=args.member_fraction,
        seed=args.seed,
    )
    _, small = candidate_sets(
        args.setting,
        backbone,
        participants=args.participants,
        per_participant=args.sensitivity_images,
        member_fraction=0.5,
        seed=args.seed + 1,
    )
    base = SimulationConfig(
        rounds=args.rounds,
        epochs=args.epochs,
        warmup_rounds=1,
        init_seed=args.seed,
        n_ctx=4,
        min_aggregation_size=2,
    )
    masks = _shadow_masks(candidates, args.shadows, args.seed)
    small_masks = _shadow_masks(small, args.shadows, args.seed + 1)
    methods = plan_methods(sorted(set(args.budgets), reverse=True), args.strategies)
    rows: list[dict[str, Any]] = []
    jobs: list[Job] = []
    for method in methods:
        reason = unavailable(method)
        row: dict[str, Any] = {"method": method.label, "strategy": method.strategy}
        row["epsilon"] = method.epsilon
        if reason is None:
            try:
                config = method_config(
                    method, base, train_sizes=[int(c.member.sum()) for c in candidates]
                )
            except Exception as exc:  # a strategy's config refused: report it, run the rest
                reason = f"config failed: {type(exc).__name__}: {exc}"
            else:
                jobs += _jobs(method.label, config, candidates, masks, args.seed)
        row.update(status="ok" if reason is None else "unavailable", reason=reason)
        rows.append(row)
    overfit = replace(base, strategy="local", epochs=args.sensitivity_epochs)
    jobs += _jobs("sensitivity", overfit, small, small_masks, args.seed + 1)
    print(f"{len(jobs)} federations on {args.workers} worker(s)", flush=True)

    def progress(key: tuple[str, int], run: RecordedRun | str) -> None:
        kind = "target" if key[1] == 0 else f"shadow {key[1]}"
        if isinstance(run, str):
            print(f"  {key[0]:>22} {kind:>8}: FAILED {run}", flush=True)
            return
        acc = float(np.mean(list(run.accuracy.values())))
        print(f"  {key[0]:>22} {kind:>8}: accuracy {acc:.3f} ({run.seconds:.0f} s)", flush=True)

    outcomes = run_jobs(jobs, workers=args.workers, backbone=backbone, on_done=progress)
    runs = {k: v for k, v in outcomes.items() if isinstance(v, RecordedRun)}
    for row in rows:
        if row["status"] != "ok":
            continue
        label = row["method"]
        failed = [v for k, v in sorted(outcomes.items()) if k[0] == label and isinstance(v, str)]
        if failed:
            row.update(status="failed", reason=f"simulation failed: {failed[0]}")
            continue
        target = runs[(label, 0)]
        shadows = [runs[(label, k)] for k in range(1, args.shadows + 1)]
        loss, lira = evaluate_mia(candidates, target, shadows, masks)
        shadow_acc = [float(np.mean(list(r.accuracy.values()))) for r in shadows]
        row.update(
            accuracy=float(np.mean(list(target.accuracy.values()))),
            shadow_accuracy_mean=float(np.mean(shadow_acc)),
            shadow_accuracy_std=float(np.std(shadow_acc, ddof=1)),
            loss_attack=loss.as_dict(),
            lira=lira.as_dict(),
            seconds=sum(r.seconds for r in (target, *shadows)),
        )
    sens_runs = [runs[("sensitivity", k)] for k in range(args.shadows + 1)]
    sensitivity = _sensitivity(
        evaluate_mia(small, sens_runs[0], sens_runs[1:], small_masks),
        f"local training on {args.sensitivity_images // 2} images per participant for "
        f"{args.rounds} x {args.sensitivity_epochs} epochs",
    )
    sensitivity["accuracy"] = float(np.mean(list(sens_runs[0].accuracy.values())))
    coordinator = coordinator_report(
        backbone, args, candidates, masks, runs, warmup_rounds=base.warmup_rounds
    )
    report = {
        "generated": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": time.monotonic() - started,
        "invocations": 1,
        "settings": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k not in ("out", "readme", "merge")
        },
        "methods": rows,
        "sensitivity": sensitivity,
        "coordinator": coordinator,
    }
    if args.merge is not None:
        report = merge_reports(json.loads(args.merge.read_text()), report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "privacy.json").write_text(json.dumps(report, indent=1) + "\n")
    body = render_markdown(report)
    (args.out / "privacy.md").write_text(body)
    save_plot(report, args.out / "privacy.png")
    if args.readme is not None:
        write_readme_region(args.readme, body)
    print(body)
    print(f"total {report['seconds']:.0f} s; report in {args.out}/privacy.{{json,md,png}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""One unit of the privacy benchmark: every method on one (setting, seed), as jobs and as rows.

:func:`prepare_unit` encodes the setting's participants once (their candidates: members =
training images, the rest held-out non-members), draws the LiRA shadow masks and plans one
target and ``shadows`` shadow federations per method, plus the sensitivity model's (local
training for many epochs on a small set). :func:`finish_unit` turns the finished federations
into the unit's rows: accuracy, loss-threshold and LiRA scores per method, the sensitivity
check and the attribute attacks on what PromptFL's and SecFPP's coordinators see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.common import (
    CONFIG_BUILDERS,
    Candidates,
    Method,
    RecordedRun,
    candidate_sets,
    method_config,
)
from bench.privacy.jobs import Job
from bench.privacy.metrics import AttackScore, attack_score
from bench.privacy.mia import lira_scores, logit_confidence, loss_scores, paired_halves
from demo.simulation import SimulationConfig
from secfpp.participant.learning import Backbone

__all__ = [
    "Unit",
    "UnitSpec",
    "evaluate_mia",
    "finish_unit",
    "prepare_unit",
    "sensitivity_verdict",
    "shadow_masks",
    "unavailable",
]

#: Offset of the sensitivity model's data seed from the unit's (a different draw of images).
SENSITIVITY_SEED_OFFSET = 100


@dataclass(frozen=True)
class UnitSpec:
    """What every unit of one invocation shares (the command line's training settings)."""

    participants: int
    per_participant: int
    member_fraction: float
    rounds: int
    epochs: int
    shadows: int
    lr: float
    ctx_init: str | None
    min_aggregation_size: int
    sensitivity_images: int
    sensitivity_epochs: int


@dataclass
class Unit:
    """One (setting, seed): its candidates, masks, planned rows and jobs."""

    setting: str
    seed: int
    candidates: list[Candidates]
    masks: list[list[NDArray[np.bool_]]]
    small: list[Candidates]
    small_masks: list[list[NDArray[np.bool_]]]
    base: SimulationConfig
    rows: list[dict[str, Any]]
    jobs: list[Job] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        """The job-key prefix of this unit: ``"two-domain/0/"``."""
        return f"{self.setting}/{self.seed}/"


def unavailable(method: Method) -> str | None:
    """Why ``method`` cannot run here (its strategy or its config builder is missing)."""
    from secfpp.participant.learning.strategies import STRATEGIES

    if method.strategy not in STRATEGIES:
        return f"strategy {method.strategy!r} is not registered"
    if method.strategy not in CONFIG_BUILDERS:
        return f"no benchmark config builder for {method.strategy!r}"
    return None


def evaluate_mia(
    candidates: Sequence[Candidates],
    target: RecordedRun,
    shadows: Sequence[RecordedRun],
    masks: Sequence[Sequence[np.ndarray]],
) -> tuple[AttackScore, AttackScore]:
    """Loss-threshold and LiRA scores over all participants' candidates.

    ``masks[k][p]``: which of participant ``p``'s candidates shadow ``k`` trained on.
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
            in_shadow[k].append(masks[k][p])
    is_member = np.concatenate(member)
    lira = lira_scores(
        np.concatenate(phi),
        np.stack([np.concatenate(r) for r in phi_shadow]),
        np.stack([np.concatenate(r) for r in in_shadow]),
    )
    return attack_score(np.concatenate(loss), is_member), attack_score(lira, is_member)


def shadow_masks(
    candidates: Sequence[Candidates], shadows: int, seed: int
) -> list[list[NDArray[np.bool_]]]:
    """``[k][p]``: participant ``p``'s training mask in shadow ``k`` (paired halves)."""
    rng = np.random.default_rng([seed, 23])
    per = [paired_halves(len(c.labels), shadows // 2, rng) for c in candidates]
    return [[per[p][k] for p in range(len(candidates))] for k in range(shadows)]


def sensitivity_verdict(score: tuple[AttackScore, AttackScore], detail: str) -> dict[str, Any]:
    """Is the better attack's AUC minus two standard errors above 0.5 on the overfit model?"""
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
        "margin": best[0].auc - 2 * best[0].auc_se - 0.5,
        "statement": statement,
    }


def _jobs(
    key: str,
    config: SimulationConfig,
    candidates: Sequence[Candidates],
    masks: Sequence[Sequence[NDArray[np.bool_]]],
    seed: int,
) -> list[Job]:
    """The target (member masks, key ``(key, 0)``) and one job per shadow (``(key, k)``)."""
    jobs = [Job((key, 0), config, tuple(candidates), tuple(c.member for c in candidates), seed)]
    for k, shadow in enumerate(masks, start=1):
        jobs.append(Job((key, k), config, tuple(candidates), tuple(shadow), seed + 1000 * k))
    return jobs


def prepare_unit(
    setting: str, seed: int, methods: Sequence[Method], spec: UnitSpec, backbone: Backbone
) -> Unit:
    """Encode ``setting``'s participants for ``seed`` and plan every method's federations."""
    _, candidates = candidate_sets(
        setting,
        backbone,
        participants=spec.participants,
        per_participant=spec.per_participant,
        member_fraction=spec.member_fraction,
        seed=seed,
    )
    small_seed = seed + SENSITIVITY_SEED_OFFSET
    _, small = candidate_sets(
        setting,
        backbone,
        participants=spec.participants,
        per_participant=spec.sensitivity_images,
        member_fraction=0.5,
        seed=small_seed,
    )
    settings = {} if spec.ctx_init is None else {"ctx_init": spec.ctx_init}
    base = SimulationConfig(
        rounds=spec.rounds,
        epochs=spec.epochs,
        lr=spec.lr,
        warmup_rounds=0,
        init_seed=seed,
        n_ctx=4,
        min_aggregation_size=spec.min_aggregation_size,
        strategy_settings=settings,
    )
    unit = Unit(
        setting,
        seed,
        candidates,
        shadow_masks(candidates, spec.shadows, seed),
        small,
        shadow_masks(small, spec.shadows, small_seed),
        base,
        [],
    )
    train_sizes = [int(c.member.sum()) for c in candidates]
    for method in methods:
        reason = unavailable(method)
        row: dict[str, Any] = {
            "method": method.label,
            "strategy": method.strategy,
            "epsilon": method.epsilon,
        }
        if reason is None:
            try:
                config = method_config(method, base, train_sizes=train_sizes)
            except Exception as exc:  # a strategy's config refused: report it, run the rest
                reason = f"config failed: {type(exc).__name__}: {exc}"
            if reason is None:
                unit.jobs += _jobs(unit.prefix + method.label, config, candidates, unit.masks, seed)
        row.update(status="ok" if reason is None else "unavailable", reason=reason)
        unit.rows.append(row)
    overfit = replace(base, strategy="local", epochs=spec.sensitivity_epochs)
    unit.jobs += _jobs(unit.prefix + "sensitivity", overfit, small, unit.small_masks, small_seed)
    return unit


def _mean_accuracy(run: RecordedRun) -> float:
    return float(np.mean(list(run.accuracy.values())))


def finish_unit(
    unit: Unit,
    outcomes: Mapping[tuple[str, int], RecordedRun | str],
    spec: UnitSpec,
    backbone: Backbone,
) -> dict[str, Any]:
    """The unit's report: ``{"setting", "seed", "methods", "sensitivity",
    "attribute_attacks", "seconds", "cpu_seconds"}`` (seconds summed over its federations)."""
    from bench.privacy.coordinator import attribute_attacks

    mine: dict[tuple[str, int], RecordedRun | str] = {
        (key[len(unit.prefix) :], k): v
        for (key, k), v in outcomes.items()
        if key.startswith(unit.prefix)
    }
    runs = {k: v for k, v in mine.items() if isinstance(v, RecordedRun)}
    rows = [dict(r) for r in unit.rows]
    for row in rows:
        if row["status"] != "ok":
            continue
        label = row["method"]
        failed = [v for k, v in sorted(mine.items()) if k[0] == label and isinstance(v, str)]
        if failed:
            row.update(status="failed", reason=f"simulation failed: {failed[0]}")
            continue
        target = runs[(label, 0)]
        shadows = [runs[(label, k)] for k in range(1, spec.shadows + 1)]
        loss, lira = evaluate_mia(unit.candidates, target, shadows, unit.masks)
        shadow_acc = [_mean_accuracy(r) for r in shadows]
        row.update(
            accuracy=_mean_accuracy(target),
            shadow_accuracy_mean=float(np.mean(shadow_acc)),
            shadow_accuracy_std=float(np.std(shadow_acc, ddof=1)),
            loss_attack=loss.as_dict(),
            lira=lira.as_dict(),
            seconds=sum(r.seconds for r in (target, *shadows)),
            cpu_seconds=sum(r.cpu_seconds for r in (target, *shadows)),
        )
    sensitivity: dict[str, Any]
    sens_failed = [v for k, v in mine.items() if k[0] == "sensitivity" and isinstance(v, str)]
    if sens_failed:
        sensitivity = {"sensitive": None, "statement": f"sensitivity run failed: {sens_failed[0]}"}
    else:
        sens = [runs[("sensitivity", k)] for k in range(spec.shadows + 1)]
        sensitivity = sensitivity_verdict(
            evaluate_mia(unit.small, sens[0], sens[1:], unit.small_masks),
            f"local training on {spec.sensitivity_images // 2} images per participant for "
            f"{spec.rounds} x {spec.sensitivity_epochs} epochs",
        )
        sensitivity["accuracy"] = _mean_accuracy(sens[0])
    attacks = attribute_attacks(
        backbone,
        unit.candidates,
        unit.masks,
        runs,
        seed=unit.seed,
        warmup_rounds=unit.base.warmup_rounds,
    )
    done = list(runs.values())
    return {
        "setting": unit.setting,
        "seed": unit.seed,
        "methods": rows,
        "sensitivity": sensitivity,
        "attribute_attacks": attacks,
        "seconds": sum(r.seconds for r in done),
        "cpu_seconds": sum(r.cpu_seconds for r in done),
    }

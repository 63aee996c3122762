"""The privacy benchmark's units summarized per setting, and two invocations' reports merged.

A unit is one (setting, seed) (:func:`bench.privacy.unit.finish_unit`). Per setting and method
:func:`summarize` gives, over the seeds where the method ran:

* ``accuracy``: mean of the per-seed target accuracies; ``accuracy_std``: their std
  (``ddof = 1``; None with one seed);
* ``shadow_accuracy_mean`` / ``_std``: means over seeds of the per-seed shadow mean and std;
* per attack (``loss_attack``, ``lira``): ``auc`` and ``tpr_at_1pct_fpr`` averaged over seeds,
  ``auc_se = sqrt(sum_s se_s^2) / S`` (the standard error of a mean of ``S`` independent
  estimates), ``members`` and ``non_members`` summed.

With one seed the summary row is the unit's row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SETTING_ORDER", "SHARED_SETTINGS", "merge_reports", "summarize"]

SETTING_ORDER = ("single", "two-domain", "three-domain", "unequal")

#: Settings two invocations must share for their rows to be one table.
SHARED_SETTINGS = (
    "participants",
    "per_participant",
    "member_fraction",
    "rounds",
    "epochs",
    "shadows",
    "lr",
    "ctx_init",
    "min_aggregation_size",
    "budgets",
    "sensitivity_images",
    "sensitivity_epochs",
    "mi_samples",
    "quick",
)


def _attack(scores: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(scores)
    return {
        "auc": float(np.mean([s["auc"] for s in scores])),
        "auc_se": math.sqrt(sum(float(s["auc_se"]) ** 2 for s in scores)) / n,
        "tpr_at_1pct_fpr": float(np.mean([s["tpr_at_1pct_fpr"] for s in scores])),
        "members": int(sum(s["members"] for s in scores)),
        "non_members": int(sum(s["non_members"] for s in scores)),
    }


def _summary_row(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One method's rows of one setting (one per seed, in seed order) as one row."""
    first = rows[0]
    out: dict[str, Any] = {k: first[k] for k in ("method", "strategy", "epsilon")}
    ok = [r for r in rows if r["status"] == "ok"]
    if len(ok) < len(rows):
        bad = next(r for r in rows if r["status"] != "ok")
        out.update(status=bad["status"], reason=bad["reason"], seeds=len(ok))
        return out
    accuracy = [float(r["accuracy"]) for r in ok]
    out.update(
        status="ok",
        reason=None,
        seeds=len(ok),
        accuracy=float(np.mean(accuracy)),
        accuracy_std=float(np.std(accuracy, ddof=1)) if len(ok) > 1 else None,
        shadow_accuracy_mean=float(np.mean([r["shadow_accuracy_mean"] for r in ok])),
        shadow_accuracy_std=float(np.mean([r["shadow_accuracy_std"] for r in ok])),
        loss_attack=_attack([r["loss_attack"] for r in ok]),
        lira=_attack([r["lira"] for r in ok]),
        cpu_seconds=float(sum(r.get("cpu_seconds", 0.0) for r in ok)),
    )
    return out


def summarize(units: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{setting: {"seeds": [...], "methods": [summary rows in table order]}}``, settings in
    :data:`SETTING_ORDER` (others after them, by name)."""
    order = {s: i for i, s in enumerate(SETTING_ORDER)}
    settings = sorted({u["setting"] for u in units}, key=lambda s: (order.get(s, len(order)), s))
    out: dict[str, Any] = {}
    for setting in settings:
        mine = sorted((u for u in units if u["setting"] == setting), key=lambda u: u["seed"])
        labels: list[str] = []
        for u in mine:
            labels += [r["method"] for r in u["methods"] if r["method"] not in labels]
        rows = []
        for label in labels:
            per_seed = [r for u in mine for r in u["methods"] if r["method"] == label]
            rows.append(_summary_row(per_seed))
        out[setting] = {"seeds": [u["seed"] for u in mine], "methods": rows}
    return out


def merge_reports(
    old: dict[str, Any], new: dict[str, Any], order: Sequence[str] = ()
) -> dict[str, Any]:
    """``new`` plus ``old``'s units and rows that ``new`` did not run.

    A unit (setting, seed) only in ``old`` is kept whole; in both, ``new``'s rows replace
    ``old``'s method by method, ``old``'s other rows are kept (listed in ``order``, the table's
    method labels, then any others), and ``old``'s attribute attacks are kept when ``new`` ran
    neither PromptFL nor SecFPP there. The KSG rows are ``new``'s (computed identically).
    """
    if "units" not in old:
        raise ValueError(
            "Argument 'merge' is a report of an earlier format (no 'units'); re-run it instead"
        )
    for key in SHARED_SETTINGS:
        if old["settings"].get(key) != new["settings"].get(key):
            raise ValueError(
                f"Argument 'merge' is a report with {key} = {old['settings'].get(key)!r}, but this "
                f"run has {new['settings'].get(key)!r}"
            )
    rank = {label: i for i, label in enumerate(order)}
    units = {(u["setting"], u["seed"]): u for u in old["units"]}
    for u in new["units"]:
        previous = units.get((u["setting"], u["seed"]))
        if previous is None:
            units[(u["setting"], u["seed"])] = u
            continue
        rows = {r["method"]: r for r in previous["methods"]}
        rows.update({r["method"]: r for r in u["methods"]})
        merged = dict(u)
        merged["methods"] = sorted(rows.values(), key=lambda r: rank.get(r["method"], len(rank)))
        if not u["attribute_attacks"]:
            merged["attribute_attacks"] = previous["attribute_attacks"]
        units[(u["setting"], u["seed"])] = merged
    out = dict(new)
    rank_setting = {s: i for i, s in enumerate(SETTING_ORDER)}
    out["units"] = sorted(
        units.values(), key=lambda u: (u["seed"], rank_setting.get(u["setting"], len(rank_setting)))
    )
    out["results"] = summarize(out["units"])
    out["seconds"] = old["seconds"] + new["seconds"]
    out["cpu_seconds"] = old.get("cpu_seconds", 0.0) + new.get("cpu_seconds", 0.0)
    out["invocations"] = old.get("invocations", 1) + 1
    settings = dict(new["settings"])
    strategies = {*old["settings"]["strategies"], *new["settings"]["strategies"]}
    settings["strategies"] = sorted(strategies)
    settings["settings"] = list(out["results"])
    out["settings"] = settings
    return out

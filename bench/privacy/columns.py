"""The accuracy table's privacy columns: the privacy benchmark's scores per setting and method.

:func:`privacy_table` joins the accuracy benchmark's JSON (``python -m bench.accuracy``,
``settings[setting].methods[key]``) with the privacy benchmark's (``python -m bench.privacy``,
``results[setting].methods[]``, rows labelled ``"local"``, ``"dpfpl eps=0.4"``, ...) into one
privacy-utility table: per setting and accuracy-benchmark method its epsilon, its accuracy (from
the accuracy benchmark), and "MIA AUC (LiRA)" and "TPR@1%FPR" of the privacy benchmark's row for
the same setting and method (:func:`privacy_label` maps the keys). Where there is no such row the
cells say ``n/a`` with a footnote why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["privacy_label", "privacy_table"]

#: Accuracy-benchmark methods that train nothing on the participants' images.
UNTRAINED = ("zero-shot",)


def privacy_label(method: str, epsilon: float | None) -> str:
    """The privacy benchmark's row label of accuracy-benchmark method ``method``.

    ``"dpfpl-eps0.4"`` with epsilon 0.4 -> ``"dpfpl eps=0.4"``; a method without epsilon keeps
    its key (``"secfpp"``).
    """
    if epsilon is None:
        return method
    strategy = method.split("-eps")[0]
    return f"{strategy} eps={float(epsilon):g}"


def _epsilon(epsilon: float | None) -> str:
    return "none" if epsilon is None else f"{float(epsilon):g}"


def privacy_table(
    result: Mapping[str, Any], privacy: Mapping[str, Any], labels: Mapping[str, str]
) -> list[str]:
    """Markdown lines of the privacy-utility table (``labels``: setting key -> column name)."""
    missing = [k for k in ("results", "settings", "generated") if k not in privacy]
    if missing:
        raise ValueError(
            f"Argument 'privacy' is not a per-setting privacy report (no {', '.join(missing)}); "
            "re-run python -m bench.privacy"
        )
    results = privacy["results"]
    s = privacy["settings"]
    lines = [
        'Privacy-utility table: accuracy from the table above; "MIA AUC (LiRA)" (± its '
        'standard error) and "TPR@1%FPR" from `bench/results/privacy.json` (`python -m '
        f"bench.privacy.run`, {privacy['generated']}): the same method on the same setting, "
        f"attacked with online LiRA ({s['shadows']} shadow federations) on every participant's "
        f"final model, trained with fewer rounds and images than the accuracy runs "
        f"({s['rounds']} rounds x {s['epochs']} epoch(s), {s['per_participant']} images per "
        f"participant of which {s['member_fraction']:.0%} are members); epsilon at delta 1e-5.",
        "",
        "| setting | method | epsilon | accuracy | MIA AUC (LiRA) | TPR@1%FPR |",
        "|---|---|---:|---:|---:|---:|",
    ]
    notes: dict[str, str] = {}

    def note(text: str) -> str:
        if text not in notes:
            notes[text] = f"[{len(notes) + 1}]"
        return notes[text]

    for setting, entry in result["settings"].items():
        rows = {r["method"]: r for r in results.get(setting, {}).get("methods", [])}
        for method, accuracy in entry["methods"].items():
            epsilon = result["methods"].get(method, {}).get("epsilon")
            row = rows.get(privacy_label(method, epsilon))
            if method in UNTRAINED:
                auc = tpr = "n/a " + note(f"`{method}` trains nothing on the participants' images")
            elif setting not in results:
                auc = tpr = "n/a " + note(f"`privacy.json` has no setting `{setting}`")
            elif row is None:
                auc = tpr = "n/a " + note(
                    f"`{method}` is not a method of the privacy benchmark (a reference)"
                )
            elif row["status"] != "ok":
                auc = tpr = "n/a " + note(f"{privacy_label(method, epsilon)}: {row['reason']}")
            else:
                lira = row["lira"]
                auc = f"{lira['auc']:.3f} ± {lira['auc_se']:.3f}"
                tpr = f"{lira['tpr_at_1pct_fpr']:.3f}"
            lines.append(
                f"| {labels.get(setting, setting)} | {accuracy['label']} | {_epsilon(epsilon)} "
                f"| {accuracy['mean']:.3f} | {auc} | {tpr} |"
            )
    if notes:
        lines.append("")
        lines += [f"{mark} {text}." for text, mark in notes.items()]
    return lines

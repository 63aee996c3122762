"""Render the accuracy benchmark's JSON (``python -m bench.accuracy``) as a results table.

The region of ``docs/results/accuracy.md`` between ``<!-- accuracy-table:start -->`` and
``<!-- accuracy-table:end -->`` is replaced by :func:`render`: the accuracy table (mean participant
accuracy ± std over seeds, and the 10th-percentile participant), SecFPP's clusters per round,
and the issue's targets, each marked met or missed with the measured numbers (:func:`targets`).

With the privacy benchmark's JSON (``--privacy-json``, default ``bench/results/privacy.json``)
a privacy-utility table follows: per setting and method epsilon, accuracy, "MIA AUC (LiRA)" and
"TPR@1%FPR" (:mod:`bench.privacy.columns`).

Usage: ``python -m bench.accuracy.render [--json bench/results/accuracy.json] [--privacy-json
bench/results/privacy.json] [--doc docs/results/accuracy.md] [--stdout]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["END", "START", "Target", "render", "replace_region", "targets"]

START = "<!-- accuracy-table:start -->"
END = "<!-- accuracy-table:end -->"
SETTING_LABELS = {
    "single": "single-domain",
    "two-domain": "two-domain",
    "three-domain": "three-domain",
    "unequal": "unequal 7 + 3",
}
MULTI = ("two-domain", "three-domain", "unequal")
NON_PRIVATE = ("local", "promptfl")
ROOM = 0.10


@dataclass(frozen=True)
class Target:
    """One of the issue's targets on one setting: ``met`` is None when it does not apply."""

    setting: str
    name: str
    met: bool | None
    detail: str


def _mean(result: Mapping[str, Any], setting: str, method: str) -> float | None:
    entry = result["settings"].get(setting, {}).get("methods", {}).get(method)
    return None if entry is None else float(entry["mean"])


def targets(result: Mapping[str, Any]) -> list[Target]:
    """The issue's targets, per setting present in ``result`` (accuracies as fractions):

    * multi-domain: SecFPP >= PromptFL + 0.03, and SecFPP >= true-domain clusters - 0.01;
    * single-domain: SecFPP >= best non-private baseline (local, PromptFL) - 0.01;
    * every setting: SecFPP >= DP-FPL(epsilon 0.1) + 0.10 where the best non-private method is
      at least 0.10 above DP-FPL(0.1) (else "no room", ``met`` None).
    """
    out = []
    for setting in result["settings"]:
        sec = _mean(result, setting, "secfpp")
        if sec is None:
            continue
        if setting in MULTI:
            fl = _mean(result, setting, "promptfl")
            if fl is not None:
                out.append(
                    Target(
                        setting,
                        "SecFPP >= PromptFL + 3 points",
                        sec >= fl + 0.03,
                        f"{sec:.3f} vs {fl:.3f} ({100 * (sec - fl):+.1f} points)",
                    )
                )
            oracle = _mean(result, setting, "secfpp-true-domains")
            if oracle is not None:
                out.append(
                    Target(
                        setting,
                        "SecFPP within 1 point of the true-domain clusters",
                        sec >= oracle - 0.01,
                        f"{sec:.3f} vs {oracle:.3f} ({100 * (sec - oracle):+.1f} points)",
                    )
                )
        else:
            base = {m: v for m in NON_PRIVATE if (v := _mean(result, setting, m)) is not None}
            if base:
                best = max(base, key=lambda m: base[m])
                out.append(
                    Target(
                        setting,
                        "SecFPP >= best non-private baseline - 1 point",
                        sec >= base[best] - 0.01,
                        f"{sec:.3f} vs {best} {base[best]:.3f} "
                        f"({100 * (sec - base[best]):+.1f} points)",
                    )
                )
        dp = _mean(result, setting, "dpfpl-eps0.1")
        if dp is not None:
            candidates = [m for m in result["settings"][setting]["methods"] if "dpfpl" not in m]
            best_value = max(v for m in candidates if (v := _mean(result, setting, m)) is not None)
            room = best_value - dp >= ROOM
            out.append(
                Target(
                    setting,
                    "SecFPP >= DP-FPL(epsilon 0.1) + 10 points",
                    (sec >= dp + ROOM) if room else None,
                    f"{sec:.3f} vs {dp:.3f} ({100 * (sec - dp):+.1f} points)"
                    + ("" if room else f"; no room: the best method is {best_value:.3f}"),
                )
            )
    return out


def _cell(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "-"
    return f"{entry['mean']:.3f} ± {entry['std']:.3f} ({entry['p10']:.3f})"


def _per_round(entry: Mapping[str, Any]) -> float | None:
    """CPU seconds per round (one thread: what an idle core takes), else wall seconds."""
    value = entry.get("cpu_seconds_per_round") or entry.get("seconds_per_round")
    return None if value is None else float(value)


def render(result: Mapping[str, Any], privacy: Mapping[str, Any] | None = None) -> str:
    """Markdown for the results page's region (without the markers); with ``privacy`` (the privacy
    benchmark's JSON) the privacy-utility table follows the accuracy table
    (:func:`bench.privacy.columns.privacy_table`)."""
    meta = result["meta"]
    bench = meta["bench"]
    settings = list(result["settings"])
    methods = list(result["methods"])
    counts = {s: len(result["settings"][s].get("seeds", [])) for s in settings}
    seeds = (
        f"{meta['seeds']} seed(s)"
        if len(set(counts.values())) <= 1
        else "seeds per setting: "
        + ", ".join(f"{SETTING_LABELS.get(s, s)} {n}" for s, n in counts.items())
    )
    lines = [
        f"*Generated by `python -m bench.accuracy.render` from `bench/results/accuracy.json` "
        f"(`{meta['command'].strip()}`, {meta['date']}, {meta['total_seconds']:.0f} s with "
        f"{meta['jobs']} process(es) on {meta['cpus']} shared cores"
        + (
            f", {meta['total_cpu_seconds']:.0f} CPU s"
            if meta.get("total_cpu_seconds") is not None
            else ""
        )
        + (", quick smoke run" if meta.get("quick") else "")
        + ("" if meta.get("complete", True) else ", PARTIAL: the run was cut short")
        + ").*",
        "",
        f"{meta['participants']} participants, Dirichlet({meta['alpha']}) label skew, "
        f"{meta['train_images_per_participant']} training and "
        f"{meta['test_images_per_participant']} held-out images each (means), "
        f"{bench['rounds']} rounds of {bench['epochs']} local epochs, n_ctx = {bench['n_ctx']}, "
        f"lr {bench['lr']}, context initialised at "
        + (f'"{bench["ctx_init"]}"' if bench["ctx_init"] else "random")
        + f", {seeds}. Cell: mean participant accuracy ± std over seeds "
        "(10th-percentile participant, mean over seeds); s/round: CPU seconds per round of the "
        "whole federation (one thread, so about the wall time on an idle core), mean over "
        "settings.",
        "",
        "| method | " + " | ".join(SETTING_LABELS.get(s, s) for s in settings) + " | s/round |",
        "|---|" + "---:|" * (len(settings) + 1),
    ]
    for method in methods:
        entries = [result["settings"][s]["methods"].get(method) for s in settings]
        label = next((e["label"] for e in entries if e is not None), method)
        per_round = [v for e in entries if e and (v := _per_round(e)) is not None]
        seconds = f"{sum(per_round) / len(per_round):.1f}" if per_round else "-"
        lines.append(f"| {label} | " + " | ".join(_cell(e) for e in entries) + f" | {seconds} |")
    if privacy is not None:
        from bench.privacy.columns import privacy_table

        lines += ["", *privacy_table(result, privacy, SETTING_LABELS)]
    clustered = [s for s in settings if "secfpp" in result["settings"][s]["methods"]]
    if clustered:
        lines += [
            "",
            "SecFPP's clusters per seed (after each round: clusters, purity against the true "
            "domains, participants whose cluster mates changed):",
            "",
            "| setting | seed | clusters | purity | membership changes |",
            "|---|---:|---|---|---|",
        ]
        for s in clustered:
            for run in result["settings"][s]["methods"]["secfpp"]["runs"]:
                lines.append(
                    f"| {SETTING_LABELS.get(s, s)} | {run['seed']} | "
                    + " ".join(str(c) for c in run["clusters"])
                    + " | "
                    + " ".join(f"{p:.2f}" for p in run["purity"])
                    + " | "
                    + " ".join(str(c) for c in run["membership_changes"])
                    + " |"
                )
    found = targets(result)
    if found:
        lines += ["", "Targets (issue 11):", ""]
        for t in found:
            mark = {True: "met", False: "**missed**", None: "n/a"}[t.met]
            lines.append(
                f"- {SETTING_LABELS.get(t.setting, t.setting)}: {t.name}: {mark} ({t.detail})"
            )
    return "\n".join(lines)


def replace_region(text: str, body: str) -> str:
    """``text`` with what lies between :data:`START` and :data:`END` replaced by ``body``."""
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        raise ValueError(f"the results page must hold one '{START}' followed by one '{END}'")
    head, rest = text.split(START)
    _, tail = rest.split(END)
    return f"{head}{START}\n{body}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy.render", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", type=Path, default=Path("bench/results/accuracy.json"))
    parser.add_argument("--doc", type=Path, default=Path("docs/results/accuracy.md"))
    parser.add_argument(
        "--privacy-json",
        type=Path,
        default=Path("bench/results/privacy.json"),
        help="the privacy benchmark's report, for the privacy-utility table (skipped if absent)",
    )
    parser.add_argument("--stdout", action="store_true", help="print, leave the results page alone")
    args = parser.parse_args(argv)
    privacy = json.loads(args.privacy_json.read_text()) if args.privacy_json.exists() else None
    if privacy is None or "results" not in privacy:
        why = "absent" if privacy is None else "of a format without per-setting results"
        print(f"{args.privacy_json} is {why}: the table has no privacy columns", file=sys.stderr)
        privacy = None
    body = render(json.loads(args.json.read_text()), privacy)
    if args.stdout:
        sys.stdout.write(body + "\n")
        return 0
    args.doc.write_text(replace_region(args.doc.read_text(), body))
    print(f"updated {args.doc} from {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

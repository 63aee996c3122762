"""The demo's closing report: accuracy table, clusters against domains, guarantees, plot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DemoRecord", "Export", "cluster_purity", "describe_clusters", "plot", "render"]


@dataclass
class DemoRecord:
    """What the demo observed, participant by participant and round by round.

    ``accuracy[round][participant]``: held-out accuracy after the round;
    ``clusters[round]``: the membership published for the next round (lists of indices).
    """

    domains: dict[int, str]
    zero_shot: dict[int, float] = field(default_factory=dict)
    accuracy: dict[int, dict[int, float]] = field(default_factory=dict)
    clusters: dict[int, list[list[int]]] = field(default_factory=dict)
    stages: dict[int, str] = field(default_factory=dict)
    exports: dict[int, Export] = field(default_factory=dict)


@dataclass
class Export:
    """One participant's exported personalized prompt and ``predict`` on held-out images:
    ``predictions`` holds ``(image, predicted class, probability, true class)``."""

    path: Path
    predictions: list[tuple[str, str, float, str]] = field(default_factory=list)

    def lines(self, participant: int, domain: str) -> list[str]:
        right = sum(p == t for _, p, _, t in self.predictions)
        shown = ", ".join(
            f"{Path(i).name}: {p} ({q:.2f}){'' if p == t else f' [true: {t}]'}"
            for i, p, q, t in self.predictions
        )
        return [
            f"participant {participant} ({domain}): {self.path}",
            f"  predict on {len(self.predictions)} held-out images: {right} right; {shown}",
        ]


def cluster_purity(clusters: Sequence[Sequence[int]], domains: Mapping[int, str]) -> float:
    """Fraction of participants whose cluster's majority domain is their own domain."""
    total = sum(len(c) for c in clusters)
    if not total:
        return 0.0
    agree = 0
    for members in clusters:
        names = [domains[m] for m in members]
        agree += max(names.count(n) for n in set(names))
    return agree / total


def describe_clusters(
    clusters: Sequence[Sequence[int]],
    domains: Mapping[int, str],
    previous: Sequence[Sequence[int]] | None = None,
) -> list[str]:
    """Clusters in words, e.g. ``cluster A (4 participants): 0, 1, 2, 3, all handwritten
    digits``, then what changed since ``previous`` and the purity against the domains."""
    lines = []
    for n, members in enumerate(clusters):
        names = [domains[m] for m in members]
        counts = {d: names.count(d) for d in sorted(set(names), key=names.index)}
        if len(counts) == 1:
            what = f"all {next(iter(counts))}"
        else:
            what = "mixed: " + ", ".join(f"{k} x {v}" for k, v in counts.items())
        who = ", ".join(str(m) for m in members)
        lines.append(f"cluster {chr(65 + n)} ({len(members)} participants): {who}; {what}")
    if previous is not None:
        before = {m: tuple(c) for c in previous for m in c}
        after = {m: tuple(c) for c in clusters for m in c}
        moved = sorted(m for m in after if before.get(m) != after[m])
        if len(clusters) != len(previous) or moved:
            lines.append(
                f"membership changed: {len(previous)} -> {len(clusters)} clusters; "
                f"participants now grouped differently: {', '.join(map(str, moved))}"
            )
        else:
            lines.append("membership unchanged")
    lines.append(f"purity against the true domains: {cluster_purity(clusters, domains):.2f}")
    return lines


def render(record: DemoRecord, *, guarantees: Sequence[str], artifacts: Mapping[str, Any]) -> str:
    """The report as text."""
    rounds = sorted(record.accuracy)
    last = rounds[-1] if rounds else None
    lines = ["", "== SecFPP demo report", "", "Held-out accuracy per participant:"]
    lines.append(
        f"  {'participant':>11} {'domain':>12} {'zero-shot':>9} {'after':>7} {'change':>7}"
    )
    for p in sorted(record.domains):
        zs = record.zero_shot.get(p)
        after = record.accuracy.get(last, {}).get(p) if last is not None else None
        change = f"{after - zs:+.3f}" if zs is not None and after is not None else "-"
        lines.append(
            f"  {p:>11} {record.domains[p]:>12} {_fmt(zs):>9} {_fmt(after):>7} {change:>7}"
        )
    if last is not None and record.accuracy.get(last):
        values = list(record.accuracy[last].values())
        zs_values = [record.zero_shot[p] for p in record.accuracy[last] if p in record.zero_shot]
        mean_zs = sum(zs_values) / len(zs_values) if zs_values else float("nan")
        lines.append(f"  mean: zero-shot {mean_zs:.3f} -> {sum(values) / len(values):.3f}")
    lines += ["", "Clusters found (membership for the next round) against the true domains:"]
    final = record.clusters.get(last, []) if last is not None else []
    lines += [f"  {line}" for line in describe_clusters(final, record.domains)]
    parted = [
        r
        for r in sorted(record.clusters)
        if cluster_purity(record.clusters[r], record.domains) >= 0.9
    ]
    if parted and len(set(record.domains.values())) > 1:
        lines.append(f"  the domains were parted (purity >= 0.9) after round {parted[0]}")
    if record.exports:
        lines += [
            "",
            "Personalized models (secfpp-participant export; they never left this machine):",
        ]
        for p, export in sorted(record.exports.items()):
            lines += [f"  {line}" for line in export.lines(p, record.domains[p])]
    lines += ["", "Privacy guarantees in force:"] + [f"  - {g}" for g in guarantees]
    lines += ["", "Artifacts:"] + [f"  {k}: {v}" for k, v in artifacts.items()]
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def plot(record: DemoRecord, path: Path) -> Path:
    """PNG: accuracy per round per participant, and cluster membership per round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    participants = sorted(record.domains)
    rounds = sorted(record.accuracy)
    domain_names = sorted(set(record.domains.values()))
    colours = plt.get_cmap("tab10")
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for p in participants:
        colour = colours(domain_names.index(record.domains[p]))
        xs = [0, *rounds]
        ys = [record.zero_shot.get(p, np.nan)] + [record.accuracy[r].get(p, np.nan) for r in rounds]
        left.plot(
            xs,
            ys,
            marker="o",
            color=colour,
            alpha=0.8,
            label=record.domains[p]
            if p == min(q for q in participants if record.domains[q] == record.domains[p])
            else None,
        )
    left.set_xticks([0, *rounds])
    left.set_xlabel("round (0 = zero-shot)")
    left.set_ylabel("held-out accuracy")
    left.set_title("Accuracy per participant")
    left.set_ylim(0, 1)
    left.grid(alpha=0.3)
    left.legend(title="domain")
    grid = np.full((len(participants), max(len(rounds), 1)), np.nan)
    for j, r in enumerate(rounds):
        for c, members in enumerate(record.clusters.get(r, [])):
            for m in members:
                grid[participants.index(m), j] = c
    right.imshow(grid, aspect="auto", cmap="Set2", interpolation="nearest")
    right.set_xticks(range(len(rounds)), [str(r) for r in rounds])
    right.set_yticks(range(len(participants)), [f"{p} ({record.domains[p]})" for p in participants])
    right.set_xlabel("round")
    right.set_title("Cluster after each round (A, B, ...)")
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if not np.isnan(grid[i, j]):
                right.text(j, i, chr(65 + int(grid[i, j])), ha="center", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

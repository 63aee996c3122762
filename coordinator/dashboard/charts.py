"""Hand-written SVG charts, rendered on the server (no script, no CDN, no chart library).

Colours are the Okabe-Ito palette (Okabe & Ito 2008), distinguishable with the common
colour-vision deficiencies; every chart also carries text (a ``<title>`` per mark and a
legend or table next to it), so no fact is told by colour alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["PALETTE", "Cell", "Series", "cluster_colour", "heatmap", "line_chart"]

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
"""Okabe-Ito without black: blue, orange, bluish green, reddish purple, sky blue,
vermillion, yellow."""
ABSENT = "#ffffff"
INK = "#1a1a1a"


def cluster_colour(cluster: int) -> str:
    """The colour of cluster id ``cluster`` (ids beyond 7 reuse colours; the legend and
    the marks' titles name the cluster)."""
    return PALETTE[cluster % len(PALETTE)]


@dataclass(frozen=True)
class Cell:
    """One heatmap cell: the cluster a participant trained in, or ``None`` (not in the
    round); ``dropped`` names the stage it missed."""

    cluster: int | None
    dropped: str | None = None

    def describe(self) -> str:
        if self.cluster is None:
            return "not in the round"
        text = f"cluster {self.cluster}"
        return f"{text}, dropped in {self.dropped}" if self.dropped else text


def heatmap(
    row_labels: Sequence[str], rounds: Sequence[int], cells: Sequence[Sequence[Cell]]
) -> Markup:
    """Participants (rows) x rounds (columns), colour = cluster.

    Consecutive rounds with the same cell in one row are drawn as one rectangle (a
    100 x 50 grid of stable clusters is ~100 marks, not 5 000). Dropped cells are
    hatched; absent ones are white with a grey outline.
    """
    n_rows, n_cols = len(row_labels), len(rounds)
    cell_w = max(6, min(28, 700 // max(1, n_cols)))
    cell_h = max(4, min(18, 900 // max(1, n_rows)))
    left, top = min(220, 16 + 6 * max((len(label) for label in row_labels), default=4)), 22
    width = left + cell_w * n_cols + 10
    height = top + cell_h * n_rows + 6
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-label="cluster of each participant in each round">',
        '<defs><pattern id="hatch" width="4" height="4" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="4" height="4" fill="#fff"/>'
        f'<line x1="0" y1="0" x2="0" y2="4" stroke="{INK}" stroke-width="1.5"/></pattern></defs>',
    ]
    step = max(1, n_cols // 10)
    for j, number in enumerate(rounds):
        if j % step == 0 or j == n_cols - 1:
            x = left + j * cell_w + cell_w / 2
            parts.append(
                f'<text x="{x:.1f}" y="14" font-size="10" text-anchor="middle">{number}</text>'
            )
    label_every = max(1, (12 + cell_h - 1) // cell_h)
    for i, (label, row) in enumerate(zip(row_labels, cells, strict=True)):
        y = top + i * cell_h
        if i % label_every == 0:
            parts.append(
                f'<text x="{left - 4}" y="{y + cell_h - 1}" font-size="{min(11, cell_h + 3)}" '
                f'text-anchor="end">{escape(label)}</text>'
            )
        j = 0
        while j < n_cols:
            k = j
            while k + 1 < n_cols and row[k + 1] == row[j]:
                k += 1
            cell = row[j]
            if cell.cluster is None:
                fill, stroke = ABSENT, ' stroke="#999" stroke-width="0.5"'
            elif cell.dropped:
                fill, stroke = "url(#hatch)", f' stroke="{cluster_colour(cell.cluster)}"'
            else:
                fill, stroke = cluster_colour(cell.cluster), ""
            span = f"round {rounds[j]}" if j == k else f"rounds {rounds[j]}-{rounds[k]}"
            parts.append(
                f'<rect x="{left + j * cell_w}" y="{y}" width="{(k - j + 1) * cell_w}" '
                f'height="{cell_h}" fill="{fill}"{stroke}><title>{escape(label)}, {span}: '
                f"{escape(cell.describe())}</title></rect>"
            )
            j = k + 1
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every text in it went through escape()


@dataclass(frozen=True)
class Series:
    """A line: ``points`` are ``(x, y)``; ``style`` is ``main``, ``dashed`` or ``faint``."""

    name: str
    points: Sequence[tuple[float, float]]
    colour: str = PALETTE[0]
    style: str = "main"


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


def line_chart(
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    y_range: tuple[float, float] | None = None,
    hline: tuple[float, str] | None = None,
    width: int = 640,
    height: int = 240,
) -> Markup:
    """Lines over a shared x axis (rounds), y from ``y_range`` or the data (padded).

    ``hline`` draws a labelled horizontal reference, e.g. a split threshold.
    """
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points] + ([hline[0]] if hline else [])
    if not xs:
        return Markup('<p class="empty">No data yet.</p>')
    x_lo, x_hi = min(xs), max(xs)
    if y_range is None:
        y_lo, y_hi = min(ys), max(ys)
        pad = (y_hi - y_lo) * 0.08 or 0.05
        y_lo, y_hi = y_lo - pad, y_hi + pad
    else:
        y_lo, y_hi = y_range
    left, right, top, bottom = 48, 12, 10, 34
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (0.5 if x_hi == x_lo else (x - x_lo) / (x_hi - x_lo)) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - y_lo) / ((y_hi - y_lo) or 1.0)) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-label="{escape(y_label)} by {escape(x_label)}">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fff" '
        'stroke="#bbb"/>',
    ]
    for t in _ticks(y_lo, y_hi):
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
            f'stroke="#e5e5e5"/><text x="{left - 4}" y="{py(t) + 3:.1f}" font-size="10" '
            f'text-anchor="end">{t:.3g}</text>'
        )
    for t in sorted({round(v) for v in _ticks(x_lo, x_hi, 6)}):
        parts.append(
            f'<text x="{px(t):.1f}" y="{top + plot_h + 14}" font-size="10" '
            f'text-anchor="middle">{t}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" font-size="11" '
        f'text-anchor="middle">{escape(x_label)}</text>'
    )
    if hline is not None:
        y = py(hline[0])
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="{INK}" '
            f'stroke-dasharray="2 3"/><text x="{left + plot_w - 4}" y="{y - 3:.1f}" '
            f'font-size="10" text-anchor="end">{escape(hline[1])}</text>'
        )
    for s in sorted(series, key=lambda s: s.style != "faint"):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        attrs = {
            "main": 'stroke-width="2.5"',
            "dashed": 'stroke-width="2.5" stroke-dasharray="6 4"',
        }.get(s.style, 'stroke-width="0.8" stroke-opacity="0.35"')
        parts.append(
            f'<polyline points="{pts}" fill="none" stroke="{s.colour}" {attrs}>'
            f"<title>{escape(s.name)}</title></polyline>"
        )
        if s.style != "faint":
            for x, y in s.points:
                parts.append(
                    f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{s.colour}">'
                    f"<title>{escape(s.name)}, round {x:g}: {y:.4g}</title></circle>"
                )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every text in it went through escape()

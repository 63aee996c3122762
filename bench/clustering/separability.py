"""How separable the data signals themselves are: the ceiling any split rule on them faces.

The split rule (docs/protocol.md, "Clustering step") sees one probe's two distance columns a
round; this asks what the signals would allow with *full* knowledge. For every cached
federation of ``g >= 2`` domains (the ``--signals`` cache that :mod:`bench.clustering.heldout`
and :mod:`bench.clustering.signal_replay` write: one row ``x_i`` per participant and its true
domain), it finds the partition of the participants into ``g`` parts of at least
``min_size`` members (``min_aggregation_size``, 3) with the least within-part sum of squares

``W(z) = sum_i |x_i|^2 - sum_k |sum_{i: z_i = k} x_i|^2 / n_k``

by exhaustive search (``g^n`` labelings, through the Gram matrix ``K = X X^T``: ``|sum_{i in S}
x_i|^2 = 1_S^T K 1_S``; ``n <= 14``), and reports per row in how many seeds that best partition
*is* the domain partition, and the domain partition's share of the total sum of squares
``1 - W(domains) / sum_i |x_i - mean|^2``. A seed whose best partition mixes domains is one
in which the signals put some participants of one domain closer to another domain's than to
their own: two-means on the exact points, with every distance known, would not part the
domains either, and no rule on the coordinator's decoded distances (a subset of that
knowledge) can be expected to. It separates what the rule misses because of its test from
what it misses because of the signal.

Usage: ``python -m bench.clustering.separability --signals cache.npz [--heldout held-out.json]
[--md out.md] [--json out.json]``; with ``--heldout``, the replay's parted counts for the same
rows are set beside the ceiling.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.clustering.domain_signal import between_fraction

MAX_MEMBERS = 14
"""Largest federation searched exhaustively (``3^14`` labelings is 4.8 million)."""

_CHUNK = 1 << 16


def best_partition(x: NDArray[np.float64], groups: int, min_size: int) -> NDArray[np.int64]:
    """The labeling ``z`` (shape ``(n,)``, values ``0 .. groups - 1``) with the least
    within-part sum of squares among those whose every part has ``>= min_size`` rows of
    ``x`` (shape ``(n, r)``); ties go to the first in base-``groups`` order."""
    n = x.shape[0]
    if not (groups >= 2 and groups * min_size <= n <= MAX_MEMBERS):
        raise ValueError(f"{n} rows into {groups} parts of >= {min_size}: not searchable")
    gram = x @ x.T
    powers = groups ** np.arange(n)
    best_value, best_code = np.inf, -1
    for start in range(0, groups**n, _CHUNK):
        codes = np.arange(start, min(start + _CHUNK, groups**n))
        labels = (codes[:, None] // powers[None, :]) % groups  # (L, n)
        explained = np.zeros(codes.shape[0])
        ok = np.ones(codes.shape[0], dtype=bool)
        for k in range(groups):
            member = (labels == k).astype(np.float64)  # (L, n)
            size = member.sum(axis=1)
            ok &= size >= min_size
            sums = np.einsum("ln,nm,lm->l", member, gram, member)
            explained += np.where(size > 0, sums / np.maximum(size, 1), 0.0)
        explained[~ok] = -np.inf
        j = int(np.argmax(explained))
        value = -explained[j]
        if ok[j] and value < best_value:
            best_value, best_code = value, int(codes[j])
    if best_code < 0:
        raise ValueError("no labeling has every part that large")
    result: NDArray[np.int64] = (best_code // powers) % groups
    return result


def same_partition(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two labelings of the same rows make the same parts (names aside)."""
    pairs = set(zip(a, b, strict=True))
    return len(pairs) == len(set(a)) == len(set(b))


def rows_of(cache: Any, *, min_size: int = 3) -> list[dict[str, Any]]:
    """One row per ``(signal, setting, alpha, participants, images)`` of ``cache`` (an
    ``.npz`` of :func:`bench.clustering.signal_replay.case_signals`' keys) with two domains
    or more: seeds, seeds separable, mean domain share."""
    grouped: dict[tuple[str, ...], list[tuple[int, bool, float]]] = defaultdict(list)
    for key in sorted(k for k in cache.files if not k.endswith("|domains")):
        signal, setting, alpha, size, seed, images = key.split("|")
        domains = [str(d) for d in cache[f"{key}|domains"]]
        groups = len(set(domains))
        if groups < 2:
            continue
        x = np.asarray(cache[key], dtype=np.float64)
        best = best_partition(x, groups, min_size)
        grouped[(signal, setting, alpha, size, images)].append(
            (int(seed), same_partition(best.tolist(), domains), between_fraction(x, domains))
        )
    rows = []
    for (signal, setting, alpha, size, images), seeds in sorted(grouped.items()):
        seeds.sort()
        rows.append(
            {
                "signal": signal,
                "setting": setting,
                "alpha": float(alpha),
                "participants": int(size),
                "images": int(images),
                "seeds": [s for s, _, _ in seeds],
                "separable": [ok for _, ok, _ in seeds],
                "domain_share": round(float(np.mean([share for _, _, share in seeds])), 3),
            }
        )
    return rows


def _parted(heldout: dict[str, Any] | None) -> dict[tuple[str, float, int], str]:
    if heldout is None:
        return {}
    out = {}
    for row in heldout["rows"]:
        if row["kind"] != "single":
            key = (row["setting"], float(row["alpha"]), int(row["participants"]))
            out[key] = row["judged"]["measured"]
    return out


def render(result: dict[str, Any]) -> str:
    """The markdown report (what ``--md`` writes)."""
    meta = result["meta"]
    parted = meta.get("heldout_command")
    lines = [
        "# How separable the data signals are (issue 29)",
        "",
        f"*Generated by `{meta['command']}` on {meta['date']}; machine: {meta['machine']}; "
        f"runtime {meta['seconds']:.0f} s. Do not edit: rerun the command.*",
        "",
        "Per row: in how many seeds the best partition of the participants' data signals into "
        "as many parts as there are domains (each part at least `min_aggregation_size` = 3; "
        "exhaustive search, every distance known) is the domain partition, and the domain "
        "partition's mean share of the signals' total sum of squares. A seed that is not "
        "separable is one where full-knowledge two-means would mix domains: no split rule "
        "on the decoded distances can be expected to part it."
        + (
            f" `parted (replay)`: the split rule's figure for the same row, from `{parted}`."
            if parted
            else ""
        ),
        "",
        "| domains | participants | alpha | separable | domain share"
        + (" | parted (replay) |" if parted else " |"),
        "|---|---:|---:|---:|---:" + ("|---:|" if parted else "|"),
    ]
    for row in result["rows"]:
        n, k = len(row["seeds"]), sum(row["separable"])
        domains = row["setting"].replace("+", " \\| ")
        line = (
            f"| {domains} | {row['participants']} | "
            f"{row['alpha']:g} | {k} of {n} | {row['domain_share']:.2f} |"
        )
        if parted:
            line += f" {row.get('parted', '-')} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from bench.report import machine

    parser = argparse.ArgumentParser(
        prog="python -m bench.clustering.separability", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--signals", type=Path, required=True, help="an .npz data-signal cache")
    parser.add_argument(
        "--heldout", type=Path, default=None, help="a bench.clustering.heldout JSON"
    )
    parser.add_argument("--min-size", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--md", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.signals.is_file():
        parser.error(f"--signals {args.signals}: no such file")
    started = datetime.now(UTC)
    with np.load(args.signals) as cache:
        rows = rows_of(cache, min_size=args.min_size)
    heldout = json.loads(args.heldout.read_text()) if args.heldout is not None else None
    parted = _parted(heldout)
    for row in rows:
        key = (row["setting"], row["alpha"], row["participants"])
        if key in parted:
            row["parted"] = parted[key]
    about = machine()
    result = {
        "meta": {
            "command": "python -m bench.clustering.separability "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{about['cpu']} ({about['cores']} cores, Python {about['python']})",
            "seconds": (datetime.now(UTC) - started).total_seconds(),
            "heldout_command": heldout["meta"]["command"] if heldout else None,
        },
        "rows": rows,
    }
    text = render(result)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.md is not None:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

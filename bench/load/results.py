"""Markdown tables of ``python -m bench.load --json`` runs, and where the coordinator's CPU
went (a ``py-spy record --gil -f raw`` profile of coordinator 0).

Usage::

    python -m bench.load.results load-1.json load-2.json [--profile r1.spy.txt]
        [--out docs/results/load.md]

Prints the section (date, machine, load average, command of every run; per request kind
the count and p50/p95/p99/max; the coordinator's CPU per request and per round; where
its CPU went); with ``--out`` it replaces the text between the file's
``<!-- n1000:begin -->`` and ``<!-- n1000:end -->`` markers (appended when absent).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["main", "profile_shares", "render", "slowest_in_rounds"]

BEGIN, END = "<!-- n1000:begin -->", "<!-- n1000:end -->"

# (label, a frame of the coordinator's code that marks it), first match from the stack's
# innermost frame outwards decides
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("share upload: COPY of the envelopes", "insert_envelopes (secfpp/coordinator/rounds/store"),
    ("share upload: version bump + commit", "bump_and_commit (secfpp/coordinator/rounds/store"),
    ("share upload: parse the binary batch", "share_envelopes (secfpp/coordinator/api/binary"),
    ("driver pass (stage decision)", "_plan (secfpp/coordinator/rounds/driver"),
    ("driver pass (other)", "_run (secfpp/coordinator/rounds/driver"),
    ("authentication", "authenticated (secfpp/coordinator/api/deps"),
    ("share upload: checks and reads", "accept_shares (secfpp/coordinator/rounds/uploads"),
    ("coded result upload", "accept_result (secfpp/coordinator/rounds/uploads"),
    ("inbox", "inbox (secfpp/coordinator/api/routes/participants"),
    ("task poll: the view", "task (secfpp/coordinator/rounds/views"),
    ("task poll: other", "task (secfpp/coordinator/api/routes/participants"),
    ("outcome", "outcome (secfpp/coordinator/api/routes/participants"),
    ("metrics report", "report_metrics (secfpp/coordinator/api/routes/participants"),
    ("request body guard", "secfpp/coordinator/api/body.py"),
    ("JSON answers (FastAPI serialization)", "serialize_response (fastapi/routing"),
    ("HTTP server (uvicorn, h11/httptools)", "uvicorn/protocols"),
    ("ASGI / FastAPI routing", "starlette/"),
    ("decode jobs", "secfpp/coordinator/jobs"),
)


def profile_shares(path: Path) -> tuple[int, list[tuple[str, float]]]:
    """Samples in a ``py-spy -f raw`` file, and the share of them per category (the
    innermost matching frame decides; "other" for none), largest first."""
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        total += int(n)
        label = "other (event loop, threads, logging)"
        for frame in reversed(frames):
            hit = next((name for name, mark in CATEGORIES if mark in frame), None)
            if hit is not None:
                label = hit
                break
        counts[label] += int(n)
    return total, [(k, v / max(total, 1)) for k, v in counts.most_common()]


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:,.0f}"


def _run_block(run: dict[str, Any], name: str) -> list[str]:
    a, rec = run["args"], run.get("recorded", {})
    before = rec.get("machine_before", {})
    load0 = ", ".join(f"{x:.1f}" for x in before.get("load", []))
    load1 = ", ".join(f"{x:.1f}" for x in rec.get("load_after", []))
    rounds = run["rounds"]
    published = sum(r["stage"] == "published" for r in rounds)
    lines = [
        f"**{name}** ({rec.get('date', '?')}; {before.get('cores', '?')} cores, "
        f"{before.get('cpu', '?')}; load average 1/5/15 min before {load0 or '?'}, "
        f"after {load1 or '?'}): `{rec.get('command', '?')}`",
        "",
        f"N = {a['participants']}, committee {rounds[0].get('committee_size')}, d = {a['dim']}, "
        f"{a['replicas']} replica(s), arrival {a['arrival']}"
        + (
            f" (training median {a['train_median']:g} s, sigma {a['train_sigma']:g})"
            if a["arrival"] == "training"
            else ""
        )
        + f"; {published}/{len(rounds)} rounds published, round wall times "
        + ", ".join(f"{r['seconds']:.0f} s" for r in rounds)
        + ".",
        "",
        "| request | count | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = [*run["endpoints"].items(), ("**all**", run["overall"])]
    for label, p in rows:
        if p.get("count"):
            lines.append(
                f"| {label} | {p['count']} | {_ms(p['p50'])} | {_ms(p['p95'])} | "
                f"{_ms(p['p99'])} | {_ms(p['max'])} |"
            )
    lines += _slowest_lines(run)
    cpu = run["cpu_seconds"]
    db = run.get("database") or {}
    lines += [
        "",
        f"Coordinator CPU: {cpu['coordinator']:.1f} s in all, "
        f"{run.get('coordinator_cpu_ms_per_request', 0):.2f} ms per request, "
        f"{run.get('coordinator_cpu_s_per_round', 0):.1f} s per round; load generator "
        f"{cpu['load generator']:.1f} s. Statuses {run['statuses']}, 5xx "
        f"{run['server_errors']}, transport errors {run['transport_errors']}"
        + (
            f"; {db['transactions']} database transactions, {db['connections_opened']} "
            "connections opened."
            if db
            else "."
        ),
        "",
    ]
    return lines


def slowest_in_rounds(run: dict[str, Any], top: int = 5) -> list[tuple[str, float, str]]:
    """The ``top`` slowest requests of a run (``slowest`` of :func:`bench.load.stats.
    summarize`) as (endpoint, seconds, where): the round stage that had begun last when the
    request was sent, and how long before (runs without send times or stage times: none)."""
    starts: list[tuple[float, str]] = []
    for r in run.get("rounds", []):
        for stage, at in r.get("stage_times", []):
            when = datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp()
            starts.append((when, f"round {r['round']} {stage}"))
    starts.sort()
    out = []
    for s in run.get("slowest", [])[:top]:
        before = [x for x in starts if x[0] <= s["at"]]
        if not s.get("at") or not before:
            continue
        when, label = before[-1]
        out.append((s["endpoint"], float(s["seconds"]), f"{s['at'] - when:.1f} s after {label}"))
    return out


def _slowest_lines(run: dict[str, Any]) -> list[str]:
    found = slowest_in_rounds(run)
    if not found:
        return []
    return [
        "",
        "Slowest requests (sent when): "
        + "; ".join(f"{e} {1000 * sec:,.0f} ms ({where})" for e, sec, where in found)
        + ".",
    ]


def render(runs: list[tuple[str, dict[str, Any]]], profiles: list[Path]) -> str:
    lines: list[str] = []
    for name, run in runs:
        lines += _run_block(run, name)
    if profiles:
        found = [(path.stem, *profile_shares(path)) for path in profiles]
        labels = list(dict.fromkeys(k for _, _, shares in found for k, _ in shares))
        lines += [
            "Where coordinator 0's CPU went (`py-spy record --gil --nonblocking -r 20`: samples "
            "of the thread holding the GIL during the rounds; `bench/load/results.py` classifies "
            "each by its innermost frame of the coordinator's code):",
            "",
            "| where | "
            + " | ".join(f"{name} ({total:,} samples)" for name, total, _ in found)
            + " |",
            "|---|" + "---:|" * len(found),
        ]
        for label in labels:
            cells = [f"{100 * dict(shares).get(label, 0.0):.1f} %" for _, _, shares in found]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load.results", description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path, help="--json files of bench.load")
    parser.add_argument(
        "--profile", type=Path, action="append", default=[], help="py-spy -f raw (repeat)"
    )
    parser.add_argument("--out", type=Path, help="markdown file to update between markers")
    args = parser.parse_args(argv)
    runs = [(p.stem, json.loads(p.read_text())) for p in args.runs]
    text = render(runs, args.profile)
    print(text)
    if args.out is not None:
        old = args.out.read_text() if args.out.exists() else ""
        block = f"{BEGIN}\n{text}\n{END}"
        if BEGIN in old and END in old:
            head, rest = old.split(BEGIN, 1)
            new = head + block + rest.split(END, 1)[1]
        else:
            new = old.rstrip("\n") + "\n\n" + block + "\n"
        args.out.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

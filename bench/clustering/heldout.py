"""The calibrated split rule on the held-out domains (issue 29, item 3), against its targets.

The split rule's parameters (``clustering.false_split_rate`` 0.05, ``null_draws`` 199; section 4
of docs/protocol.md) were chosen on the *tuning* domains (:data:`demo.data.base.TUNING`:
handwritten digits, printed letters, clothing, Greek letters). This runs the federation's
default clustering step, unchanged, on the domains registered as *held out*
(:data:`demo.data.base.HELD_OUT`: printed digits, which the backbone was pretrained on, and
Cyrillic letters, math symbols and Armenian letters, which it never saw), the way
:mod:`bench.clustering.signal_replay` does: each participant's data signal (what it shares
with ``reduction.signal = "data-balanced"``, or with ``--signal data`` the former default;
independent of the prompts) is computed once on the shipped ``tiny-offline`` CLIP, then
:func:`crypto.clustering.secpc_step` runs ``--rounds`` rounds on the plaintext distances
(which the coded path decodes exactly), from one cluster, with a public beacon of its own per
seed. Every suite case, at every Dirichlet ``alpha``:

* **pair**: every two-domain pairing of the suite, ``--pair-size`` participants in equal groups;
  parted (every domain a cluster of its own, no mixed cluster) by round 3;
* **triple**: every three-domain combination, at each of ``--triple-sizes`` (equal groups);
  all three found by round 6. An 8-member federation with a two-member domain can never part
  (``min_aggregation_size`` 3), hence 9 (3 + 3 + 3) and 12 (4 + 4 + 4) by default;
* **single**: every domain alone, ``--single-size`` participants: false splits (ever more than
  one cluster in ``--rounds`` rounds);
* **flip-flops**: membership changes after a pair or triple first parted.

The issue's targets (>= 9 of 10 pairs parted by round 3, >= 8 of 10 triples by round 6, false
splits <= 5% per domain, no flip-flops, at alpha 0.5 and 5) are judged per row and written with
the figures to ``--json`` and ``--md`` (date, machine, load average, command, runtime; with
``--accuracy FILE``, a :mod:`bench.accuracy` JSON on held-out settings, clustering's added value
with a 95% confidence interval over its seeds). What the replay leaves out: training, the
accuracy review (it may merge back a split that cost accuracy) and coding (exact).

Usage: ``python -m bench.clustering.heldout [--seeds 10] [--single-seeds 40] [--rounds 6]
[--alphas 0.5 5] [--signals cache.npz] [--accuracy acc.json] [--md docs/results/held-out.md]``
(``--single-seeds``: more seeds for the single-domain rows only); ``--quick``:
2 seeds, 3 rounds, alpha 0.5, 60 images, the first pairing, 9-member triples and one domain
alone (the test suite runs it).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import functools
import itertools
import json
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.clustering.signal_replay import _case, case_signals, federation_config, replay
from secfpp.federation import DATA_SIGNALS, DEFAULT_SIGNAL

__all__ = ["TARGETS", "Case", "added_value", "judge", "main", "render", "suite"]

#: The issue's targets: ``(kind, by round, fewest seeds of 10 parted | most false-split share)``.
TARGETS = {
    "pair": "parted by round 3 in >= 9 of 10 seeds",
    "triple": "all three found by round 6 in >= 8 of 10 seeds",
    "single": "false splits <= 5% of seeds",
    "flip-flops": "no membership change after parting",
}
BY_ROUND = {"pair": 3, "triple": 6}
SHARE_NEEDED = {"pair": 0.9, "triple": 0.8}
MAX_FALSE_SPLITS = 0.05


@dataclass(frozen=True)
class Case:
    """One federation of the suite: ``kind`` (pair, triple, single), its setting text
    (domains joined by ``+``) and its number of participants."""

    kind: str
    setting: str
    participants: int


def suite(
    domains: tuple[str, ...],
    *,
    pair_size: int,
    triple_sizes: tuple[int, ...],
    single_size: int,
) -> list[Case]:
    """Every pairing, every three-domain combination at each size, every domain alone."""
    for size, groups in [(pair_size, 2)] + [(s, 3) for s in triple_sizes]:
        if size % groups or size // groups < 3:
            raise ValueError(
                f"{size} participants cannot make {groups} equal groups of at least 3 "
                "(min_aggregation_size): such a federation can never part"
            )
    cases = [Case("pair", "+".join(p), pair_size) for p in itertools.combinations(domains, 2)]
    cases += [
        Case("triple", "+".join(t), size)
        for size in triple_sizes
        for t in itertools.combinations(domains, 3)
    ]
    cases += [Case("single", d, single_size) for d in domains]
    return cases


def judge(row: dict[str, Any]) -> dict[str, Any]:
    """The row's target, what was measured and whether it is met (``None``: the run had fewer
    rounds than the target's round)."""
    seeds = row["seeds"]
    if row["kind"] == "single":
        share = row["false_splits"] / seeds
        return {
            "target": TARGETS["single"],
            "measured": f"{row['false_splits']} of {seeds}",
            "met": share <= MAX_FALSE_SPLITS,
        }
    by = BY_ROUND[row["kind"]]
    parted = sum(r is not None and r <= by for r in row["parted_rounds"])
    return {
        "target": TARGETS[row["kind"]],
        "measured": f"{parted} of {seeds}",
        "parted_by": parted,
        "met": None if row["rounds"] < by else parted >= SHARE_NEEDED[row["kind"]] * seeds,
        "flip_flops_met": row["changes_after"] == 0,
    }


def seed_results(
    cases: list[Case],
    seed: int,
    *,
    alphas: list[float],
    rounds: int,
    images: int,
    cache: dict[str, NDArray[Any]],
    false_split_rate: float | None = None,
    signal: str = DEFAULT_SIGNAL,
    kinds: frozenset[str] | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, NDArray[Any]], float]:
    """One seed of every case at every alpha: ``({"case index|alpha": found}, the data
    signals it computed (cache entries), CPU seconds)``; ``found`` as
    :func:`bench.clustering.signal_replay._case`. The replay's beacon is ``heldout|seed``.
    ``kinds``: only the cases of these kinds (all when None)."""
    from bench.accuracy.run import _backbone
    from demo.partition import load_train_domain

    cpu = time.process_time()
    config = federation_config(false_split_rate)
    load = functools.lru_cache(maxsize=None)(load_train_domain)  # each domain once
    before = set(cache)
    found: dict[str, dict[str, Any]] = {}
    for k, case in enumerate(cases):
        if kinds is not None and case.kind not in kinds:
            continue
        for alpha in alphas:
            ((x, domains),) = case_signals(
                case.setting,
                alpha,
                case.participants,
                [seed],
                images=images,
                backbone=_backbone(),
                cache=cache,
                load=load,
                signal=signal,
            )
            history = replay(x, domains, config, rounds=rounds, salt=f"heldout|{seed}")
            found[f"{k}|{alpha}"] = _case(history, domains)
    new = {key: cache[key] for key in set(cache) - before}
    return found, new, time.process_time() - cpu


def run(
    cases: list[Case],
    *,
    alphas: list[float],
    seeds: int,
    rounds: int,
    images: int,
    cache: dict[str, NDArray[Any]],
    false_split_rate: float | None = None,
    jobs: int = 1,
    partial: Path | None = None,
    signal: str = DEFAULT_SIGNAL,
    single_seeds: int | None = None,
) -> tuple[list[dict[str, Any]], float, int]:
    """One row per case and alpha: per seed, the round it parted (or ``None``) or whether it
    ever split, and the membership changes after parting; the CPU seconds of all seeds; and
    how many seeds were read back from ``partial``.
    ``single_seeds``: the single-domain rows' seeds when more than ``seeds`` (a false-split
    rate of 5% is 0.5 of 10 seeds: ten cannot tell it from 10%); the seeds past ``seeds``
    replay only those rows.
    ``jobs > 1``: seeds in that many processes (one torch thread each); new data signals
    are added to ``cache``. ``partial``: a folder where each finished seed's results are
    written (``seed-N.json``, with the suite they belong to) and read back instead of
    recomputed, so a run cut short keeps its seeds."""
    common: dict[str, Any] = dict(
        alphas=alphas,
        rounds=rounds,
        images=images,
        false_split_rate=false_split_rate,
        signal=signal,
    )
    by_seed: dict[int, dict[str, dict[str, Any]]] = {}
    cpu = 0.0
    total = max(seeds, single_seeds or 0)
    suite_key = json.dumps([[c.kind, c.setting, c.participants] for c in cases] + [common])

    def kinds_of(seed: int) -> frozenset[str] | None:
        return None if seed < seeds else frozenset({"single"})

    def key_of(seed: int) -> str:
        return suite_key + ("" if seed < seeds else "|single")

    if partial is not None:
        partial.mkdir(parents=True, exist_ok=True)
        for seed in range(total):
            path = partial / f"seed-{seed}.json"
            if path.exists() and (stored := json.loads(path.read_text()))["suite"] == key_of(seed):
                by_seed[seed] = stored["found"]
                cpu += stored["cpu_seconds"]
    todo = [seed for seed in range(total) if seed not in by_seed]

    def done(seed: int, result: tuple[dict[str, Any], dict[str, Any], float]) -> None:
        nonlocal cpu
        by_seed[seed], new, seconds = result
        cache.update(new)
        cpu += seconds
        if partial is not None:
            record = {"suite": key_of(seed), "found": by_seed[seed], "cpu_seconds": seconds}
            (partial / f"seed-{seed}.json").write_text(json.dumps(record))
        print(f"seed {seed} done ({seconds:.0f} CPU s)", flush=True)

    if jobs > 1 and todo:
        mine = {key: value for key, value in cache.items()}
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = {
                pool.submit(
                    seed_results, cases, seed, cache=mine, kinds=kinds_of(seed), **common
                ): seed
                for seed in todo
            }
            for future in as_completed(futures):
                done(futures[future], future.result())
    else:
        for seed in todo:
            done(seed, seed_results(cases, seed, cache=cache, kinds=kinds_of(seed), **common))
    rows = []
    for k, case in enumerate(cases):
        count = total if case.kind == "single" else seeds
        for alpha in alphas:
            found = [by_seed[seed][f"{k}|{alpha}"] for seed in range(count)]
            row: dict[str, Any] = {
                "kind": case.kind,
                "setting": case.setting,
                "participants": case.participants,
                "alpha": alpha,
                "seeds": count,
                "rounds": rounds,
            }
            if case.kind == "single":
                row["false_splits"] = sum(f["false_split"] for f in found)
            else:
                row["parted_rounds"] = [f["parted_round"] for f in found]
                row["changes_after"] = sum(f["changes_after"] for f in found)
            row["judged"] = judge(row)
            print(
                f"{case.kind:>6} {case.setting:>48} n {case.participants:>2} alpha {alpha:<4}: "
                f"{row['judged']['measured']} ({row['judged']['target']}; met "
                f"{row['judged']['met']})",
                flush=True,
            )
            rows.append(row)
    return rows, cpu, total - len(todo)


def added_value(accuracy: dict[str, Any]) -> list[dict[str, Any]]:
    """Per setting of a :mod:`bench.accuracy` JSON: SecFPP minus SecFPP without clustering and
    SecFPP minus PromptFL (mean participant accuracy, paired by seed), mean and a 95% Student-t
    confidence interval over the seeds."""
    from scipy import stats

    out = []
    for setting, entry in accuracy["settings"].items():
        methods = entry["methods"]
        if "secfpp" not in methods:
            continue
        mine = {r["seed"]: r["mean"] for r in methods["secfpp"]["runs"]}
        row: dict[str, Any] = {"setting": setting, "domains": entry["domains"]}
        for other in ("secfpp-no-clustering", "promptfl"):
            if other not in methods:
                continue
            theirs = {r["seed"]: r["mean"] for r in methods[other]["runs"]}
            diffs = [mine[s] - theirs[s] for s in sorted(mine.keys() & theirs.keys())]
            n = len(diffs)
            mean = float(np.mean(diffs)) if n else math.nan
            half = (
                float(stats.t.ppf(0.975, n - 1) * np.std(diffs, ddof=1) / math.sqrt(n))
                if n > 1
                else math.nan
            )
            row[other] = {
                "seeds": n,
                "mean": round(mean, 5),
                "ci95": [round(mean - half, 5), round(mean + half, 5)],
                "diffs": [round(d, 5) for d in diffs],
            }
        row["secfpp"] = round(float(np.mean(list(mine.values()))), 5)
        row["secfpp_clusters"] = [r["clusters"][-1] for r in methods["secfpp"]["runs"]]
        row["secfpp_purity"] = [r["purity"][-1] for r in methods["secfpp"]["runs"]]
        out.append(row)
    return out


def _domains(setting: str) -> str:
    """A setting text as a table cell: its domains parted by escaped bars."""
    return " \\| ".join(setting.split("+"))


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}"


def render(result: dict[str, Any]) -> str:
    """The markdown report of a result (what ``--md`` writes)."""
    meta = result["meta"]
    load = ", ".join(f"{v:.1f}" for v in meta["load_before"])
    load_after = ", ".join(f"{v:.1f}" for v in meta["load_after"])
    tuning_suite = meta.get("role") == "tuning"
    suite_line = (
        f"**The tuning domains** (the split rule's defaults were chosen on these; the suite "
        f"below): {', '.join(meta['suite'])}. A control: the held-out report, "
        "`docs/results/held-out.md`, is on the domains nothing was chosen on."
        if tuning_suite
        else f"**Tuned on** (the split rule's defaults were chosen on these): "
        f"{', '.join(meta['tuning'])}. **Held out** (nothing chosen on them; the suite below): "
        f"{', '.join(meta['suite'])}."
    )
    lines = [
        "# The calibrated split rule on "
        + ("its tuning domains (control)" if tuning_suite else "held-out domains")
        + " (issue 29, item 3)",
        "",
        f"*Generated by `{meta['command']}` on {meta['date']}; machine: {meta['machine']}, "
        f"load average (1, 5, 15 min) {load} before and {load_after} after (a shared machine: "
        f"the runtime is noisy). Runtime {meta['seconds']:.0f} s wall, "
        f"{meta['cpu_seconds']:.0f} CPU s (all seeds) in {meta['jobs']} process(es)"
        + (
            f"; {meta['seeds_read_back']} seed(s) read back from an earlier run's per-seed "
            "results (`--partial`), so the wall time covers only the rest"
            if meta.get("seeds_read_back")
            else ""
        )
        + (" (data signals read from a cache)" if meta["cached_signals"] else "")
        + ". Do not edit: rerun the command.*",
        "",
        f"{suite_line} Pretrained on by the backbone: "
        f"{', '.join(meta['pretrained']) or 'none'}; never seen: "
        f"{', '.join(sorted(set(meta['suite']) - set(meta['pretrained']))) or 'none'}.",
        "",
        f"Rule: the federation's default clustering step, `false_split_rate` "
        f"{meta['rules']['false_split_rate']}, `null_draws` {meta['rules']['null_draws']}, "
        f"`min_aggregation_size` 3, `max_clusters` 8. {meta['seeds']} seeds per row "
        f"(0-{meta['seeds'] - 1}"
        + (
            f"; single domains {meta['single_seeds']}, 0-{meta['single_seeds'] - 1}"
            if meta.get("single_seeds", meta["seeds"]) > meta["seeds"]
            else ""
        )
        + f"), {meta['rounds']} rounds from one cluster, "
        f"{meta['images']} images per participant, Dirichlet label skew alpha "
        f"{' and '.join(f'{a:g}' for a in meta['alphas'])} inside each domain. Path: each "
        f"participant's data signal (`reduction.signal` = `{meta.get('signal', 'data')}`) on "
        "`tiny-offline`, SecPC's clustering step replayed on the "
        "plaintext distances (the coded path decodes them exactly), a beacon of its own per "
        "seed; no training, so the accuracy review (which may merge back a split that cost "
        "accuracy) does not act here. Three-domain federations have 9 (3 + 3 + 3) or 12 "
        "(4 + 4 + 4) members: with 8, a two-member domain can never have a cluster of its own "
        "(`min_aggregation_size` 3).",
        "",
        "| case | domains | participants | alpha | target | measured | rounds parted per seed "
        "| flip-flops | met |",
        "|---|---|---:|---:|---|---:|---|---:|---|",
    ]
    for row in result["rows"]:
        judged = row["judged"]
        if row["kind"] == "single":
            rounds, flips = "-", "-"
        else:
            rounds = " ".join("-" if r is None else str(r) for r in row["parted_rounds"])
            flips = str(row["changes_after"])
        met = {True: "yes", False: "**no**", None: "not run"}[judged["met"]]
        if judged["met"] is not None and row["seeds"] < 10:
            met += f" ({row['seeds']} seeds, not the 10 the target counts)"
        if row["kind"] != "single" and not judged["flip_flops_met"]:
            met += " (**flip-flops**)"
        lines.append(
            f"| {row['kind']} | {_domains(row['setting'])} | {row['participants']} | "
            f"{row['alpha']:g} | {judged['target']} | {judged['measured']} | {rounds} | "
            f"{flips} | {met} |"
        )
    summary = result["summary"]
    lines += [
        "",
        "Targets over the suite: "
        + "; ".join(
            f"{TARGETS[k]}: {v['met']} of {v['rows']} rows met"
            for k, v in summary.items()
            if v["rows"]
        )
        + ".",
    ]
    value = result.get("added_value")
    if value:
        acc = result["accuracy_meta"]
        lines += [
            "",
            "## Clustering's added value (issue 29, item 4)",
            "",
            f"From `{acc['command']}` ({acc['date']}, {acc['seeds']} seeds, "
            f"{acc['participants']} participants, Dirichlet alpha {acc['alpha']:g}, "
            f"{acc['train_images_per_participant']} training and "
            f"{acc['test_images_per_participant']} held-out images each, "
            f"{acc['bench']['rounds']} rounds of {acc['bench']['epochs']} local epochs, "
            f"{acc['total_seconds']:.0f} s"
            + ("" if acc["complete"] else "; **incomplete: only the seeds that had finished**")
            + "). Points of mean participant accuracy, paired by seed; 95% Student-t interval "
            "over seeds. Targets: SecFPP never more than 0.5 point below SecFPP without "
            "clustering (mean), and at least 3 points above PromptFL on multi-domain settings.",
            "",
            "| setting | seeds | SecFPP | SecFPP's clusters (purity) at the end, per seed | "
            "SecFPP - no clustering [95% CI] | met | SecFPP - PromptFL [95% CI] | met |",
            "|---|---:|---:|---|---|---|---|---|",
        ]
        for row in value:
            cells = []
            for other, bound in (("secfpp-no-clustering", -0.005), ("promptfl", 0.03)):
                d = row.get(other)
                if d is None:
                    cells += ["not run", "-"]
                    continue
                low, high = d["ci95"]
                interval = "n/a" if math.isnan(low) else f"{_pct(low)}, {_pct(high)}"
                cells += [
                    f"{_pct(d['mean'])} [{interval}]",
                    "yes" if d["mean"] >= bound else "**no**",
                ]
            seeds = max((row[o]["seeds"] for o in row if isinstance(row[o], dict)), default=0)
            found = ", ".join(
                f"{c} ({p:.2f})"
                for c, p in zip(row["secfpp_clusters"], row["secfpp_purity"], strict=True)
            )
            lines.append(
                f"| {_domains(row['setting'])} | {seeds} | {row['secfpp']:.3f} | {found} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines) + "\n"


def _summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out = {k: {"rows": 0, "met": 0} for k in TARGETS}
    for row in rows:
        judged = row["judged"]
        if judged["met"] is not None:
            out[row["kind"]]["rows"] += 1
            out[row["kind"]]["met"] += int(judged["met"])
        if row["kind"] != "single":
            out["flip-flops"]["rows"] += 1
            out["flip-flops"]["met"] += int(judged["flip_flops_met"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.clustering.heldout", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--single-seeds",
        type=int,
        default=None,
        help="seeds of the single-domain rows when more than --seeds (their false-split "
        "rate is judged against 5%%: ten seeds cannot tell 5%% from 10%%)",
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.5, 5.0])
    parser.add_argument("--images", type=int, default=300, help="images per participant")
    parser.add_argument("--pair-size", type=int, default=8)
    parser.add_argument("--triple-sizes", type=int, nargs="+", default=[9, 12])
    parser.add_argument("--single-size", type=int, default=8)
    parser.add_argument(
        "--role",
        default="held-out",
        choices=("held-out", "tuning"),
        help="the suite: the held-out domains (default) or, as a control, the tuning ones",
    )
    parser.add_argument("--false-split-rate", type=float, default=None)
    parser.add_argument(
        "--signal",
        choices=DATA_SIGNALS,
        default=DEFAULT_SIGNAL,
        help="the data signal replayed (reduction.signal; default: a new federation's)",
    )
    parser.add_argument("--signals", type=Path, default=None, help="an .npz data-signal cache")
    parser.add_argument(
        "--accuracy", type=Path, default=None, help="a bench.accuracy JSON to report"
    )
    parser.add_argument("--json", type=Path, default=Path("runs/bench/held-out.json"))
    parser.add_argument("--md", type=Path, default=None, help="also write this markdown report")
    parser.add_argument("--jobs", type=int, default=1, help="processes, seeds shared out")
    parser.add_argument(
        "--partial",
        type=Path,
        default=None,
        help="a folder of per-seed results: finished seeds are written there and read back",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--render",
        type=Path,
        default=None,
        help="no run: read this result JSON (from --json), add --accuracy, write --json, --md",
    )
    args = parser.parse_args(argv)
    if args.render is not None:
        return _write(json.loads(args.render.read_text()), args)
    from demo.data import DOMAINS
    from demo.data.registry import domains_with_role

    domains = domains_with_role(args.role)
    if args.quick:
        args.seeds, args.rounds, args.alphas, args.images = 2, 3, [0.5], 60
        args.triple_sizes = [9]
    cases = suite(
        domains,
        pair_size=args.pair_size,
        triple_sizes=tuple(args.triple_sizes),
        single_size=args.single_size,
    )
    if args.quick:
        cases = [next(c for c in cases if c.kind == k) for k in ("pair", "triple", "single")]
    from bench.report import machine

    load_before = os.getloadavg()
    started = time.monotonic()
    cache: dict[str, NDArray[Any]] = {}
    if args.signals is not None and args.signals.exists():
        with np.load(args.signals) as stored:
            cache = {k: stored[k] for k in stored.files}
    cached = bool(cache)
    rows, cpu, read_back = run(
        cases,
        alphas=args.alphas,
        seeds=args.seeds,
        rounds=args.rounds,
        images=args.images,
        cache=cache,
        false_split_rate=args.false_split_rate,
        jobs=args.jobs,
        partial=args.partial,
        signal=args.signal,
        single_seeds=args.single_seeds,
    )
    if args.signals is not None:
        args.signals.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.signals, **cache)  # type: ignore[arg-type]
    config = federation_config(args.false_split_rate)
    about = machine()
    result: dict[str, Any] = {
        "meta": {
            "command": "python -m bench.clustering.heldout "
            + " ".join(sys.argv[1:] if argv is None else argv),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{about['cpu']} ({about['cores']} cores, Python {about['python']}, "
            "one torch and BLAS thread)",
            "load_before": [round(v, 2) for v in load_before],
            "load_after": [round(v, 2) for v in os.getloadavg()],
            "seconds": round(time.monotonic() - started, 1),
            "cpu_seconds": round(cpu, 1),
            "seeds_read_back": read_back,
            "jobs": args.jobs,
            "cached_signals": cached,
            "quick": args.quick,
            "role": args.role,
            "suite": list(domains),
            "tuning": list(domains_with_role("tuning")),
            "pretrained": [d for d in domains if DOMAINS[d].pretrained],
            "rules": {"false_split_rate": config.false_split_rate, "null_draws": config.null_draws},
            "signal": args.signal,
            "seeds": args.seeds,
            "single_seeds": max(args.seeds, args.single_seeds or 0),
            "rounds": args.rounds,
            "images": args.images,
            "alphas": args.alphas,
        },
        "targets": TARGETS,
        "rows": rows,
        "summary": _summary(rows),
    }
    return _write(result, args)


def _write(result: dict[str, Any], args: argparse.Namespace) -> int:
    """Attach ``--accuracy`` (when given) and write ``--json`` and ``--md``."""
    if args.accuracy is not None:
        accuracy = json.loads(args.accuracy.read_text())
        result["accuracy_meta"] = accuracy["meta"]
        result["added_value"] = added_value(accuracy)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {args.json}")
    if args.md is not None:
        args.md.write_text(render(result))
        print(f"written: {args.md}")
    print(f"{result['meta']['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

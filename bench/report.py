"""Every published performance figure from one run: writes ``docs/results/performance.md``.

One command runs, one after the other in child processes of this one (one process tree,
one run, each child with one BLAS thread), every benchmark whose figures the README and
the docs quote, each with ``--json`` so that nothing is parsed from a printed table:

1. the crypto round (:mod:`bench.crypto.round`, CPU seconds): the secure-aggregation round
   of ``N`` participants (all-to-all, a fraction ``--dropout`` dropping after sharing), the
   plain float64 sum of the same vectors, the coded SecPC distance stage, field matmul
   against float64 GEMM;
2. the committee benchmark (:mod:`bench.crypto.committee`): summed CPU per stage with a committee
   (the 2^-40 bound's size), at ``N = 1,000`` and at ``N = 10,000`` (growth between them);
3. error-correcting decode (:mod:`bench.crypto.decode`);
4. Flower 1.41's real SecAgg+ (:mod:`bench.crypto.flower_secagg`, in its own venv
   ``.venv-flower``; same ``N``, ``d`` and dropout fraction as 1. and 2., one thread);
5. the HTTP load benchmark (:mod:`bench.load.run`, small); with ``--http-n1000`` also at
   N = 1,000 with one and two replicas (issue 30's latency target), about 12 minutes more;
6. the re-randomized distance stage against the plain one (:mod:`bench.crypto.rerandomize`);
7. agreeing on the request before answering (:mod:`bench.crypto.attestation`);
8. request bodies against coordinator memory and ``/healthz`` (:mod:`bench.load.body_memory`);
9. dashboard page times (:mod:`bench.load.dashboard`).

The CUDA section is the one exception to "one run": the machines that run this have no GPU,
so it copies the tables ``bench.participant.cuda`` wrote on lent GPU machines
(``docs/results/cuda.md``), each with its card and date.

The file gets the date, the machine (cores, CPU model, load average before and after),
the exact command, every figure and the same-run ratios: SecFPP's round against Flower's
summed CPU at the same ``N``, ``d`` and dropout, and the round against the plain sum. A
benchmark that fails or is unavailable (flwr not installed) is written as such, with the
reason, and the command exits with status 1 (missing Flower alone: 0, stated in the file).

Ratios are only ever taken between figures of this one run: the machine may be shared,
so absolute seconds move with its load (recorded before and after), ratios much less.

Usage::

    python -m bench.report                  # full: about 6-15 min on an idle 2-core machine
    python -m bench.report --http-n1000     # and the N = 1,000 HTTP runs (about 12 min more)
    python -m bench.report --quick --out /tmp/perf.md   # smoke run (tests), about 1 min
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.crypto import attestation, rerandomize
from bench.load import body_memory, dashboard

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "results" / "performance.md"
DEFAULT_FLOWER = ROOT / ".venv-flower" / "bin" / "python"
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Sizes:
    """What each benchmark runs: ``n``/``d`` of the round (and Flower's), the committee's."""

    round_n: tuple[int, ...]
    d: int
    secpc_n: tuple[int, ...]
    committee: tuple[str, ...]  # extra arguments of bench.crypto.committee
    committee_n: int
    committee_large: tuple[str, ...]  # bench.crypto.committee at the large N (growth)
    decode_sizes: tuple[int, ...]
    flower_n: tuple[int, ...]  # Flower neighbourhood N (the round's and the committee's N)
    flower_a2a: tuple[int, ...]  # Flower all-to-all N (num_shares = N)
    flower_neighbours: int
    flower_threshold: int
    load: tuple[str, ...]  # arguments of bench.load.run
    matmul_quick: bool
    rerandomize: tuple[str, ...] = ("--n", "100", "1000", "--sample", "5")
    attestation: tuple[str, ...] = ("--rounds", "2")
    bodies: tuple[str, ...] = ()  # bench.load.body_memory: 8 bodies of 15 MiB, every scenario
    dashboard: tuple[str, ...] = ()  # bench.load.dashboard: 100 participants, 50 rounds


FULL = Sizes(
    round_n=(50, 100),
    d=100_000,
    secpc_n=(100,),
    committee=("--n", "1000", "--sample", "3"),
    committee_n=1000,
    committee_large=("--n", "10000", "--sample", "2", "--committee-only"),
    decode_sizes=(512, 1024),
    flower_n=(100, 1000),
    flower_a2a=(50,),
    flower_neighbours=15,
    flower_threshold=4,
    load=("--participants", "64", "--dim", "100000", "--rounds", "2"),
    matmul_quick=False,
)
QUICK = Sizes(
    round_n=(10,),
    d=2048,
    secpc_n=(32,),
    committee=tuple(
        [
            "--n",
            "150",
            "--d",
            "2048",
            "--sample",
            "1",
            "--collusion",
            "0.1",
            "--also-collusion",
            "0",
            "--committee-only",
        ]
    ),
    committee_n=150,
    committee_large=(
        *("--n", "300", "--d", "2048", "--sample", "1", "--collusion", "0.1"),
        *("--also-collusion", "0", "--committee-only"),
    ),
    decode_sizes=(64,),
    flower_n=(10,),  # N = 150 with 7 holders: a client is left with < t live holders
    flower_a2a=(10,),
    flower_neighbours=7,
    flower_threshold=3,
    load=(
        *("--participants", "4", "--dim", "1000", "--rounds", "1", "--sqlite", "--poll", "0.2"),
        *("--train-median", "0.5"),  # the smoke run times no training (default 25 s)
    ),
    matmul_quick=True,
    rerandomize=("--n", "64", "200", "--sample", "1"),
    attestation=("--rounds", "1"),
    bodies=("--clients", "2", "--mib", "1", "--scenario", "unauthenticated"),
    dashboard=("--participants", "10", "--rounds", "4", "--repeat", "3"),
)


@dataclass
class Step:
    """One benchmark run: its command, status, wall seconds and JSON figures."""

    name: str
    argv: list[str]
    rc: int | None = None
    wall_s: float = 0.0
    data: dict[str, Any] | None = None
    note: str = ""
    tail: list[str] = field(default_factory=list)


def machine() -> dict[str, Any]:
    """Cores, CPU model, Python and numpy versions, load average now."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import numpy as np

    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "load": os.getloadavg(),
    }


def _git() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' (with uncommitted changes)' if dirty else ''}" if head else "unknown"


def run_step(step: Step, work: Path, timeout: float) -> Step:
    """Runs ``step.argv`` + ``--json FILE`` with one BLAS thread; fills rc, wall, data."""
    out = work / f"{step.name}.json"
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [*step.argv, "--json", str(out)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        step.rc = done.returncode
        step.tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
    except subprocess.TimeoutExpired:
        step.rc, step.note = -1, f"stopped after {timeout:.0f} s"
    step.wall_s = time.perf_counter() - start
    if out.exists():
        step.data = json.loads(out.read_text())
    print(f"  {step.name}: rc {step.rc}, {step.wall_s:.0f} s", flush=True)
    return step


HTTP_N1000 = (
    *("--participants", "1000", "--collusion", "0.1", "--poll", "5", "--rounds", "2"),
    *("--round-timeout", "900", "--target-max", "15", "--target-p95", "5"),
)
"""``bench.load.run`` at N = 1,000 (issue 30's HTTP target: committee of 81, training
arrivals, PostgreSQL), as docs/results/load.md runs it; ``--http-n1000`` adds it with one and
with two replicas (about 6 minutes each on the 2-core machine)."""
HTTP_STEPS = ("load_n1000", "load_n1000_2")
"""The names of those two steps (one replica, two)."""


def plan(
    sizes: Sizes,
    flower: Path,
    dropout: float,
    load_extra: list[str],
    *,
    http_n1000: bool = False,
) -> list[Step]:
    """The benchmark commands of one report (with ``http_n1000``, two more)."""
    py = sys.executable
    d = str(sizes.d)
    steps = [
        Step(
            "crypto_round",
            [
                *(py, "-m", "bench.crypto.round", "--cpu", "--warm-rings"),
                *("--dropout", str(dropout), "--d", d),
                *("--n", *map(str, sizes.round_n), "--secpc-n", *map(str, sizes.secpc_n)),
                *(["--quick"] if sizes.matmul_quick else []),
            ],
        ),
        Step(
            "committee",
            [py, "-m", "bench.crypto.committee", *sizes.committee, "--dropout", str(dropout)],
        ),
        Step(
            "committee_large",
            [py, "-m", "bench.crypto.committee", *sizes.committee_large, "--dropout", str(dropout)],
        ),
        Step("decode", [py, "-m", "bench.crypto.decode", "--sizes", *map(str, sizes.decode_sizes)]),
        Step(
            "flower_secagg",
            [
                *(str(flower), "-m", "bench.crypto.flower_secagg"),
                *("--d", d, "--dropout", str(dropout)),
                *("--n", *map(str, sizes.flower_n), "--all-to-all", *map(str, sizes.flower_a2a)),
                *("--neighbours", str(sizes.flower_neighbours)),
                *("--threshold", str(sizes.flower_threshold)),
            ],
        ),
        Step("load", [py, "-m", "bench.load.run", *sizes.load, *load_extra]),
        Step("rerandomize", [py, "-m", "bench.crypto.rerandomize", *sizes.rerandomize]),
        Step("attestation", [py, "-m", "bench.crypto.attestation", *sizes.attestation]),
        Step("bodies", [py, "-m", "bench.load.body_memory", *sizes.bodies]),
        Step("dashboard", [py, "-m", "bench.load.dashboard", *sizes.dashboard]),
    ]
    if http_n1000:
        steps += [
            Step(name, [py, "-m", "bench.load.run", *HTTP_N1000, "--replicas", str(replicas)])
            for name, replicas in zip(HTTP_STEPS, (1, 2), strict=True)
        ]
    if not flower.exists():
        next(s for s in steps if s.name == "flower_secagg").note = (
            f"not run: {flower} does not exist (install: python3 -m venv .venv-flower && "
            ".venv-flower/bin/pip install flwr==1.41.0 numpy==2.4.6)"
        )
    return steps


# ------------------------------------------------------------------ the markdown file


def _f(x: float, digits: int = 3) -> str:
    return f"{x:,.{digits}f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:,.1f}x" if b > 0 else "n/a"


def _flower(step: Step, mode: str, n: int) -> dict[str, Any] | None:
    if step.data is None:
        return None
    for r in step.data["results"]:
        if r["mode"] == mode and r["n"] == n and r["completed"]:
            return dict(r)
    return None


def render(
    steps: dict[str, Step],
    *,
    command: str,
    before: dict[str, Any],
    after: tuple[float, float, float],
    started: dt.datetime,
    wall_s: float,
    sizes: Sizes,
    dropout: float,
    quick: bool = False,
) -> str:
    """The markdown of ``docs/results/performance.md`` (sections fixed; tests check them)."""
    load0 = ", ".join(f"{x:.2f}" for x in before["load"])
    load1 = ", ".join(f"{x:.2f}" for x in after)
    lines = [
        "# Performance: every figure from one run",
        "",
        "Generated by `python -m bench.report`; do not edit by hand. Every performance figure "
        "the README and the docs quote comes from this file. Every figure is from the one run "
        "below except the CUDA section's, which needs a GPU and is copied from the lent GPU "
        "machines' runs with their dates. Ratios are taken only between figures of this one "
        "run.",
        *(
            [
                "",
                "**Quick (smoke) sizes**: this file was written by `--quick`, whose sizes are "
                "far below the published settings; regenerate it with `python -m bench.report` "
                "on a quiet machine before quoting any figure.",
            ]
            if quick
            else []
        ),
        "",
        "## Run",
        "",
        f"- date: {started:%Y-%m-%d %H:%M} UTC; {wall_s:.0f} s for the whole report",
        f"- command: `{command}`",
        f"- code: {_git()}",
        f"- machine: {before['cores']} cores, {before['cpu']}; Python {before['python']}, "
        f"numpy {before['numpy']}",
        f"- load average (1, 5, 15 min) before: {load0}; after: {load1}",
        "- every benchmark in its own child process, one BLAS thread; seconds are CPU seconds "
        "(`time.process_time`) unless a table says wall",
        "",
        "| benchmark | status | wall s | command |",
        "|---|---|---:|---|",
    ]
    for s in steps.values():
        status = _status(s)
        lines.append(f"| {s.name} | {status} | {s.wall_s:.0f} | `{shlex.join(_shown(s.argv))}` |")
    lines += ["", "## Same-run ratios", ""]
    lines += _ratios(steps, sizes, dropout)
    lines += ["", "## Crypto round", ""]
    lines += _crypto(steps["crypto_round"])
    lines += ["", "## Committee", ""]
    lines += _committee(steps["committee"])
    lines += ["", "## Committee growth", ""]
    lines += _committee(steps["committee_large"])
    lines += [""]
    lines += _growth(steps["committee"], steps["committee_large"])
    lines += ["", "## Decode", ""]
    lines += _decode(steps["decode"])
    lines += ["", "## Flower SecAgg+", ""]
    lines += _flower_table(steps["flower_secagg"])
    lines += ["", "## Load", ""]
    lines += _load(steps["load"])
    for name in HTTP_STEPS:
        if name in steps:
            lines += ["", f"## Load at N = 1,000 ({name})", ""]
            lines += _load(steps[name])
    for title, name, section in SECTIONS:
        lines += ["", f"## {title}", ""]
        step = steps.get(name)
        if step is None:
            lines.append("Not part of this run.")
        else:
            lines += section(step.data) if step.data is not None else _missing(step)
    lines += ["", "## CUDA", ""]
    lines += cuda_section()
    lines += ["", "## Targets (issue 30): met or missed, and why", ""]
    lines += targets(steps)
    failed = [s for s in steps.values() if s.rc is not None and not succeeded(s)]
    if failed:
        lines += ["", "## Failures", ""]
        for s in failed:
            lines += [f"- {s.name}: {s.note or f'rc {s.rc}'}", "", "```", *s.tail, "```"]
    return "\n".join(lines) + "\n"


SECTIONS: tuple[tuple[str, str, Callable[[dict[str, Any]], list[str]]], ...] = (
    ("Re-randomized distances", "rerandomize", rerandomize.section),
    ("Agreement on the request", "attestation", attestation.section),
    ("Request bodies", "bodies", body_memory.section),
    ("Dashboard", "dashboard", dashboard.section),
)
"""The sections whose benchmark renders its own tables: (title, step, renderer)."""
CUDA_RECORD = ROOT / "docs" / "results" / "cuda.md"


def cuda_section(record: Path = CUDA_RECORD) -> list[str]:
    """The participant's step on CUDA. The report times the CPU paths (its machine usually has
    no GPU, and a lent GPU machine's time is too short for the whole report), so this
    section copies the tables that ``bench.participant.cuda`` wrote on lent GPU machines
    (``record``: their output, unedited, each with its card, driver and date), one heading
    level down; without the record it says so."""
    intro = (
        "Not timed by this run (it times the CPU paths; the CUDA path is timed by its own "
        "benchmark on a CUDA device). "
        f"Copied unedited from [{record.name}]({record.name}), the output of "
        "`python -m bench.participant.cuda --out FILE` on lent GPU machines, each table with "
        "its card and date:"
    )
    if not record.exists():
        return [f"No CUDA figures: {record.name} does not exist."]
    text = record.read_text(encoding="utf-8").splitlines()
    first = next((i for i, line in enumerate(text) if line.startswith("## ")), None)
    if first is None:
        return [f"No CUDA figures: {record.name} holds no table section."]
    body = [f"#{line}" if line.startswith("#") else line for line in text[first:]]
    return [intro, "", *body]


def succeeded(step: Step) -> bool:
    """Ran and wrote its figures. ``bench.load.run`` exits 1 when it misses its own latency
    targets (issue 13), with every figure written: that is a result, not a failure."""
    if step.data is None:
        return False
    return step.rc == 0 or (step.name.startswith("load") and step.rc == 1)


def _status(step: Step) -> str:
    if succeeded(step):
        return "ok" if step.rc == 0 else "ok (missed its latency targets)"
    return step.note or f"failed (rc {step.rc})"


def _shown(argv: list[str]) -> list[str]:
    """The command as one would type it in the repository root."""
    head = argv[0]
    if head == sys.executable:
        head = "python"
    elif Path(head).is_absolute():
        with contextlib.suppress(ValueError):
            head = str(Path(head).relative_to(ROOT))
    return [head, *argv[1:]]


def _table(intro: str, header: str, align: str, rows: Iterable[str]) -> list[str]:
    """``intro``, a blank line, then a Markdown table: ``header``, ``align`` and ``rows``."""
    return [intro, "", header, align, *rows]


def _missing(step: Step) -> list[str]:
    return [f"Not available in this run: {step.note or f'the benchmark failed (rc {step.rc})'}."]


def _ratios(steps: dict[str, Step], sizes: Sizes, dropout: float) -> list[str]:
    crypto, committee, flower = steps["crypto_round"], steps["committee"], steps["flower_secagg"]
    lines = [
        f"SecFPP and Flower at the same `N`, `d = {sizes.d:,}`, a fraction {dropout:g} dropping "
        "after sharing, one thread, summed CPU seconds over every participant and the server "
        "(coordinator).",
        "",
        "| comparison | SecFPP s | other s | ratio |",
        "|---|---:|---:|---:|",
    ]
    if crypto.data is not None:
        for r in crypto.data["rounds"]:
            n = r["n"]
            lines.append(
                f"| round N = {n} (all-to-all, K = {r['k']}, T = {r['t']}) vs plain float64 sum "
                f"| {_f(r['total'])} | {_f(r['plain'], 5)} "
                f"| round = {r['total'] / r['plain']:,.0f}x the sum |"
            )
            for mode, what in (
                ("neighbourhood", f"{sizes.flower_neighbours} share holders"),
                ("all-to-all", "all-to-all"),
            ):
                fr = _flower(flower, mode, n)
                if fr is not None:
                    lines.append(
                        f"| round N = {n} vs Flower SecAgg+ ({what}, t = {fr['threshold']}) "
                        f"| {_f(r['total'])} | {_f(fr['summed_s'])} "
                        f"| Flower = {_ratio(fr['summed_s'], r['total'])} SecFPP |"
                    )
    if committee.data is not None:
        for row in committee.data["aggregation"]:
            if row["c"] < row["n"]:
                fr = _flower(flower, "neighbourhood", row["n"])
                if fr is not None:
                    lines.append(
                        f"| committee aggregation N = {row['n']}, {row['label']} (stage total) "
                        f"vs Flower SecAgg+ ({sizes.flower_neighbours} share holders) "
                        f"| {_f(row['total_s'])} | {_f(fr['summed_s'])} "
                        f"| Flower = {_ratio(fr['summed_s'], row['total_s'])} SecFPP |"
                    )
    if flower.data is None:
        lines += ["", f"Flower: {flower.note or 'failed'}; no SecFPP-vs-Flower ratio this run."]
    return lines


def _crypto(step: Step) -> list[str]:
    if step.data is None:
        return _missing(step)
    rounds = _table(
        "Secure-aggregation round, all-to-all (every participant shares to every other, "
        "N/4 colluders, the dropped fraction's results missing):",
        "| N | d | K | T | dropped | share+seal s | open+sum s | decode s | round s | plain sum s "
        "| round / plain | max error |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        (
            f"| {r['n']} | {r['d']:,} | {r['k']} | {r['t']} | {r['dropped']} "
            f"| {_f(r['share_seal'])} | {_f(r['open_sum'])} | {_f(r['decode'])} "
            f"| {_f(r['total'])} | {_f(r['plain'], 5)} | {r['total'] / r['plain']:,.0f} "
            f"| {r['max_error']:.1e} |"
            for r in step.data["rounds"]
        ),
    )
    secpc = _table(
        "Coded SecPC distance stage (r = 128, 8 clusters and their probes), every participant:",
        "| N | K | T | values | share s | compute s | decode s | total s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        (
            f"| {s['n']} | {s['k']} | {s['t']} | {s['values']} | {_f(s['share'])} "
            f"| {_f(s['compute'])} | {_f(s['decode'])} | {_f(s['total'])} |"
            for s in step.data["secpc"]
        ),
    )
    matmul = _table(
        "Field matmul (p = 2^31 - 1) against float64 GEMM of the same shape, best of 5:",
        "| shape | field s | GEMM s | GEMM / field |",
        "|---|---:|---:|---:|",
        (
            f"| {tuple(m['shape'])} | {_f(m['field'], 5)} | {_f(m['gemm'], 5)} "
            f"| {m['gemm'] / m['field']:.0%} |"
            for m in step.data["matmul"]
        ),
    )
    return [*rounds, "", *secpc, "", *matmul]


def _committee(step: Step) -> list[str]:
    if step.data is None:
        return _missing(step)
    data = step.data
    rows = [
        f"N = {data['n']:,}, d = {data['d']:,}, r = {data['r']}, f_d = {data['dropout']:g}; "
        f"share: mean of {data['sample']} participants (the stage total multiplies by N). "
        "Stage total = N x share + c x member + decode (summed over every machine); "
        "path = share + member + decode.",
        "",
    ]
    for stage in ("aggregation", "distances"):
        rows += [
            f"{stage}:",
            "",
            "| setting | N | c | K | T | share s | member s | decode s | path s | total s "
            "| MB up / participant | MB in / member |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in data[stage]:
            rows.append(
                f"| {r['label']} | {r['n']:,} | {r['c']} | {r['k']} | {r['t']} "
                f"| {r['share_s']:.4f} | {_f(r['member_s'])} | {_f(r['decode_s'])} "
                f"| {_f(r['path_s'], 2)} | {_f(r['total_s'], 1)} "
                f"| {r['bytes_up_per_participant'] / 2**20:,.2f} "
                f"| {r['bytes_in_per_member'] / 2**20:,.1f} |"
            )
        rows.append("")
    if data.get("distances_refused"):
        rows.append(f"Distance stage refused by the parameters: {data['distances_refused']}")
        if any(r.get("clip_lowered") for r in data["distances"]):
            rows.append(
                "Its rows above were timed anyway, on a clip lowered until the field holds the "
                "values (the cost does not depend on the clip; uniform shares, a random "
                "codeword): what the stage would cost, not a federation one can create."
            )
    rows.append(f"Peak resident memory of the benchmark process: {data['peak_rss_mb']:,.0f} MB.")
    return rows


def _growth(small: Step, large: Step) -> list[str]:
    """Stage totals at the larger N over those at the smaller N, per collusion fraction,
    committee rows only (the small run also holds all-to-all rows of the same ``f_c``)."""
    if small.data is None or large.data is None:
        return ["No growth figures: one of the committee runs is missing."]
    rows = [
        f"From N = {small.data['n']:,} to N = {large.data['n']:,} "
        f"(x{large.data['n'] / small.data['n']:g}), same f_c (c from the 2^-40 bound at each N):",
        "",
        "| stage | f_c | c | total s | c (large) | total s (large) | growth | member s growth |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]

    def committees(data: dict[str, Any], stage: str) -> list[dict[str, Any]]:
        return [r for r in data[stage] if str(r["label"]).startswith("committee")]

    for stage in ("aggregation", "distances"):
        by_fc = {r["label"].split("fc=")[1]: r for r in committees(small.data, stage)}
        for r in committees(large.data, stage):
            fc = r["label"].split("fc=")[1]
            if fc in by_fc:
                a = by_fc[fc]
                rows.append(
                    f"| {stage} | {fc} | {a['c']} | {_f(a['total_s'], 1)} | {r['c']} "
                    f"| {_f(r['total_s'], 1)} | x{r['total_s'] / a['total_s']:.1f} "
                    f"| x{r['member_s'] / a['member_s']:.1f} |"
                )
    return rows


def _decode(step: Step) -> list[str]:
    if step.data is None:
        return _missing(step)
    return _table(
        "Error-correcting decode, median of 3 (wall and CPU):",
        "| N | stage | K | T | R | errors | L | wall s | CPU s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        (
            f"| {r['n']} | {r['stage']} | {r['k']} | {r['t']} | {r['r']} | {r['errors']} "
            f"| {r['length']} | {_f(r['wall_s'])} | {_f(r['cpu_s'])} |"
            for r in step.data["rows"]
        ),
    )


def _flower_table(step: Step) -> list[str]:
    if step.data is None:
        return _missing(step)
    return _table(
        f"flwr {step.data['flwr']}, real `SecAggPlusWorkflow` in process, d = {step.data['d']:,}, "
        f"dropout {step.data['dropout']:g} after sharing:",
        "| setting | N | share holders | t | client s (mean) | server s | summed s | completed |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
        (
            f"| {r['label']} | {r['n']} | {r['share_holders']} | {r['threshold']} "
            f"| {_f(r['client_s'])} | {_f(r['server_s'])} | {_f(r['summed_s'])} "
            f"| {r['completed']} |"
            for r in step.data["results"]
        ),
    )


def _load(step: Step) -> list[str]:
    if step.data is None:
        return _missing(step)
    data, a = step.data, step.data["args"]
    o = data["overall"]
    backend = "SQLite" if a.get("sqlite") else "PostgreSQL"
    rows = _table(
        f"{a['participants']} participants over HTTP, d = {a['dim']:,}, {a['rounds']} round(s), "
        f"{backend}, {a['replicas']} replica(s); latencies are wall-clock:",
        "| endpoint | count | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|",
        (
            f"| {name} | {p['count']} | {1000 * p['p50']:.0f} | {1000 * p['p95']:.0f} "
            f"| {1000 * p['p99']:.0f} | {1000 * p['max']:.0f} |"
            for name, p in [*data["endpoints"].items(), ("all participant", o)]
            if p["count"]
        ),
    )
    cpu = data["cpu_seconds"]
    rows += [
        "",
        f"Coordinator CPU {cpu['coordinator']:.1f} s "
        f"({data.get('coordinator_cpu_ms_per_request', 0):.2f} ms per request); "
        f"{data.get('rounds_per_minute', 0):.2f} rounds per minute; 5xx answers: "
        f"{data['server_errors']}.",
    ]
    return rows


# ------------------------------------------------------------------ targets

ROUND_TARGET_S = 0.4
GEMM_TARGET = 0.70
COMMITTEE_TARGETS_S = {"aggregation": 3.0, "distances": 1.5}
LARGE_TARGET_S = 30.0
ENCODING_SHAPE = (100, 75, 2000)  # N = 100: P x (K + T) @ (K + T) x d / K
HTTP_P95_S, HTTP_MAX_S = 5.0, 15.0


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "not in this run"}[met]


def _parts(stage: dict[str, Any]) -> str:
    """The stage total's parts of one committee row: N x share, c x member, decode."""
    share, member = stage["n"] * stage["share_s"], stage["c"] * stage["member_s"]
    decode = stage["decode_s"]
    total = share + member + decode
    return (
        f"N x share {_f(share, 1)} s ({share / total:.0%}), c x member {_f(member, 1)} s "
        f"({member / total:.0%}), decode {_f(decode, 2)} s"
    )


def largest_distance_n(hi: int = 100_000) -> int:
    """The largest ``N`` whose default distance field holds one cluster of everybody
    (:func:`secfpp.crypto.codes.check_default_fields` by bisection; it is monotone in N)."""
    from secfpp.crypto.codes import check_default_fields
    from secfpp.crypto.errors import ParameterError

    def fits(n: int) -> bool:
        try:
            check_default_fields(n)
        except ParameterError:
            return False
        return True

    lo = 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


WHY_ROUND = (
    "The round is the participants' sharing more than anything: every participant encodes its "
    "update with the exact field product of the next target and seals one AES-GCM envelope per "
    "recipient (N envelopes each, N^2 per round, each with its own HKDF-derived key and "
    "associated data). The plain sum reads each vector once; the round must also draw the T "
    "random chunks of every participant from the operating system's CSPRNG, encode, "
    "authenticate and encrypt N shares, and open and sum them again."
)
WHY_GEMM = (
    "The aggregation field is p = 2^31 - 1: a product of two entries needs 62 bits, a float64 "
    "sum is exact only below 2^53, so the right operand is cut into 16-bit limbs and every "
    "field product is one GEMM with twice the inner dimension, at most 50% of a same-shape "
    "GEMM before its reductions. One GEMM per product would need p < 2^23 at these inner "
    "dimensions (k p^2 / 2 < 2^53); such a field leaves a sum of N = 1,000 updates about 12 "
    "fractional bits instead of 20, and N = 10,000 about 8. numpy has no integer GEMM (int8 "
    "or int16 inputs, int32 accumulation, as VNNI or tensor cores offer) to go around float64."
)
WHY_HTTP = (
    "The slowest requests of these runs come at the two moments when most of the 1,000 members "
    "ask at once: when a round publishes (each member fetches its outcome and reports its "
    "metrics, 2,000 requests, while the others keep polling) and when the committee downloads "
    "its inboxes (each of the 21 members that get zero-sharing vectors receives about 15 MiB "
    "of them, besides its shares, in a round of one cluster). One coordinator process, "
    "PostgreSQL and the load generator's 1,000 members share the machine's two cores, so a "
    "task poll that arrives then waits for them; p95 stays well inside its target, the "
    "maximum moves by a few seconds from run to run around 15 s. Not built: spreading the "
    "end-of-round requests (the poll hint spreads only the polls) and serving an inbox as one "
    "stored object instead of building it per request."
)
WHY_COMMITTEE = (
    "A stage total is N x share + c x member + decode, summed over every machine. The "
    "N x share part is each participant's own encoding and sealing of its d values for the c "
    "members, the work no committee can take from it; it grows with N and with d at any c."
)
WHY_DISTANCE_FIELD = (
    "The distance stage's values include centre-to-centre distances of two halves of a "
    "cluster, scaled to integers by their sizes |A| |B| <= N^2 / 4; their squares summed over "
    "r = 128 coordinates exceed p = 2^61 - 1 above the N given here at the default clip even "
    "with zero fractional bits. A larger N needs a wider field (two 61-bit primes and the "
    "Chinese remainder theorem, about twice the cost) or a cap on the size of a cluster whose "
    "distances are computed; neither is built."
)


def targets(steps: dict[str, Step]) -> list[str]:
    """Issue 30's targets against this run's figures: met, missed or not measured, where the
    time goes (computed from the figures) and why what is missed is not cut further."""
    lines = [
        'Each target of issue 30 against this run\'s figures (CPU seconds). "where it goes" is '
        'computed from the tables above; "why" says what bounds it. A target is only judged '
        "at its own size: a `--quick` run judges none.",
        "",
        "| target | measured | verdict | where it goes |",
        "|---|---|---|---|",
    ]
    why: list[str] = []
    crypto = steps["crypto_round"].data
    rnd = next(
        (r for r in (crypto or {}).get("rounds", []) if r["n"] == 100 and r["d"] == 100_000), None
    )
    if rnd is None:
        goal = f"N = 100, d = 100,000 round <= {ROUND_TARGET_S} s"
        lines.append(f"| {goal} | - | not in this run | |")
    else:
        met = rnd["total"] <= ROUND_TARGET_S
        gemm = next(
            (m["gemm"] for m in crypto["matmul"] if tuple(m["shape"]) == ENCODING_SHAPE), None
        )
        where = (
            f"share+seal {_f(rnd['share_seal'])} s of {_f(rnd['total'])}"
            + (
                f" (quantize {_f(rnd['quantize'])}, encode {_f(rnd['encode'])}, pack+seal "
                f"{_f(rnd['pack_seal'])})"
                if "encode" in rnd
                else ""
            )
            + f"; open+sum {_f(rnd['open_sum'])}; decode {_f(rnd['decode'])}"
        )
        if gemm is not None and "encode" in rnd:
            where += (
                f"; 100 float64 GEMMs of the encoding's shape take {_f(100 * gemm)} s: with the "
                f"encoding at GEMM speed and mask drawing free the round would still take "
                f"{_f(rnd['total'] - rnd['encode'] + 100 * gemm)} s"
            )
        lines.append(
            f"| N = 100, d = 100,000 round <= {ROUND_TARGET_S} s | {_f(rnd['total'])} s "
            f"({rnd['total'] / rnd['plain']:,.0f}x the plain sum) | {_verdict(met)} | {where} |"
        )
        if not met:
            why.append(f"- **The N = 100 round.** {WHY_ROUND}")
    matmul = [m for m in (crypto or {}).get("matmul", []) if m["shape"][2] >= 2000]
    if not matmul:
        lines.append(f"| field products >= {GEMM_TARGET:.0%} of GEMM | - | not in this run | |")
    else:
        fractions = [m["gemm"] / m["field"] for m in matmul]
        met = min(fractions) >= GEMM_TARGET
        shown = ", ".join(
            f"{tuple(m['shape'])} {f:.0%}" for m, f in zip(matmul, fractions, strict=True)
        )
        lines.append(
            f"| field products >= {GEMM_TARGET:.0%} of float64 GEMM (main shapes) "
            f"| {min(fractions):.0%}-{max(fractions):.0%} | {_verdict(met)} | {shown} |"
        )
        if not met:
            why.append(f"- **Field products.** {WHY_GEMM}")
    committee_missed = False
    for step_name, n, limits in (
        ("committee", 1_000, COMMITTEE_TARGETS_S),
        ("committee_large", 10_000, dict.fromkeys(COMMITTEE_TARGETS_S, LARGE_TARGET_S)),
    ):
        data = steps[step_name].data or {}
        for stage, limit in limits.items():
            rows = [
                r
                for r in data.get(stage, [])
                if r["n"] == n and str(r["label"]).startswith("committee")
            ]
            goal = f"N = {n:,} committee {stage} <= {limit:g} s summed CPU"
            refused = stage == "distances" and data.get("n") == n
            refused = refused and bool(data.get("distances_refused"))
            field = ""
            if refused:  # distances_refused: the default field cannot hold this N
                largest = largest_distance_n()
                field = f"the default distance field holds one cluster of at most N = {largest:,}"
                why.append(f"- **The N = {n:,} distance stage.** {WHY_DISTANCE_FIELD}")
            if not rows:
                if refused:
                    lines.append(f"| {goal} | refused by the parameters | **missed** | {field} |")
                else:
                    lines.append(f"| {goal} | - | not in this run | |")
                continue
            for r in rows:
                met = r["total_s"] <= limit
                committee_missed |= not met
                lowered = f"; timed on a lowered clip: {field}" if r.get("clip_lowered") else ""
                lines.append(
                    f"| {goal} | {r['label']}: {_f(r['total_s'], 1)} s | {_verdict(met)} "
                    f"| {_parts(r)}{lowered} |"
                )
    if committee_missed:
        why.append(f"- **Committee stages.** {WHY_COMMITTEE}")
    http = [steps[name] for name in HTTP_STEPS if name in steps]
    goal = f"N = 1,000 over HTTP: p95 <= {HTTP_P95_S:g} s, max <= {HTTP_MAX_S:g} s"
    http_missed = False
    for step in http:
        if step.data is None:
            lines.append(f"| {goal} | - | {_status(step)} | |")
            continue
        o, a = step.data["overall"], step.data["args"]
        met = o["p95"] <= HTTP_P95_S and o["max"] <= HTTP_MAX_S
        http_missed |= not met
        slowest = max(step.data["endpoints"].items(), key=lambda kv: kv[1]["max"])[0]
        lines.append(
            f"| {goal} | {a['replicas']} replica(s): p95 {o['p95']:.2f} s, max {o['max']:.2f} s "
            f"| {_verdict(met)} | slowest request: {slowest}; committee of N = "
            f"{a['participants']:,} at f_c = {a['collusion']:g}, PostgreSQL |"
        )
    if not http:
        lines.append(
            f"| {goal} | - | not in this run | `--http-n1000` adds it (about 12 minutes); "
            "`docs/results/load.md` has its own generated runs |"
        )
    if http_missed:
        why.append(f"- **N = 1,000 over HTTP.** {WHY_HTTP}")
    lines.append("| CUDA path timed | - | not in this run | needs a GPU: `docs/results/cuda.md` |")
    if why:
        lines += ["", "Why what is missed is not cut further:", "", *why]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke run, tests)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="markdown file to write")
    parser.add_argument("--dropout", type=float, default=0.25, help="fraction dropping")
    parser.add_argument(
        "--flower-python", type=Path, default=DEFAULT_FLOWER, help="interpreter with flwr 1.41"
    )
    parser.add_argument(
        "--load-arg",
        action="append",
        default=[],
        help="extra argument for bench.load.run (repeat), e.g. --load-arg=--sqlite",
    )
    parser.add_argument(
        "--http-n1000",
        action="store_true",
        help="also run bench.load at N = 1,000 with 1 and 2 replicas (issue 30's HTTP target)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per benchmark")
    parser.add_argument("--json", type=Path, default=None, help="also write all figures here")
    args = parser.parse_args(argv)
    if not 0 <= args.dropout < 0.5:
        parser.error("--dropout must be in [0, 0.5)")
    sizes = QUICK if args.quick else FULL
    command = shlex.join(["python", "-m", "bench.report", *(argv or sys.argv[1:])])
    started = dt.datetime.now(dt.UTC)
    before = machine()
    t0 = time.perf_counter()
    steps = plan(sizes, args.flower_python, args.dropout, args.load_arg, http_n1000=args.http_n1000)
    print(f"bench.report: {len(steps)} benchmarks, load average {before['load'][0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="secfpp-report-") as tmp:
        for step in steps:
            if not step.note:
                run_step(step, Path(tmp), args.timeout)
    after = os.getloadavg()
    by_name = {s.name: s for s in steps}
    text = render(
        by_name,
        command=command,
        before=before,
        after=after,
        started=started,
        wall_s=time.perf_counter() - t0,
        sizes=sizes,
        dropout=args.dropout,
        quick=args.quick,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    if args.json is not None:
        payload = {s.name: {"argv": s.argv, "rc": s.rc, "data": s.data} for s in steps}
        args.json.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print(f"wrote {args.out}")
    ran = [s for s in steps if not (s.name == "flower_secagg" and s.note)]
    return 0 if all(succeeded(s) for s in ran) else 1


if __name__ == "__main__":
    sys.exit(main())

"""bench.report: the quick run writes a dated performance file with every section, and the
same-run ratios are computed from the figures of that run (known answers on fixed data)."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import report

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = [
    "# Performance: every figure from one run",
    "## Run",
    "## Same-run ratios",
    "## Crypto round",
    "## Committee",
    "## Committee growth",
    "## Decode",
    "## Flower SecAgg+",
    "## Load",
    "## Re-randomized distances",
    "## Agreement on the request",
    "## Request bodies",
    "## Dashboard",
    "## CUDA",
    "## Targets (issue 30): met or missed, and why",
]


def _steps() -> dict[str, report.Step]:
    """Fixed figures: round 2 s vs plain sum 0.004 s; Flower 10 s; committee 5 s."""
    crypto = report.Step("crypto_round", ["python", "-m", "bench.crypto.round"], rc=0)
    crypto.data = {
        "rounds": [
            {"n": 100, "d": 1000, "k": 70, "t": 25, "dropped": 25, "share_seal": 1.0,
             "open_sum": 0.75, "decode": 0.25, "total": 2.0, "plain": 0.004, "max_error": 1e-9}
        ],
        "secpc": [],
        "matmul": [{"shape": [10, 7, 1171], "field": 0.002, "gemm": 0.001}],
    }  # fmt: skip
    committee = report.Step("committee", ["python", "-m", "bench.crypto.committee"], rc=0)
    row = {
        "label": "committee c=81 fc=0.1",
        "n": 1000,
        "c": 81,
        "k": 31,
        "t": 30,
        "share_s": 0.004,
        "member_s": 0.01,
        "decode_s": 0.1,
        "path_s": 0.114,
        "total_s": 5.0,
        "bytes_up_per_participant": 2**20,
        "bytes_in_per_member": 2**21,
    }
    committee.data = {
        "n": 1000,
        "d": 1000,
        "r": 128,
        "dropout": 0.25,
        "sample": 1,
        "aggregation": [row],
        "distances": [],
        "distances_refused": None,
        "peak_rss_mb": 100.0,
    }
    flower = report.Step("flower_secagg", ["x/python", "-m", "bench.crypto.flower_secagg"], rc=0)
    common = {
        "share_holders": 15,
        "threshold": 4,
        "client_s": 0.1,
        "server_s": 1.0,
        "completed": True,
    }
    flower.data = {
        "flwr": "1.41.0",
        "d": 1000,
        "dropout": 0.25,
        "results": [
            {"label": "k=15 N=100", "mode": "neighbourhood", "n": 100, "summed_s": 10.0, **common},
            {
                "label": "k=15 N=1000",
                "mode": "neighbourhood",
                "n": 1000,
                "summed_s": 60.0,
                **common,
            },
        ],
    }
    decode = report.Step("decode", ["python", "-m", "bench.crypto.decode"], rc=1, note="")
    load = report.Step("load", ["python", "-m", "bench.load.run"], note="stopped after 5 s", rc=-1)
    large = report.Step("committee_large", ["python", "-m", "bench.crypto.committee"], rc=0)
    big = {**row, "n": 10_000, "c": 91, "total_s": 50.0, "member_s": 0.1}
    big["label"] = "committee c=91 fc=0.1"
    large.data = {**committee.data, "n": 10_000, "aggregation": [big]}
    return {s.name: s for s in (crypto, committee, large, decode, flower, load)}


def _render(steps: dict[str, report.Step], command: str = "python -m bench.report") -> str:
    return report.render(
        steps,
        command=command,
        before={"cores": 2, "cpu": "Test CPU", "python": "3", "numpy": "2", "load": (1, 2, 3)},
        after=(4.0, 5.0, 6.0),
        started=dt.datetime(2026, 11, 27, 1, 2, tzinfo=dt.UTC),
        wall_s=42.0,
        sizes=report.FULL,
        dropout=0.25,
    )


def test_render_takes_every_ratio_from_the_run_and_reports_failures() -> None:
    text = _render(_steps())
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert "date: 2026-11-27 01:02 UTC" in text
    assert "load average (1, 5, 15 min) before: 1.00, 2.00, 3.00; after: 4.00, 5.00, 6.00" in text
    assert "2 cores, Test CPU" in text
    assert "| round = 500x the sum |" in text  # 2.0 / 0.004
    assert "| Flower = 5.0x SecFPP |" in text  # 10 / 2 at N = 100
    assert "| Flower = 12.0x SecFPP |" in text  # committee 5 s vs Flower 60 s at N = 1000
    assert "| aggregation | 0.1 | 81 | 5.0 | 91 | 50.0 | x10.0 | x10.0 |" in text
    assert "| 50% |" in text  # GEMM 0.001 / field 0.002
    assert "| decode | failed (rc 1) |" in text
    assert "| load | stopped after 5 s |" in text
    assert "## Failures" in text
    assert "Quick (smoke)" not in text  # full sizes


def test_load_missing_its_latency_targets_is_a_result_not_a_failure() -> None:
    load = report.Step("load", ["python", "-m", "bench.load.run"], rc=1, data={"overall": {}})
    assert report.succeeded(load)
    assert report._status(load) == "ok (missed its latency targets)"
    crashed = report.Step("load", ["python", "-m", "bench.load.run"], rc=1)  # no figures written
    assert not report.succeeded(crashed)
    other = report.Step("decode", ["python", "-m", "bench.crypto.decode"], rc=1, data={"rows": []})
    assert not report.succeeded(other)


def test_missing_flower_is_stated_not_hidden(tmp_path: Path) -> None:
    steps = report.plan(report.QUICK, tmp_path / "no-python", 0.25, [])
    flower = next(s for s in steps if s.name == "flower_secagg")
    assert flower.note.startswith("not run:")
    assert [s.name for s in steps] == [
        "crypto_round",
        "committee",
        "committee_large",
        "decode",
        "flower_secagg",
        "load",
        "rerandomize",
        "attestation",
        "bodies",
        "dashboard",
    ]
    crypto = steps[0].argv
    assert crypto[crypto.index("--dropout") + 1] == "0.25"  # the same dropout for every side
    assert flower.argv[flower.argv.index("--dropout") + 1] == "0.25"
    assert flower.argv[flower.argv.index("--d") + 1] == crypto[crypto.index("--d") + 1]


@pytest.mark.slow
def test_quick_run_writes_the_performance_file(tmp_path: Path) -> None:
    out = tmp_path / "performance.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.report", "--quick", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text()
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert re.search(r"date: \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    assert re.search(r"before: [\d.]+, [\d.]+, [\d.]+; after: [\d.]+, [\d.]+, [\d.]+", text)
    names = ("crypto_round", "committee", "committee_large", "decode", "load")
    for name in (*names, "rerandomize", "attestation", "bodies", "dashboard"):
        assert re.search(rf"^\| {name} \| ok( \(missed its latency targets\))? \|", text, re.M), (
            name
        )
    assert re.search(r"^\| round N = 10 .* vs plain float64 sum \|.*x the sum \|$", text, re.M)
    assert re.search(r"^\| committee c=\d+ fc=0.1 \| 150 \|", text, re.M)
    assert "## Failures" not in text
    assert "**Quick (smoke) sizes**" in text
    assert re.search(r"^\| committee c=\d+ fc=0.25 \| 200 \| .* \| [\d.]+x \|$", text, re.M)
    assert re.search(r"^\| with agreement \| [\d.]+ ms \|", text, re.M)
    assert re.search(r"^- unauthenticated: RSS rise \d+ MiB \(target < 64\)", text, re.M)
    assert re.search(r"^\| federation \| [\d.]+ \|", text, re.M)
    assert "Copied unedited from [cuda.md](cuda.md)" in text


def test_growth_compares_committee_rows_not_all_to_all_rows_of_the_same_fc() -> None:
    """The N = 1,000 run also holds all-to-all rows of the same f_c after its committee row;
    the growth table took the last row of each f_c (an all-to-all N = 1000 row), not the
    committee's."""
    steps = _steps()
    small = steps["committee"]
    assert small.data is not None
    committee_row = small.data["aggregation"][0]
    all_to_all = {**committee_row, "label": "all-to-all N=1000 fc=0.1", "c": 1000, "total_s": 35.0}
    small.data = {**small.data, "aggregation": [committee_row, all_to_all]}
    rows = report._growth(small, steps["committee_large"])
    growth = [r for r in rows if r.startswith("| aggregation |")]
    assert growth == ["| aggregation | 0.1 | 81 | 5.0 | 91 | 50.0 | x10.0 | x10.0 |"]


def test_targets_judge_each_figure_of_the_run_at_its_own_size() -> None:
    """Known answers: the N = 100 round of 0.3 s meets 0.4 s, 60 % of GEMM misses 70 %, the
    committee's 5 s misses 3 s with its parts, the refused N = 10,000 distance stage is a miss
    with the largest N the field holds, and a figure of the wrong size is not judged."""
    steps = _steps()
    crypto = steps["crypto_round"]
    assert crypto.data is not None
    crypto.data["rounds"] = [
        {"n": 100, "d": 100_000, "k": 50, "t": 25, "dropped": 25, "share_seal": 0.2,
         "quantize": 0.02, "encode": 0.1, "pack_seal": 0.08, "open_sum": 0.08, "decode": 0.02,
         "total": 0.3, "plain": 0.003, "max_error": 1e-9},
    ]  # fmt: skip
    crypto.data["matmul"] = [
        {"shape": [10, 7, 1171], "field": 1.0, "gemm": 0.1},  # small shape: not a main shape
        {"shape": [100, 75, 2000], "field": 0.001, "gemm": 0.0006},
        {"shape": [256, 256, 4096], "field": 0.01, "gemm": 0.009},
    ]
    large = steps["committee_large"]
    assert large.data is not None
    large.data["distances_refused"] = "N = 10000: Argument 'clip' = 4.0 overflows"
    text = "\n".join(report.targets(steps))
    assert "| N = 100, d = 100,000 round <= 0.4 s | 0.300 s (100x the plain sum) | met |" in text
    assert "the round would still take 0.260 s" in text  # 0.3 - 0.1 + 100 x 0.0006
    assert "| 60%-90% | **missed** | (100, 75, 2000) 60%, (256, 256, 4096) 90% |" in text
    assert "(10, 7, 1171)" not in text
    # 1000 x 0.004 = 4.0, 81 x 0.01 = 0.81, decode 0.1: shares of their sum, 4.91
    assert (
        "| N = 1,000 committee aggregation <= 3 s summed CPU | committee c=81 fc=0.1: 5.0 s "
        "| **missed** | N x share 4.0 s (81%), c x member 0.8 s (16%), decode 0.10 s |"
    ) in text
    assert "| N = 1,000 committee distances <= 1.5 s summed CPU | - | not in this run |" in text
    largest = report.largest_distance_n()
    assert 1_000 < largest < 10_000
    assert f"field holds one cluster of at most N = {largest:,} |" in text
    assert "- **The N = 10,000 distance stage.**" in text
    assert "- **Field products.**" in text
    assert "- **The N = 100 round.**" not in text
    small = dict(crypto.data["rounds"][0], d=2048)
    crypto.data["rounds"] = [small]
    text = "\n".join(report.targets(steps))
    assert "| N = 100, d = 100,000 round <= 0.4 s | - | not in this run |" in text


def test_largest_distance_n_is_the_edge_of_the_default_field() -> None:
    from secfpp.crypto.codes import check_default_fields
    from secfpp.crypto.errors import ParameterError

    n = report.largest_distance_n()
    check_default_fields(n)
    with pytest.raises(ParameterError):
        check_default_fields(n + 1)


def _http(name: str, replicas: int, p95: float, peak: float) -> report.Step:
    step = report.Step(name, ["python", "-m", "bench.load.run"], rc=0 if peak <= 15 else 1)
    ms = {"count": 10, "p50": 0.1, "p95": p95, "p99": p95, "max": peak}
    step.data = {
        "args": {"participants": 1000, "dim": 100_000, "rounds": 2, "replicas": replicas,
                 "collusion": 0.1, "sqlite": False},
        "overall": ms,
        "endpoints": {"task": {**ms, "max": peak}, "inbox": {**ms, "max": peak / 2}},
        "cpu_seconds": {"coordinator": 100.0},
        "server_errors": 0,
    }  # fmt: skip
    return step


def test_the_http_target_is_judged_when_the_run_has_the_n1000_loads() -> None:
    steps = _steps()
    assert "N = 1,000 over HTTP: p95 <= 5 s, max <= 15 s | - | not in this run" in "\n".join(
        report.targets(steps)
    )
    steps["load_n1000"] = _http("load_n1000", 1, 3.83, 14.68)
    assert "- **N = 1,000 over HTTP.**" not in "\n".join(report.targets(steps))
    steps["load_n1000_2"] = _http("load_n1000_2", 2, 1.44, 15.2)
    text = "\n".join(report.targets(steps))
    assert "| 1 replica(s): p95 3.83 s, max 14.68 s | met | slowest request: task;" in text
    assert "| 2 replica(s): p95 1.44 s, max 15.20 s | **missed** |" in text
    assert "- **N = 1,000 over HTTP.**" in text  # why, only when missed
    assert report.succeeded(steps["load_n1000_2"])  # a missed target is a result, rc 1
    names = [s.name for s in report.plan(report.FULL, Path("x"), 0.25, [], http_n1000=True)]
    assert names[-2:] == ["load_n1000", "load_n1000_2"]
    assert "load_n1000" not in [s.name for s in report.plan(report.FULL, Path("x"), 0.25, [])]


def test_render_lists_the_n1000_loads_after_the_small_one() -> None:
    steps = {**_steps(), "load_n1000": _http("load_n1000", 1, 3.83, 14.68)}
    text = _render(steps, "python -m bench.report --http-n1000")
    assert text.index("## Load\n") < text.index("## Load at N = 1,000 (load_n1000)")
    assert "1000 participants over HTTP, d = 100,000, 2 round(s), PostgreSQL, 1 replica(s)" in text
    assert text.index("## Load at N = 1,000") < text.index("## Targets (issue 30)")


def test_a_distance_stage_timed_on_a_lowered_clip_is_judged_and_says_so() -> None:
    steps = _steps()
    large = steps["committee_large"]
    assert large.data is not None
    row = {
        **large.data["aggregation"][0],
        "k": 1,
        "t": 34,
        "share_s": 0.0013,
        "member_s": 0.2,
        "decode_s": 0.25,
        "total_s": 31.45,
        "clip_lowered": True,
    }
    large.data = {**large.data, "distances": [row], "distances_refused": "N = 10000: overflows"}
    text = "\n".join(report.targets(steps))
    largest = report.largest_distance_n()
    assert (
        "| N = 10,000 committee distances <= 30 s summed CPU | committee c=91 fc=0.1: 31.4 s "
        "| **missed** | N x share 13.0 s (41%), c x member 18.2 s (58%), decode 0.25 s; timed on "
        f"a lowered clip: the default distance field holds one cluster of at most N = {largest:,} |"
    ) in text
    assert "- **The N = 10,000 distance stage.**" in text
    assert "Its rows above were timed anyway" in "\n".join(report._committee(large))


def test_sections_render_the_benchmarks_figures_with_their_verdicts() -> None:
    """Known answers: each benchmark's renderer, fed fixed figures, writes them and judges
    the targets (a rise of 70 MiB misses < 64 MiB; a 250 ms median meets < 300 ms)."""
    steps = _steps()
    bodies = report.Step("bodies", ["python", "-m", "bench.load.body_memory"], rc=0)
    scenario = {
        "before_mib": 200.0,
        "peak_mib": 270.0,
        "rise_mib": 70.0,
        "answers": {"401": 8},
        "healthz_p50_ms": 5.0,
        "healthz_p99_ms": 20.0,
        "healthz_max_ms": 30.0,
        "polls": 40,
    }
    bodies.data = {
        "clients": 8,
        "mib": 15.0,
        "scenarios": [
            {"scenario": "unauthenticated", **scenario},
            {"scenario": "valid-token", **scenario, "answers": {"0": 1, "422": 7}},
        ],
    }
    board = report.Step("dashboard", ["python", "-m", "bench.load.dashboard"], rc=0)
    page = {"kb": 2.0, "first_ms": 90.0, "max_ms": 260.0, "cpu_ms": 10.0}
    board.data = {
        "participants": 100,
        "rounds": 50,
        "repeat": 15,
        "database": "sqlite",
        "pages": [{"page": "federation", "median_ms": 250.0, **page}],
    }
    steps.update(bodies=bodies, dashboard=board)
    text = _render(steps)
    assert "| unauthenticated | 200 | 270 | 70 | 401 x8 | 5.0 | 20.0 | 30.0 | 40 |" in text
    assert "| valid-token | 200 | 270 | 70 | reset x1, 422 x7 |" in text
    assert "- unauthenticated: RSS rise 70 MiB (target < 64), /healthz p99 20.0 ms" in text
    assert "(target < 100): missed" in text
    assert "- valid-token: RSS rise 70 MiB (target < 256): met" in text
    assert "| federation | 2.0 | 90.0 | 250.0 | 260.0 | 10.0 |" in text
    assert "Worst median 250.0 ms: target met." in text
    section = text.split("## Re-randomized distances")[1].split("##")[0]
    assert "Not part of this run." in section  # no step of that name in this render


def test_cuda_section_copies_the_device_record_one_level_down(tmp_path: Path) -> None:
    record = tmp_path / "cuda.md"
    record.write_text("# Title\n\nprose\n\n## H200, 240 images\n\n| a |\n|---|\n| 1 |\n")
    lines = report.cuda_section(record)
    assert lines[0].startswith("Not timed by this run")
    assert "has none" not in lines[0]  # true of any machine the report runs on
    assert lines[2:] == ["### H200, 240 images", "", "| a |", "|---|", "| 1 |"]
    assert report.cuda_section(tmp_path / "none.md") == ["No CUDA figures: none.md does not exist."]

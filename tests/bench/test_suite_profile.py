"""The suite profiler (``python -m bench.suite``): its categories with known answers, and a
real run of pytest under it whose records, process table and report are checked."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from bench.suite.procs import Sampler, category
from bench.suite.run import main, read_records, render, summarize


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        (
            "/v/bin/python -c import sys;exec(eval(sys.stdin.readline()))",
            "pytest worker (in-process tests)",
        ),
        ("postgres: 15/main: postgres secfpp_test_1 127.0.0.1(5)", "PostgreSQL"),
        (
            "/v/bin/python -m secfpp.participant.cli run --state /tmp/pytest-of-root/x",
            "participant CLI / daemon",
        ),
        (
            "buildah --storage-driver vfs run --isolation chroot c -- secfpp-participant run",
            "buildah (image copies, container runs)",
        ),
        ("/opt/secfpp/bin/python /opt/secfpp/bin/secfpp-participant run", "container: participant"),
        ("/v/bin/python -m secfpp.coordinator.cli serve --port 1", "coordinator process"),
        ("/v/bin/python -m bench.load.run --participants 4", "benchmark process"),
        ("/usr/lib/chromium/chromium --headless", "chromium (dashboard tests)"),
        ("/usr/lib/erlang/erts-13.1.5/bin/beam.smp -W w", "the machine's other services"),
        ("/usr/bin/git status", "other"),
        ("", "unknown (exited before it was seen running)"),
    ],
)
def test_categories(cmdline: str, expected: str) -> None:
    assert category(cmdline) == expected


@pytest.mark.skipif(not Sampler.available(), reason="needs /proc (Linux)")
def test_the_sampler_counts_a_busy_child() -> None:
    sampler = Sampler(interval=0.1)
    sampler.start()
    # 0.6 CPU-s, then 0.3 s asleep: a sampler thread delayed by a loaded machine still reads the
    # final CPU time before the child exits
    busy = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
        "time.sleep(0.3)\n"
    )
    subprocess.run([sys.executable, "-c", busy, "bench-suite-probe"], check=True, timeout=60)
    time.sleep(0.05)
    sampler.stop()
    mine = [s for s in sampler.seen.values() if "bench-suite-probe" in s.cmdline]
    assert len(mine) == 1
    assert 0.55 <= mine[0].cpu <= 1.2
    assert not mine[0].before


def test_render_of_known_records() -> None:
    tests = [
        {"id": "t.py::a", "wall": 2.0, "self": 1.5, "children": 0.0},
        {"id": "t.py::b", "wall": 5.0, "self": 0.1, "children": 4.0},
    ]
    summary = summarize(
        command=["bash", "dev.sh", "test"],
        status=0,
        wall=10.0,
        machine_cpu=18.0,
        categories={"PostgreSQL": (3, 2.0), "pytest worker (in-process tests)": (1, 6.0)},
        tests=tests,
        processes={"gw0": {"tests": 2, "busy": 7.0, "self": 1.6, "children": 4.0}},
        started=datetime(2026, 12, 7, 12, 0),
        host={"cores": 2, "cpu": "Test CPU"},
    )
    assert [t["id"] for t in summary["slowest"]] == ["t.py::b", "t.py::a"]
    assert [t["id"] for t in summary["costliest"]] == ["t.py::b", "t.py::a"]
    text = render(summary)
    assert "2026-12-07 12:00 UTC" in text
    assert "Test CPU (2 cores)" in text
    assert "**Wall time: 10 s**" in text
    assert "1.80 cores busy" in text
    assert "| PostgreSQL | 3 | 2.0 | 25.0% |" in text
    assert "| 5.0 | 0.1 | 4.0 | `t.py::b` |" in text


@pytest.mark.slow  # a pytest process of its own: about 2.5 s on the 2-core machine
@pytest.mark.skipif(not Sampler.available(), reason="needs /proc (Linux)")
def test_a_real_pytest_run_under_the_profiler(tmp_path: Path) -> None:
    out, data = tmp_path / "suite.md", tmp_path / "suite.json"
    code = main(
        [
            "--out", str(out), "--json", str(data), "--interval", "0.2", "--",
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "tests/bench/test_suite_profile.py::test_categories",
        ]
    )  # fmt: skip
    assert code == 0
    summary = json.loads(data.read_text())
    assert summary["tests"] == 11  # the parametrized cases above
    assert summary["status"] == 0
    (process,) = summary["processes"].values()
    assert process["tests"] == 11
    assert process["collected"] == 11
    assert summary["categories"]["pytest worker (in-process tests)"]["cpu_s"] > 0
    text = out.read_text()
    assert "test_suite_profile.py::test_categories[" in text
    assert "Do not edit: rerun the command" in text


def test_a_command_that_runs_no_test_is_reported(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path / "x.md"), "--", sys.executable, "-c", "pass"]) == 1
    assert not (tmp_path / "x.md").exists()


def test_records_of_each_process_are_read(tmp_path: Path) -> None:
    (tmp_path / "tests-gw1 (pid 7).jsonl").write_text(
        json.dumps({"collected": 2, "wall": 1.0, "self": 0.9})
        + "\n"
        + json.dumps({"id": "x::y", "wall": 0.5, "self": 0.4, "children": 0.1})
        + "\n"
    )
    tests, processes = read_records(tmp_path)
    assert [t["id"] for t in tests] == ["x::y"]
    assert processes["gw1 (pid 7)"] == {
        "tests": 1, "busy": 0.5, "self": 0.4, "children": 0.1,
        "collected": 2, "startup_wall": 1.0, "startup_cpu": 0.9,
    }  # fmt: skip

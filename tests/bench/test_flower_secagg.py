"""The Flower SecAgg+ benchmark's parts that need no flwr: arguments, settings, the growth
and table formatting, and the "flwr missing -> message, exit 2" path (flwr lives in its own
venv, .venv-flower, never in the main one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.crypto import flower_secagg as fs

ROOT = Path(__file__).resolve().parents[2]


def _result(n: int, client: float, server: float, sent: float, **kw: object) -> fs.Result:
    r = fs.Result(label=f"k=15 N={n}", mode="neighbourhood", n=n, d=100_000)
    r.share_holders, r.threshold, r.dropped, r.completed = 15, 4, n // 4, True
    r.client_s, r.client_max_s, r.server_s, r.client_sent_bytes = client, client, server, sent
    r.summed_s = n * client + server
    r.client_stage_s = dict.fromkeys(fs.STAGES, client / 4)
    r.server_stage_s = dict.fromkeys(fs.STAGES, server / 4)
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def test_default_arguments_are_the_issue_setting() -> None:
    a = fs.parse_args([])
    assert (a.n, a.all_to_all, a.d) == ([100, 300, 1000], [100], 100_000)
    assert (a.neighbours, a.threshold, a.dropout, a.json) == (15, 4, 0.25, None)


def test_quick_is_small_and_keeps_explicit_values() -> None:
    a = fs.parse_args(["--quick"])
    assert a.n == [10, 20]
    assert a.all_to_all == [10]
    assert a.d == fs.QUICK_D
    assert a.neighbours <= min(a.n)
    assert a.neighbours % 2 == 1
    assert 2 <= a.threshold < a.neighbours
    b = fs.parse_args(["--quick", "--n", "30", "--d", "50", "--all-to-all", "--json", "x.json"])
    assert (b.n, b.d, b.all_to_all, str(b.json)) == ([30], 50, [], "x.json")


@pytest.mark.parametrize(
    "argv",
    [["--neighbours", "16"], ["--neighbours", "1"], ["--threshold", "15"], ["--dropout", "1"]],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        fs.parse_args(argv)
    assert exc.value.code == 2


def test_settings_cover_both_modes() -> None:
    s = fs.settings(fs.parse_args(["--n", "100", "300", "--all-to-all", "100"]))
    assert [x.label for x in s] == ["k=15 N=100", "k=15 N=300", "all-to-all N=100"]
    assert [x.num_shares for x in s] == [15, 15, 1.0]  # 1.0: Flower's "all sampled clients"
    assert [x.threshold for x in s] == [4, 4, 0.5]
    assert {x.d for x in s} == {100_000}
    assert {x.dropout for x in s} == {0.25}


def test_growth() -> None:
    assert fs.growth(2.0, 5.0) == 2.5
    assert fs.growth(0.0, 1.0) != fs.growth(0.0, 1.0)  # nan


def test_growth_rows_from_smallest_completed_neighbourhood_run() -> None:
    results = [
        _result(1000, 0.5, 100.0, 2e6),
        _result(100, 0.1, 10.0, 1e6),
        _result(300, 0.2, 40.0, 1e6),
        _result(3000, 9.0, 9.0, 9.0, completed=False),  # halted: left out
        _result(100, 1.0, 1.0, 1.0, mode="all-to-all"),  # other mode: left out
    ]
    rows = fs.growth_rows(results)
    assert rows == [
        ("N 100 -> 300", "x3.00", "x2.00", "x4.00", "x5.00", "x1.00"),
        ("N 100 -> 1000", "x10.00", "x5.00", "x10.00", "x30.00", "x2.00"),
    ]
    assert fs.growth_rows(results[:1]) == []


def test_format_table_pads_columns() -> None:
    text = fs.format_table(("name", "v"), [("a", "1.5"), ("longer", "10.25")])
    lines = text.splitlines()
    assert lines[0] == "name        v"
    assert lines[1] == "------  -----"
    assert lines[2] == "a         1.5"
    assert lines[3] == "longer  10.25"


def test_report_has_every_table() -> None:
    results = [
        _result(100, 0.074, 7.5, 814_000),
        _result(300, 0.08, 25.0, 814_000),
        _result(100, 2.0, 150.0, 900_000, label="all-to-all N=100", mode="all-to-all"),
        _result(1000, 0.1, 1.0, 1.0, label="k=15 N=1000", completed=False),
    ]
    text = fs.report(results)
    assert fs.WHAT_RUNS in text
    assert "all-to-all N=100" in text
    assert "HALTED" in text
    assert "0.814" in text  # MB sent per client
    assert "growth (neighbourhood)" in text
    assert "N 100 -> 300" in text
    assert "x3.00" in text
    assert "srv unmask" in text


def test_main_without_flwr_says_how_to_install_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "flwr", None)  # import flwr -> ImportError
    assert fs.main(["--quick"]) == 2
    err = capsys.readouterr().err
    assert "flwr is not installed" in err
    assert f"pip install flwr=={fs.FLWR_VERSION}" in err
    assert ".venv-flower" in err


def test_module_run_without_flwr_exits_2() -> None:
    code = (
        "import runpy, sys; sys.modules['flwr'] = None; "
        "runpy.run_module('bench.crypto.flower_secagg', run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "flwr is not installed" in proc.stderr
    assert proc.stdout == ""

"""bench.field_products runs in its quick mode and prints every product and the round."""

from __future__ import annotations

import pytest

from bench import field_products


def test_quick_run_prints_every_shape_and_the_round(capsys: pytest.CaptureFixture[str]) -> None:
    field_products.main(["--quick", "--repeat", "1"])
    out = capsys.readouterr().out
    for shape in field_products.shapes(quick=True):
        assert shape.label in out
    assert "load average" in out
    assert "daemon" in out
    assert "bare" in out


def test_main_shapes_follow_the_codes() -> None:
    # N = 100: K = 50, T = 25, L = 2000; committees c = 81 and c = 379 (bench.committee).
    labels = {s.label: s for s in field_products.shapes(quick=False)}
    enc = labels["N=100 encoding"]
    assert (enc.m, enc.k, enc.cols) == (75, 75, 2000)
    assert "N=1000 c=81 encoding" in labels
    assert "N=1000 c=379 encoding" in labels

"""``bench.clustering.heldout``: the suite, the targets and the added value on known answers, and
a real ``--quick`` run on the held-out domains (structure, the tuning domains kept out, and the
same rows again from its data-signal cache)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.clustering.heldout import Case, added_value, judge, main, render, suite


def test_suite_has_every_pairing_combination_and_domain_and_refuses_sizes_that_cannot_part() -> (
    None
):
    cases = suite(("a", "b", "c"), pair_size=8, triple_sizes=(9, 12), single_size=8)
    assert [c for c in cases if c.kind == "pair"] == [
        Case("pair", "a+b", 8),
        Case("pair", "a+c", 8),
        Case("pair", "b+c", 8),
    ]
    assert [c for c in cases if c.kind == "triple"] == [
        Case("triple", "a+b+c", 9),
        Case("triple", "a+b+c", 12),
    ]
    assert [c.setting for c in cases if c.kind == "single"] == ["a", "b", "c"]
    four = suite(("a", "b", "c", "d"), pair_size=6, triple_sizes=(9,), single_size=8)
    assert sum(c.kind == "pair" for c in four) == 6
    assert sum(c.kind == "triple" for c in four) == 4
    with pytest.raises(ValueError, match="never part"):  # 3 + 3 + 2: a group under 3
        suite(("a", "b", "c"), pair_size=8, triple_sizes=(8,), single_size=8)
    with pytest.raises(ValueError, match="never part"):  # 2 + 2
        suite(("a", "b", "c"), pair_size=4, triple_sizes=(9,), single_size=8)


def _row(kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "seeds": 10, "rounds": 6, **fields}


def test_judge_known_answers() -> None:
    nine = [1, 2, 3, 3, 1, 2, 2, 3, 1, None]
    assert judge(_row("pair", parted_rounds=nine, changes_after=0))["met"] is True
    late = [1, 2, 3, 3, 1, 2, 2, 4, 1, None]  # one parted only in round 4: 8 of 10 by round 3
    judged = judge(_row("pair", parted_rounds=late, changes_after=1))
    assert (judged["met"], judged["measured"]) == (False, "8 of 10")
    assert judged["flip_flops_met"] is False
    assert judge(_row("triple", parted_rounds=late, changes_after=0))["met"] is True  # 9 by 6
    seven = [6, 6, 6, 5, 4, 3, 2, None, None, None]
    assert judge(_row("triple", parted_rounds=seven, changes_after=0))["met"] is False
    assert judge(_row("triple", rounds=3, parted_rounds=seven, changes_after=0))["met"] is None
    assert judge(_row("single", false_splits=0))["met"] is True
    assert judge(_row("single", false_splits=1))["met"] is False  # 10% > 5%
    assert judge(_row("single", seeds=20, false_splits=1))["met"] is True  # 5%


def _method(means: dict[int, float]) -> dict[str, Any]:
    runs = [
        {"seed": s, "mean": m, "clusters": [1, 2], "purity": [0.5, 1.0]} for s, m in means.items()
    ]
    return {"runs": runs}


def test_added_value_pairs_seeds_and_gives_a_t_interval() -> None:
    accuracy = {
        "settings": {
            "x+y": {
                "domains": ["x", "y"],
                "methods": {
                    "secfpp": _method({0: 0.81, 1: 0.82, 2: 0.83}),
                    "secfpp-no-clustering": _method({0: 0.80, 1: 0.80, 2: 0.80}),
                    "promptfl": _method({0: 0.70, 2: 0.73}),  # seed 1 missing: paired on 0, 2
                },
            },
            "no-secfpp": {"domains": ["x"], "methods": {"promptfl": _method({0: 0.5})}},
        }
    }
    (row,) = added_value(accuracy)
    nc = row["secfpp-no-clustering"]
    assert nc["seeds"] == 3
    assert nc["diffs"] == [0.01, 0.02, 0.03]
    assert nc["mean"] == pytest.approx(0.02)
    half = 4.302653 * 0.01 / math.sqrt(3)  # t(0.975, 2) * sd / sqrt(n)
    assert nc["ci95"] == pytest.approx([0.02 - half, 0.02 + half], abs=1e-5)
    assert row["promptfl"]["diffs"] == [0.11, 0.1]
    assert row["secfpp"] == pytest.approx(0.82)
    assert row["secfpp_clusters"] == [2, 2, 2]
    assert row["secfpp_purity"] == [1.0, 1.0, 1.0]


@pytest.mark.slow  # encodes the held-out domains on the shipped backbone (~1 min on one core)
def test_quick_run_reports_the_held_out_suite_and_replays_the_same_from_its_cache(
    tmp_path: Path,
) -> None:
    from demo.data.registry import domains_with_role

    signals, out, md = tmp_path / "s.npz", tmp_path / "h.json", tmp_path / "h.md"
    partial = tmp_path / "seeds"
    first = ["--quick", "--signals", str(signals), "--partial", str(partial)]
    assert main([*first, "--json", str(out), "--md", str(md)]) == 0
    assert sorted(p.name for p in partial.iterdir()) == ["seed-0.json", "seed-1.json"]
    got = json.loads(out.read_text())
    meta = got["meta"]
    held_out, tuning = domains_with_role("held-out"), domains_with_role("tuning")
    assert meta["suite"] == list(held_out)
    assert len(held_out) >= 3
    assert meta["tuning"] == list(tuning)
    assert not set(tuning) & set(held_out)
    assert meta["pretrained"]
    assert set(meta["suite"]) - set(meta["pretrained"])
    assert meta["rules"] == {"false_split_rate": 0.05, "null_draws": 199}
    assert meta["signal"] == "data-balanced"  # a new federation's signal
    assert [r["kind"] for r in got["rows"]] == ["pair", "triple", "single"]
    for row in got["rows"]:
        assert set(row["setting"].split("+")) <= set(held_out)
        assert row["seeds"] == 2
        assert row["judged"] == judge(row)
        if row["kind"] == "single":
            assert 0 <= row["false_splits"] <= 2
        else:
            assert len(row["parted_rounds"]) == 2
            assert all(r is None or 1 <= r <= 3 for r in row["parted_rounds"])
    assert got["rows"][1]["judged"]["met"] is None  # 3 rounds cannot judge "by round 6"
    text = md.read_text()
    assert text == render(got)
    assert "**Held out**" in text
    assert "printed_digits \\| cyrillic_letters" in text
    control = render({**got, "meta": {**got["meta"], "role": "tuning"}})
    assert "on its tuning domains (control)" in control.splitlines()[0]
    assert "**Held out**" not in control
    assert main(["--quick", "--signals", str(signals), "--json", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["meta"]["cached_signals"] is True  # replayed again on the cached signals
    assert again["rows"] == got["rows"]
    assert main(["--quick", "--partial", str(partial), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"] == got["rows"]  # read back, nothing computed
    # more seeds for the single domains only: seeds 0-1 read back, seed 2 replays the single
    more = ["--quick", "--single-seeds", "3", "--signals", str(signals), "--partial", str(partial)]
    assert main([*more, "--json", str(out), "--md", str(md)]) == 0
    wider = json.loads(out.read_text())
    assert wider["meta"]["seeds_read_back"] == 2
    assert wider["meta"]["single_seeds"] == 3
    assert [r["seeds"] for r in wider["rows"]] == [2, 2, 3]
    assert wider["rows"][:2] == got["rows"][:2]
    assert wider["rows"][2]["judged"]["measured"].endswith("of 3")
    assert sorted(p.name for p in partial.iterdir())[-1] == "seed-2.json"
    assert set(json.loads((partial / "seed-2.json").read_text())["found"]) == {"2|0.5"}
    assert "single domains 3, 0-2" in md.read_text()

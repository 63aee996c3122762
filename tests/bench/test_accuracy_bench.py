"""The accuracy benchmark: its pure parts (membership changes, targets, README region) with
known answers, and a real ``--quick`` run whose JSON and rendered table are checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.accuracy import main
from bench.accuracy_methods import METHODS, membership_changes
from bench.render_accuracy import END, START, render, replace_region, targets


def test_membership_changes_counts_participants_whose_mates_changed() -> None:
    rounds = [
        [["a", "b", "c", "d"]],  # round 1: still everybody together
        [["a", "b"], ["c", "d"]],  # split: all four have new mates
        [["a", "b"], ["c", "d"]],  # stable
        [["a", "b", "c"], ["d"]],  # c moves: a, b, c and d see new mates
    ]
    assert membership_changes(rounds) == [0, 4, 0, 4]
    assert membership_changes([[["x"], ["y"]]]) == [2]


def _entry(mean: float, std: float = 0.01, p10: float = 0.5) -> dict[str, Any]:
    run = {"seed": 0, "clusters": [1, 2], "purity": [0.5, 1.0], "membership_changes": [0, 4]}
    return {
        "label": "x",
        "mean": mean,
        "std": std,
        "p10": p10,
        "seconds_per_round": 2.0,
        "runs": [run],
    }


def _result(settings: dict[str, dict[str, float]]) -> dict[str, Any]:
    return {
        "meta": {
            "command": "python -m bench.accuracy",
            "date": "2026-11-23 12:00 UTC",
            "total_seconds": 10.0,
            "jobs": 1,
            "cpus": 2,
            "participants": 10,
            "alpha": 0.5,
            "train_images_per_participant": 240,
            "test_images_per_participant": 200,
            "seeds": 1,
            "bench": {"rounds": 8, "epochs": 2, "n_ctx": 4, "lr": 0.01, "ctx_init": "a photo of a"},
        },
        "methods": {m: {} for m in METHODS},
        "settings": {
            s: {"methods": {m: _entry(v) for m, v in values.items()}}
            for s, values in settings.items()
        },
    }


def test_targets_known_answers() -> None:
    result = _result(
        {
            "two-domain": {
                "promptfl": 0.80,
                "secfpp": 0.84,
                "secfpp-true-domains": 0.86,
                "dpfpl-eps0.1": 0.70,
            },
            "single": {"local": 0.85, "promptfl": 0.83, "secfpp": 0.845, "dpfpl-eps0.1": 0.80},
        }
    )
    found = {(t.setting, t.name): t for t in targets(result)}
    assert found[("two-domain", "SecFPP >= PromptFL + 3 points")].met is True
    oracle = found[("two-domain", "SecFPP within 1 point of the true-domain clusters")]
    assert oracle.met is False
    assert "-2.0 points" in oracle.detail
    assert found[("two-domain", "SecFPP >= DP-FPL(epsilon 0.1) + 10 points")].met is True
    single = found[("single", "SecFPP >= best non-private baseline - 1 point")]
    assert single.met is True
    assert "local 0.850" in single.detail
    room = found[("single", "SecFPP >= DP-FPL(epsilon 0.1) + 10 points")]
    assert room.met is None  # the best method, 0.85, is 5 points above DP-FPL
    assert "no room" in room.detail
    assert len(found) == 5


def test_render_and_replace_region() -> None:
    result = _result({"two-domain": {"zero-shot": 0.8, "promptfl": 0.81, "secfpp": 0.85}})
    body = render(result)
    assert "| method | two-domain | s/round |" in body
    assert "| x | 0.850 ± 0.010 (0.500) | 2.0 |" in body
    assert "| two-domain | 0 | 1 2 | 0.50 1.00 | 0 4 |" in body
    assert "SecFPP >= PromptFL + 3 points: met (0.850 vs 0.810 (+4.0 points))" in body
    text = f"intro\n{START}\nold table\n{END}\noutro\n"
    assert replace_region(text, body) == f"intro\n{START}\n{body}\n{END}\noutro\n"
    with pytest.raises(ValueError, match="accuracy-table:start"):
        replace_region("no markers here", body)


@pytest.mark.slow  # a real --quick training run (~30 s)
def test_quick_run_writes_json_and_renders(tmp_path: Path) -> None:
    out = tmp_path / "accuracy.json"
    assert main(["--quick", "--settings", "two-domain", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["meta"]["quick"] is True
    assert result["meta"]["seeds"] == 1
    assert result["meta"]["bench"]["rounds"] == 2
    assert list(result["methods"]) == list(METHODS)
    entry = result["settings"]["two-domain"]
    assert entry["domains"] == ["handwritten_digits", "printed_letters"]
    assert list(entry["methods"]) == list(METHODS)
    for method, summary in entry["methods"].items():
        (run,) = summary["runs"]
        assert sorted(run["accuracy"]) == sorted(f"p{i}" for i in range(9)), method
        values = list(run["accuracy"].values())
        assert all(0.0 <= v <= 1.0 for v in values)
        assert summary["mean"] == pytest.approx(sum(values) / len(values), abs=1e-4)
        assert min(values) - 1e-5 <= summary["p10"] <= summary["mean"] + 1e-5
        assert summary["std"] == 0.0  # one seed
        if method != "zero-shot":
            assert summary["seconds_per_round"] > 0
    for method in ("secfpp", "secfpp-true-domains"):
        (run,) = entry["methods"][method]["runs"]
        assert len(run["purity"]) == len(run["clusters"]) == 2
        assert all(0.5 <= p <= 1.0 for p in run["purity"])
    (oracle,) = entry["methods"]["secfpp-true-domains"]["runs"]
    assert oracle["clusters"] == [2, 2]
    assert oracle["purity"] == [1.0, 1.0]
    assert oracle["membership_changes"] == [9, 0]
    body = render(result)
    for spec in METHODS.values():
        assert f"| {spec.label} | " in body
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{START}\n{END}\n")
    from bench.render_accuracy import main as render_main

    # without a privacy report (the join is tested in test_privacy_columns.py)
    absent = tmp_path / "no-privacy.json"
    args = ["--json", str(out), "--doc", str(readme), "--privacy-json", str(absent)]
    assert render_main(args) == 0
    assert body in readme.read_text()


def test_summarize_keeps_every_setting_built_in_ones_first() -> None:
    """Issue 29: a setting other than the four built-in names was silently dropped."""
    from bench.accuracy import summarize

    def unit(setting: str, seed: int, mean: float) -> dict[str, Any]:
        row = {"mean": mean, "p10": mean - 0.1, "seconds_per_round": 1.0}
        return {
            "setting": setting,
            "seed": seed,
            "description": f"about {setting}",
            "domains": setting.split("+"),
            "methods": {"local": {**row, "cpu_seconds_per_round": 1.0}},
        }

    custom = "greek_letters+math_symbols"
    units = [unit(custom, 1, 0.6), unit("two-domain", 0, 0.9), unit(custom, 0, 0.4)]
    out = summarize(units, ["local"])
    assert list(out) == ["two-domain", custom]
    assert out[custom]["seeds"] == [0, 1]
    assert out[custom]["domains"] == ["greek_letters", "math_symbols"]
    assert out[custom]["methods"]["local"]["mean"] == pytest.approx(0.5)
    assert out[custom]["methods"]["local"]["std"] == pytest.approx(0.1)

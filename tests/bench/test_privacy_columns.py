"""The accuracy table's privacy columns: the join of the two benchmarks' JSON, on small fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.accuracy.render import END, SETTING_LABELS, START, render
from bench.accuracy.render import main as render_main
from bench.privacy.columns import privacy_label, privacy_table


def _accuracy_entry(label: str, mean: float) -> dict[str, Any]:
    return {"label": label, "mean": mean, "std": 0.0, "p10": mean, "runs": []}


def _accuracy() -> dict[str, Any]:
    methods: dict[str, dict[str, Any]] = {
        "zero-shot": {"label": "zero-shot", "epsilon": None},
        "local": {"label": "local only", "epsilon": None},
        "dpfpl-eps1": {"label": "DP-FPL, epsilon = 1", "epsilon": 1.0},
        "dpfpl-eps0.1": {"label": "DP-FPL, epsilon = 0.1", "epsilon": 0.1},
        "secfpp": {"label": "SecFPP", "epsilon": None},
        "secfpp-true-domains": {"label": "SecFPP, true domains", "epsilon": None},
    }
    means = {
        "zero-shot": 0.80,
        "local": 0.85,
        "dpfpl-eps1": 0.75,
        "dpfpl-eps0.1": 0.70,
        "secfpp": 0.86,
        "secfpp-true-domains": 0.87,
    }
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
        "methods": methods,
        "settings": {
            setting: {
                "methods": {m: _accuracy_entry(methods[m]["label"], v) for m, v in means.items()}
            }
            for setting in ("two-domain", "unequal")
        },
    }


def _lira(auc: float, se: float, tpr: float) -> dict[str, Any]:
    return {"auc": auc, "auc_se": se, "tpr_at_1pct_fpr": tpr, "members": 8, "non_members": 2}


def _privacy() -> dict[str, Any]:
    rows = [
        {"method": "local", "status": "ok", "lira": _lira(0.512, 0.021, 0.013)},
        {"method": "dpfpl eps=1", "status": "ok", "lira": _lira(0.497, 0.02, 0.004)},
        {"method": "dpfpl eps=0.1", "status": "failed", "reason": "simulation failed: boom"},
        {"method": "feddpa eps=1", "status": "ok", "lira": _lira(0.6, 0.02, 0.2)},
        {"method": "secfpp", "status": "ok", "lira": _lira(0.531, 0.022, 0.031)},
    ]
    return {
        "generated": "2026-11-24 10:00 UTC",
        "settings": {
            "shadows": 4,
            "rounds": 3,
            "epochs": 1,
            "per_participant": 100,
            "member_fraction": 0.8,
        },
        "results": {"two-domain": {"seeds": [0], "methods": rows}},
    }


def test_privacy_label_maps_accuracy_keys() -> None:
    assert privacy_label("dpfpl-eps0.4", 0.4) == "dpfpl eps=0.4"
    assert privacy_label("dpfpl-eps1", 1.0) == "dpfpl eps=1"
    assert privacy_label("secfpp", None) == "secfpp"


def _row(lines: list[str], setting: str, label: str) -> list[str]:
    prefix = f"| {SETTING_LABELS.get(setting, setting)} | {label} |"
    (line,) = [x for x in lines if x.startswith(prefix)]
    return [c.strip() for c in line.strip("|").split("|")]


def test_privacy_table_joins_by_setting_and_method() -> None:
    lines = privacy_table(_accuracy(), _privacy(), SETTING_LABELS)
    assert "| setting | method | epsilon | accuracy | MIA AUC (LiRA) | TPR@1%FPR |" in lines
    # The same setting and method: the privacy benchmark's LiRA numbers, the accuracy bench's mean.
    assert _row(lines, "two-domain", "local only") == [
        "two-domain",
        "local only",
        "none",
        "0.850",
        "0.512 ± 0.021",
        "0.013",
    ]
    assert _row(lines, "two-domain", "DP-FPL, epsilon = 1")[2:] == [
        "1",
        "0.750",
        "0.497 ± 0.020",
        "0.004",
    ]
    assert _row(lines, "two-domain", "SecFPP")[4:] == ["0.531 ± 0.022", "0.031"]
    # feddpa is only in the privacy benchmark: no row of its own here.
    assert not any("feddpa" in x for x in lines if x.startswith("| two-domain"))
    # n/a, each with its reason as a footnote.
    notes = {x.split(" ", 1)[0]: x.split(" ", 1)[1] for x in lines if x.startswith("[")}
    failed = _row(lines, "two-domain", "DP-FPL, epsilon = 0.1")
    assert failed[2:4] == ["0.1", "0.700"]
    mark = failed[4].split()[1]
    assert failed[4] == failed[5] == f"n/a {mark}"
    assert "simulation failed: boom" in notes[mark]
    zero = _row(lines, "two-domain", "zero-shot")[4].split()[1]
    assert "trains nothing" in notes[zero]
    oracle = _row(lines, "two-domain", "SecFPP, true domains")[4].split()[1]
    assert "not a method of the privacy benchmark" in notes[oracle]
    # A setting the privacy benchmark did not run: n/a for every method, one footnote.
    missing = _row(lines, "unequal", "local only")[4].split()[1]
    assert "no setting `unequal`" in notes[missing]
    assert _row(lines, "unequal", "SecFPP")[4] == f"n/a {missing}"
    assert len(notes) == 4


def test_render_accuracy_main_reads_the_privacy_json(tmp_path: Path) -> None:
    acc, priv = tmp_path / "accuracy.json", tmp_path / "privacy.json"
    acc.write_text(json.dumps(_accuracy()))
    priv.write_text(json.dumps(_privacy()))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{START}\n{END}\nrest\n")
    assert render_main(["--json", str(acc), "--privacy-json", str(priv), "--doc", str(readme)]) == 0
    text = readme.read_text()
    assert "| two-domain | local only | none | 0.850 | 0.512 ± 0.021 | 0.013 |" in text
    assert text.endswith(f"{END}\nrest\n")
    # Without the privacy report (or with one of the old single-setting format): no columns.
    old = dict(_privacy())
    del old["results"]
    priv.write_text(json.dumps(old))
    assert render_main(["--json", str(acc), "--privacy-json", str(priv), "--doc", str(readme)]) == 0
    assert "MIA AUC (LiRA)" not in readme.read_text()
    assert render(_accuracy()) == render(_accuracy(), None)
    with pytest.raises(
        ValueError, match="not a per-setting privacy report \\(no settings, generated\\)"
    ):
        privacy_table(_accuracy(), {"results": {}}, SETTING_LABELS)

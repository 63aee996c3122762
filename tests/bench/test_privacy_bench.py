"""``python -m bench.privacy --quick`` end to end on two settings (the report's structure, files
and README), and its pure parts: the summary over seeds and merging."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.privacy import run as privacy
from bench.privacy.report import END, START, render_markdown, write_doc_region
from bench.privacy.summary import SHARED_SETTINGS, summarize

# one worker runs the whole module: its tests share one quick run (quick_report), made once
# per session (a module-scoped fixture was made again whenever xdist ran another module's
# test between two of these)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("privacy_quick_report")]


SETTINGS = ("single", "two-domain")
PARTICIPANTS = privacy.QUICK["participants"]
PER_PARTICIPANT = 24  # fewer than --quick's 40, and one round instead of 2: half the time


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("privacy")
    readme = out / "README.md"
    readme.write_text(f"# Title\n\nabove\n{START}\nold table\n{END}\nbelow\n")
    code = privacy.main(
        [
            "--quick",
            "--rounds",
            "1",
            "--per-participant",
            str(PER_PARTICIPANT),
            "--workers",
            "1",
            "--settings",
            *SETTINGS,
            "--strategies",
            "local",
            "promptfl",
            "dpfpl",
            "secfpp",
            "no-such-strategy",
            "--out",
            str(out),
            "--doc",
            str(readme),
        ]
    )
    assert code == 0
    report: dict[str, Any] = json.loads((out / "privacy.json").read_text())
    assert (report["settings"]["rounds"], report["settings"]["per_participant"]) == (
        1,
        PER_PARTICIPANT,
    )
    return report, out


def _is_rate(value: object) -> bool:
    return isinstance(value, float) and 0.0 <= value <= 1.0 and math.isfinite(value)


def test_every_setting_and_method_has_a_row_with_attack_scores(
    quick_report: tuple[dict[str, Any], Path],
) -> None:
    report, _ = quick_report
    assert list(report["results"]) == list(SETTINGS)
    assert [(u["setting"], u["seed"]) for u in report["units"]] == [(s, 0) for s in SETTINGS]
    for setting in SETTINGS:
        result = report["results"][setting]
        assert result["seeds"] == [0]
        rows = {r["method"]: r for r in result["methods"]}
        assert list(rows) == ["local", "promptfl", "dpfpl eps=1", "secfpp", "no-such-strategy"]
        assert rows["no-such-strategy"]["status"] == "unavailable"
        assert "not registered" in rows["no-such-strategy"]["reason"]
        assert rows["dpfpl eps=1"]["epsilon"] == 1.0
        assert rows["secfpp"]["epsilon"] is None
        (unit,) = [u for u in report["units"] if u["setting"] == setting]
        unit_rows = {r["method"]: r for r in unit["methods"]}
        for name in ("local", "promptfl", "dpfpl eps=1", "secfpp"):
            row = rows[name]
            assert row["status"] == "ok", row
            assert row["seeds"] == 1
            assert row["accuracy_std"] is None  # one seed
            assert _is_rate(row["accuracy"])
            # One seed: the summary is the unit's row.
            assert row["accuracy"] == unit_rows[name]["accuracy"]
            assert row["lira"]["auc"] == unit_rows[name]["lira"]["auc"]
            assert row["lira"]["auc_se"] == pytest.approx(unit_rows[name]["lira"]["auc_se"])
            assert unit_rows[name]["cpu_seconds"] > 0
            for attack in ("loss_attack", "lira"):
                scores = row[attack]
                assert _is_rate(scores["auc"])
                assert _is_rate(scores["tpr_at_1pct_fpr"])
                assert scores["auc_se"] > 0
                # 4 participants x at most 24 images, round(80%) of each participant's members
                total = scores["members"] + scores["non_members"]
                assert PER_PARTICIPANT <= total <= PARTICIPANTS * PER_PARTICIPANT
                assert abs(scores["members"] - 0.8 * total) <= 4 * 0.5
    # The two settings are different data: their attack scores are not copies of each other.
    one, two = (report["results"][s]["methods"][0]["lira"]["auc"] for s in SETTINGS)
    assert one != two


def test_sensitivity_and_coordinator_sections(quick_report: tuple[dict[str, Any], Path]) -> None:
    report, _ = quick_report
    for unit in report["units"]:
        sens = unit["sensitivity"]
        assert isinstance(sens["sensitive"], bool)
        assert ("is sensitive" in sens["statement"]) == sens["sensitive"]
        assert sens["sensitive"] == (sens["margin"] > 0)
        assert _is_rate(sens["lira"]["auc"])
        views = {a["view"].split(":")[0] for a in unit["attribute_attacks"]}
        assert views == {"PromptFL", "SecFPP"}
        for attack in unit["attribute_attacks"]:
            assert _is_rate(attack["accuracy"])
            assert _is_rate(attack["chance"])
            assert attack["targets"] == 12  # 4 participants x (target + 2 shadows)
    gaussian, unit_sphere = report["coordinator"]["mutual_information"]
    assert (gaussian["prompts"], unit_sphere["prompts"]) == ("gaussian", "unit sphere")
    assert gaussian["mi_prompt_distance_inside"] < gaussian["mi_prompt_prompt"]
    assert report["cpu_seconds"] > 0


def test_files_and_readme_region(quick_report: tuple[dict[str, Any], Path]) -> None:
    report, out = quick_report
    assert (out / "privacy.png").stat().st_size > 1000
    table = (out / "privacy.md").read_text()
    assert table == render_markdown(report)
    for setting in SETTINGS:
        assert f"| {setting} | secfpp | ∞ (no DP) |" in table
        assert f"| {setting} | 0 | " in table  # its sensitivity row
        # The row that did not run points to one footnote with its reason, shared by settings.
        assert f"| {setting} | no-such-strategy | ∞ (no DP) | not run [1] |" in table
    assert table.count("[1] strategy 'no-such-strategy' is not registered") == 1
    readme = (out / "README.md").read_text()
    assert readme.startswith("# Title\n\nabove\n" + START + "\n")
    assert readme.endswith(END + "\nbelow\n")
    assert "old table" not in readme
    assert table in readme


def test_readme_without_markers_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="privacy-table"):
        write_doc_region(readme, "x")
    assert readme.read_text() == "no markers\n"


def test_arguments_default_to_the_accuracy_budgets_and_all_settings() -> None:
    args = privacy._arguments([])
    assert args.settings == ["single", "two-domain", "three-domain", "unequal"]
    assert sorted(args.budgets) == [0.1, 0.4, 1.0]
    labels = [m.label for m in privacy.plan_methods(args.budgets)]
    assert labels[2:5] == ["dpfpl eps=1", "dpfpl eps=0.4", "dpfpl eps=0.1"]
    with pytest.raises(SystemExit):
        privacy._arguments(["--seeds", "0"])
    with pytest.raises(SystemExit):
        privacy._arguments(["--settings", "four-domain"])


def test_quick_sets_defaults_that_options_given_override() -> None:
    quick = vars(privacy._arguments(["--quick"]))
    assert {key: quick[key] for key in privacy.QUICK} == privacy.QUICK
    assert quick["min_aggregation_size"] == 3  # participants - 1
    given = privacy._arguments(["--quick", "--rounds", "1", "--budgets", "0.5", "4"])
    assert (given.rounds, given.budgets, given.participants) == (1, [0.5, 4.0], 4)
    assert privacy._arguments(["--rounds", "1"]).participants == 10  # no --quick: the full run


def _row(method: str, auc: float = 0.5, se: float = 0.02, acc: float = 0.8) -> dict[str, Any]:
    score = {"auc": auc, "auc_se": se, "tpr_at_1pct_fpr": 0.01, "members": 8, "non_members": 2}
    return {
        "method": method,
        "strategy": method.split()[0],
        "epsilon": None,
        "status": "ok",
        "reason": None,
        "accuracy": acc,
        "shadow_accuracy_mean": acc,
        "shadow_accuracy_std": 0.01,
        "loss_attack": score,
        "lira": score,
        "cpu_seconds": 1.0,
    }


def _unit(
    setting: str, seed: int, rows: list[dict[str, Any]], attacks: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "setting": setting,
        "seed": seed,
        "methods": rows,
        "sensitivity": {"sensitive": True, "statement": "s"},
        "attribute_attacks": attacks or [],
        "seconds": 1.0,
        "cpu_seconds": 1.0,
    }


def test_summary_over_seeds() -> None:
    units = [
        _unit("two-domain", 1, [_row("local", 0.6, 0.03, 0.7)]),
        _unit("single", 0, [_row("local", 0.5, 0.02, 0.9)]),
        _unit("two-domain", 0, [_row("local", 0.5, 0.04, 0.8)]),
    ]
    failed = dict(_row("secfpp"), status="failed", reason="simulation failed: x")
    units[0]["methods"].append(failed)
    units[2]["methods"].append(_row("secfpp"))
    result = summarize(units)
    assert list(result) == ["single", "two-domain"]  # table order, not input order
    two = {r["method"]: r for r in result["two-domain"]["methods"]}
    assert result["two-domain"]["seeds"] == [0, 1]
    local = two["local"]
    assert local["accuracy"] == pytest.approx(0.75)
    assert local["accuracy_std"] == pytest.approx(0.0707107, rel=1e-5)  # ddof 1
    assert local["lira"]["auc"] == pytest.approx(0.55)
    assert local["lira"]["auc_se"] == pytest.approx(0.025)  # sqrt(0.04^2 + 0.03^2) / 2
    assert local["lira"]["members"] == 16
    # One failed seed fails the summary row (no average over the seeds that happened to run).
    assert two["secfpp"]["status"] == "failed"
    assert two["secfpp"]["reason"] == "simulation failed: x"
    assert result["single"]["methods"][0]["accuracy_std"] is None


def _report(units: list[dict[str, Any]], budgets: list[float]) -> dict[str, Any]:
    settings: dict[str, Any] = {key: 1 for key in SHARED_SETTINGS}
    strategies = sorted({r["method"].split()[0] for u in units for r in u["methods"]})
    settings.update(budgets=budgets, strategies=strategies)
    return {
        "seconds": 10.0,
        "cpu_seconds": 15.0,
        "settings": settings,
        "units": units,
        "results": summarize(units),
        "coordinator": {"mutual_information": []},
    }


def test_merge_keeps_old_units_and_rows_in_table_order() -> None:
    old_single = _unit("single", 0, [_row("local"), _row("secfpp"), _row("feddpa eps=1")])
    old_single["methods"][2]["status"] = "unavailable"
    old = _report(
        [old_single, _unit("unequal", 0, [_row("local")], [{"attack": "old"}])], [1.0, 2.0, 4.0]
    )
    new_rows = [_row("feddpa eps=4"), _row("feddpa eps=2"), _row("feddpa eps=1")]
    new = _report([_unit("single", 0, new_rows)], [1.0, 2.0, 4.0])
    order = [m.label for m in privacy.plan_methods([1.0, 2.0, 4.0])]
    merged = privacy.merge_reports(old, new, order)
    single = merged["results"]["single"]["methods"]
    assert [r["method"] for r in single] == [
        "local",
        "feddpa eps=4",
        "feddpa eps=2",
        "feddpa eps=1",
        "secfpp",
    ]
    assert all(r["status"] == "ok" for r in single)  # the new row replaced the old
    assert list(merged["results"]) == ["single", "unequal"]  # the old-only unit is kept
    assert merged["units"][1]["attribute_attacks"] == [{"attack": "old"}]
    assert merged["seconds"] == 20.0
    assert merged["cpu_seconds"] == 30.0
    assert merged["invocations"] == 2
    assert merged["settings"]["strategies"] == ["feddpa", "local", "secfpp"]
    assert merged["settings"]["settings"] == ["single", "unequal"]


def test_merge_refuses_other_settings_and_old_reports() -> None:
    old = _report([_unit("single", 0, [_row("local")])], [1.0, 2.0, 4.0])
    new = _report([_unit("single", 0, [_row("secfpp")])], [1.0, 2.0, 4.0])
    new["settings"]["rounds"] = 7
    with pytest.raises(ValueError, match="rounds = 1, but this run has 7"):
        privacy.merge_reports(old, new)
    legacy = {k: v for k, v in old.items() if k != "units"}
    with pytest.raises(ValueError, match="earlier format"):
        privacy.merge_reports(legacy, old)

"""``python -m bench.privacy --quick`` end to end: the report's structure, files and README."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import privacy
from bench.privacy_report import END, START, render_markdown, write_readme_region

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("privacy")
    readme = out / "README.md"
    readme.write_text(f"# Title\n\nabove\n{START}\nold table\n{END}\nbelow\n")
    code = privacy.main(
        [
            "--quick",
            "--workers",
            "1",
            "--strategies",
            "local",
            "promptfl",
            "dpfpl",
            "secfpp",
            "no-such-strategy",
            "--out",
            str(out),
            "--readme",
            str(readme),
        ]
    )
    assert code == 0
    return json.loads((out / "privacy.json").read_text()), out


def _is_rate(value: object) -> bool:
    return isinstance(value, float) and 0.0 <= value <= 1.0 and math.isfinite(value)


def test_every_method_has_a_row_with_attack_scores(quick_report: tuple[dict, Path]) -> None:
    report, _ = quick_report
    rows = {r["method"]: r for r in report["methods"]}
    assert list(rows) == ["local", "promptfl", "dpfpl eps=1", "secfpp", "no-such-strategy"]
    assert rows["no-such-strategy"]["status"] == "unavailable"
    assert "not registered" in rows["no-such-strategy"]["reason"]
    assert rows["dpfpl eps=1"]["epsilon"] == 1.0
    assert rows["secfpp"]["epsilon"] is None
    for name in ("local", "promptfl", "dpfpl eps=1", "secfpp"):
        row = rows[name]
        assert row["status"] == "ok", row
        assert _is_rate(row["accuracy"])
        for attack in ("loss_attack", "lira"):
            scores = row[attack]
            assert _is_rate(scores["auc"])
            assert _is_rate(scores["tpr_at_1pct_fpr"])
            assert scores["auc_se"] > 0
            # 4 participants x at most 40 images, round(80%) of each participant's members
            total = scores["members"] + scores["non_members"]
            assert 40 <= total <= 160
            assert abs(scores["members"] - 0.8 * total) <= 4 * 0.5


def test_sensitivity_and_coordinator_sections(quick_report: tuple[dict, Path]) -> None:
    report, _ = quick_report
    sens = report["sensitivity"]
    assert isinstance(sens["sensitive"], bool)
    assert ("is sensitive" in sens["statement"]) == sens["sensitive"]
    assert _is_rate(sens["lira"]["auc"])
    gaussian, unit = report["coordinator"]["mutual_information"]
    assert (gaussian["prompts"], unit["prompts"]) == ("gaussian", "unit sphere")
    mi = gaussian
    assert mi["mi_prompt_distance_inside"] < mi["mi_prompt_prompt"]
    views = {a["view"].split(":")[0] for a in report["coordinator"]["attribute_attacks"]}
    assert views == {"PromptFL", "SecFPP"}
    for attack in report["coordinator"]["attribute_attacks"]:
        assert _is_rate(attack["accuracy"])
        assert _is_rate(attack["chance"])
        assert attack["targets"] == 12  # 4 participants x (target + 2 shadows)


def test_files_and_readme_region(quick_report: tuple[dict, Path]) -> None:
    report, out = quick_report
    assert (out / "privacy.png").stat().st_size > 1000
    table = (out / "privacy.md").read_text()
    assert table == render_markdown(report)
    assert "| secfpp | ∞ (no DP) |" in table
    readme = (out / "README.md").read_text()
    assert readme.startswith("# Title\n\nabove\n" + START + "\n")
    assert readme.endswith(END + "\nbelow\n")
    assert "old table" not in readme
    assert table in readme


def test_readme_without_markers_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="privacy-table"):
        write_readme_region(readme, "x")
    assert readme.read_text() == "no markers\n"


def _report(methods: list[str], budgets: list[float], attacks: list[dict]) -> dict:
    settings = {key: 1 for key in privacy.SHARED_SETTINGS}
    settings.update(budgets=budgets, strategies=sorted({m.split()[0] for m in methods}))
    return {
        "seconds": 10.0,
        "settings": settings,
        "methods": [{"method": m, "status": "ok"} for m in methods],
        "sensitivity": {"statement": "s"},
        "coordinator": {"mutual_information": [], "attribute_attacks": attacks},
    }


def test_merge_keeps_old_rows_in_table_order() -> None:
    old = _report(["local", "secfpp", "feddpa eps=1"], [1.0, 2.0, 4.0], [{"attack": "old"}])
    old["methods"][2]["status"] = "unavailable"
    new = _report(["feddpa eps=4", "feddpa eps=2", "feddpa eps=1"], [1.0, 2.0, 4.0], [])
    merged = privacy.merge_reports(old, new)
    assert [r["method"] for r in merged["methods"]] == [
        "local",
        "feddpa eps=4",
        "feddpa eps=2",
        "feddpa eps=1",
        "secfpp",
    ]
    assert all(r["status"] == "ok" for r in merged["methods"])  # the new row replaced the old
    assert merged["seconds"] == 20.0
    assert merged["invocations"] == 2
    assert merged["coordinator"]["attribute_attacks"] == [{"attack": "old"}]
    assert merged["settings"]["strategies"] == ["feddpa", "local", "secfpp"]


def test_merge_refuses_other_settings() -> None:
    old = _report(["local"], [1.0, 2.0, 4.0], [])
    new = _report(["secfpp"], [1.0, 2.0, 4.0], [])
    new["settings"]["rounds"] = 7
    with pytest.raises(ValueError, match="rounds = 1, but this run has 7"):
        privacy.merge_reports(old, new)

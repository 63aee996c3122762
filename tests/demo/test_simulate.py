"""``python -m demo.simulate`` on generated folders and CSVs: end to end, spec files, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from demo.data import DOMAINS, unregister_domain
from demo.simulate import DEFAULT_METHODS, _parser, analyse_clusters, build_spec, main

MODES = [("RGB", (40, 28), "png"), ("L", (20, 36), "jpg"), ("RGBA", (33, 33), "png")]


def write_domains(root: Path, per_class: int = 20) -> dict[str, Path]:
    """Two folder domains of tiny images, mixed sizes, modes and formats: ``tones`` (dark or
    light flat grey) and ``stripes`` (horizontal or vertical)."""
    rng = np.random.default_rng(0)
    out = {}
    for domain, classes in (("tones", ("dark", "light")), ("stripes", ("horizontal", "vertical"))):
        for c in classes:
            (root / domain / c).mkdir(parents=True)
            for k in range(per_class):
                mode, (w, h), ext = MODES[k % len(MODES)]
                if domain == "tones":
                    low, high = (0, 80) if c == "dark" else (170, 256)
                    pixels = np.full((h, w), int(rng.integers(low, high)), dtype=np.uint8)
                else:
                    pixels = np.zeros((h, w), dtype=np.uint8)
                    if c == "horizontal":
                        pixels[::3] = 255
                    else:
                        pixels[:, ::3] = 255
                Image.fromarray(pixels, "L").convert(mode).save(root / domain / c / f"{k}.{ext}")
        out[domain] = root / domain
    return out


@pytest.fixture
def cleanup() -> Iterator[None]:
    before = set(DOMAINS)
    yield
    for name in set(DOMAINS) - before:
        unregister_domain(name)


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.usefixtures("cleanup")
def test_quick_simulation_on_generated_folders_writes_json_and_png(tmp_path: Path) -> None:
    folders = write_domains(tmp_path / "data")
    out = tmp_path / "out"
    argv = ["--domain", f"tones={folders['tones']}", "--domain", str(folders["stripes"])]
    assert main([*argv, "--quick", "--out", str(out)]) == 0
    result = json.loads((out / "simulate.json").read_text())
    assert result["meta"]["setting"] == "tones+stripes"
    assert result["meta"]["group_sizes"] == {"tones": 3, "stripes": 3}
    assert result["meta"]["rounds"] == 1
    (seed,) = result["seeds"]
    assert seed["seed"] == 0
    assert list(seed["methods"]) == list(DEFAULT_METHODS)
    for method in DEFAULT_METHODS:
        run = seed["methods"][method]
        assert len(run["accuracy"]) == 6
        assert all(0 <= a <= 1 for a in run["accuracy"].values())
        assert run["mean"] == pytest.approx(np.mean(list(run["accuracy"].values())), abs=1e-4)
        assert run["p10"] <= run["mean"]
    clustering = seed["clustering"]
    assert len(clustering["purity"]) == len(clustering["clusters"]) == 1
    members = [m for c in clustering["members"][0] for m in c]
    assert sorted(members) == sorted(
        [f"p{i} (tones)" for i in range(3)] + [f"p{i} (stripes)" for i in range(3, 6)]
    )
    assert result["summary"]["seeds"] == 1
    assert set(result["summary"]["methods"]) == set(DEFAULT_METHODS)
    assert (out / "simulate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_corrupt_image_stops_the_run_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folders = write_domains(tmp_path / "data", per_class=3)
    (folders["stripes"] / "vertical" / "1.jpg").write_bytes(b"\xff\xd8 truncated")
    code = main(["--domain", str(folders["stripes"]), "--quick", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "stripes/vertical/1.jpg: not a readable image" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.usefixtures("cleanup")
def test_spec_file_with_csv_domain_and_flags_that_override_it(tmp_path: Path) -> None:
    folders = write_domains(tmp_path / "data", per_class=3)
    table = tmp_path / "tones.csv"
    rows = [
        f"{f.relative_to(tmp_path)},{f.parent.name}" for f in sorted(folders["tones"].rglob("*.*"))
    ]
    table.write_text("path,label\n" + "\n".join(rows) + "\n")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(
        json.dumps(
            {
                "domains": [
                    {"name": "tone_table", "path": "tones.csv", "share": 2, "prompt": "a {} tone."},
                    "printed_digits",
                ],
                "participants": 9,
                "rounds": 5,
                "seeds": [3, 4],
                "clustering": {"max_trim": 1},
                "methods": ["secfpp", "local"],
            }
        )
    )
    parser = _parser()
    args = parser.parse_args(["--spec", str(spec_file), "--rounds", "2"])
    spec = build_spec(args, {"rounds"})
    assert spec.rounds == 2  # the flag wins
    assert spec.participants == 9
    assert spec.seeds == [3, 4]
    assert spec.clustering == {"max_trim": 1}
    assert [(d.text, d.share, d.prompt) for d in spec.domains] == [
        ("tone_table=tones.csv", 2, "a {} tone."),
        ("printed_digits", 1, None),
    ]
    from demo.simulate import _check

    setting, participants = _check(spec)  # relative paths: from the spec file's folder
    assert (setting, participants) == ("tone_table@2+printed_digits", 9)
    assert DOMAINS["tone_table"].prompt_template == "a {} tone."
    assert DOMAINS["tone_table"].class_names == ("dark", "light")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"domain": ["x"]}, "unknown keys ['domain']"),
        ({"domains": [{"share": 2}]}, "name or path required"),
        ({"domains": ["printed_digits@0"]}, "share must be a positive integer"),
        ({"domains": ["printed_digits"], "methods": ["fedavg"]}, "methods must be among"),
        ({"domains": ["printed_digits"], "clustering": {"no_such": 1}}, "clustering: "),
        ({"domains": ["nowhere/at/all"]}, "does not exist"),
    ],
)
def test_bad_specs_are_refused_before_any_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: dict[str, object], message: str
) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(content))
    assert main(["--spec", str(spec_file), "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


def test_spec_files_in_other_encodings_are_read_or_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A byte-order mark (Windows Notepad's "UTF-8") is read; Latin-1 is refused by name."""
    from demo.simulate import load_spec

    spec_file = tmp_path / "spec.json"
    spec_file.write_bytes(json.dumps({"domains": ["printed_digits"]}).encode("utf-8-sig"))
    assert load_spec(spec_file)["domains"] == ["printed_digits"]
    spec_file.write_bytes('{"domains": ["caf\xe9"]}'.encode("latin-1"))
    assert main(["--spec", str(spec_file), "--out", str(tmp_path / "o")]) == 2
    assert f"--spec {spec_file}: not UTF-8 text" in capsys.readouterr().err


def test_analyse_clusters_known_answers() -> None:
    domains = {"a": "x", "b": "x", "c": "x", "d": "y", "e": "y", "f": "y"}
    rounds = [
        [["a", "b", "c", "d", "e", "f"]],  # together: purity 1/2
        [["a", "b", "c", "d"], ["e", "f"]],  # y split across two clusters: purity 5/6
        [["a", "b", "c"], ["d", "e", "f"]],  # found
        [["a", "b", "c"], ["d", "e", "f"]],
        [["a", "b"], ["c"], ["d", "e", "f"]],  # x fragmented: a false split after finding
    ]
    out = analyse_clusters(rounds, domains)
    assert out["clusters"] == [1, 2, 2, 2, 3]
    assert out["purity"] == [0.5, pytest.approx(5 / 6, abs=1e-4), 1.0, 1.0, 1.0]
    assert out["parted_round"] == 3
    assert out["found_round"] == 3
    assert out["changes_after_parted"] == 1
    assert out["false_splits"] == [[], ["y"], [], [], ["x"]]
    assert out["false_split"] is True
    single = analyse_clusters([[["a", "b", "c"]]], {"a": "x", "b": "x", "c": "x"})
    assert single["found_round"] == 1
    assert single["false_split"] is False

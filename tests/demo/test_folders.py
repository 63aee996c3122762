"""``python -m demo.folders`` writes disjoint class folders the daemon's reader accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo.folders import main, write_folders
from secfpp.participant.learning.data import read_image_folder


def test_folders_are_disjoint_and_readable(tmp_path: Path) -> None:
    parts = write_folders("handwritten_digits", tmp_path, parts=2, per_part=40)
    assert [p.name for p in parts] == ["part-0", "part-1"]
    names = [sorted(q.read_bytes() for q in p.rglob("*.png")) for p in parts]
    assert [len(n) for n in names] == [40, 40]
    assert not set(names[0]) & set(names[1])  # no image in both folders
    samples = read_image_folder(parts[0], transform=lambda image: image)
    assert len(samples) == 40


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_bad_requests_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--domain", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown domain 'nope'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="fewer than"):
        write_folders("printed_letters", tmp_path, parts=1000, per_part=1000)
    assert not any(tmp_path.iterdir())

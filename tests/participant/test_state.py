"""The participant state directory: atomic writes, permissions, clear errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from participant.state import StateDir, StateError, atomic_write


def test_identity_and_key_are_private(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "p")
    state.save_identity({"participant_id": 3, "index": 2}, b"k" * 32)
    assert state.exists()
    assert state.identity() == {"participant_id": 3, "index": 2}
    assert state.private_key() == b"k" * 32
    for name in (StateDir.KEY, StateDir.IDENTITY):
        assert stat.S_IMODE((state.root / name).stat().st_mode) == 0o600
    assert stat.S_IMODE(state.root.stat().st_mode) == 0o700


def test_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save_identity({}, b"k" * 32)
    os.chmod(tmp_path / StateDir.KEY, 0o644)
    with pytest.raises(StateError, match="chmod 600"):
        state.private_key()


def test_missing_state_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(StateError, match=r"identity\.json does not exist.*enroll"):
        StateDir(tmp_path).identity()


def test_atomic_write_leaves_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.json"
    atomic_write(target, b"old")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # no temporary left behind


def test_arrays_and_progress_round_trip(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    assert state.progress() == {"round": None}
    state.save_progress({"round": 4, "stage": "sharing"})
    assert state.progress() == {"round": 4, "stage": "sharing"}
    prompt = np.arange(12, dtype=np.float32).reshape(3, 4)
    state.write_array("prompts/local.npy", prompt)
    np.testing.assert_array_equal(state.read_array("prompts/local.npy"), prompt)
    assert state.read_array("prompts/none.npy") is None
    state.write_bytes(state.share_path(1, "sharing", 5), b"abc")
    state.write_bytes(state.share_path(2, "sharing", 5), b"def")
    state.drop_round_shares(keep_round=2)
    assert state.read_bytes(state.share_path(1, "sharing", 5)) is None
    assert state.read_bytes(state.share_path(2, "sharing", 5)) == b"def"

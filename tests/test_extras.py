"""Each install extra carries what its entry points import, and nothing of the other role.

* **Imports** (fast, no network): in a fresh interpreter, every third-party module that does
  not belong to the extra's dependency closure (read from the installed metadata) is made
  unimportable; the role's entry points must still import, build their parser and answer
  ``--help`` (the coordinator also builds its app). A module of the other role that sneaks
  into an entry point's import graph fails this test.
* **What pip would install** (no network: :func:`tests.support.extras.closure`): the
  requirements of ``secfpp[EXTRA]`` (from ``pyproject.toml``) followed through the installed
  metadata of every dependency at the version ``constraints.txt`` pins, which is what
  ``pip install -c constraints.txt ".[EXTRA]"`` installs here: ``.[coordinator]`` pulls no
  torch, ``.[participant]`` no web server or database driver, and neither pulls the
  test-only ``galois``.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.common import skip_or_fail
from tests.support.extras import (
    closure,
    installed_requires,
    normalize,
    project_requires,
    read_pins,
)

ROOT = Path(__file__).resolve().parent.parent

# Runs in the child: block every top-level module whose distribution is outside the closure.
BLOCKER = textwrap.dedent(
    """
    import importlib.abc, importlib.machinery, importlib.metadata as md, sys
    from tests.support.extras import closure, normalize

    allowed = closure(ROLE)
    owners = md.packages_distributions()
    blocked = {
        module
        for module, dists in owners.items()
        if not any(normalize(d) in allowed for d in dists)
    } - {"secfpp", "crypto", "coordinator", "participant", "migrations", "_distutils_hack"}

    class Absent(importlib.abc.Loader):
        # importing fails as for a package that is not installed; a bare find_spec (which
        # torch uses to probe optional packages) sees a spec without origin
        def create_module(self, spec):
            raise ModuleNotFoundError(f"{spec.name} is not part of the [{ROLE}] install")

        def exec_module(self, module):
            raise ModuleNotFoundError(module.__name__)

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in blocked:
                return importlib.machinery.ModuleSpec(name, Absent(), origin=None)
            return None

    sys.meta_path.insert(0, Blocker())
    """
)

ROLES = {
    "coordinator": """
        import secfpp.coordinator.app
        import secfpp.coordinator.cli
        from secfpp.coordinator.settings import Settings
        secfpp.coordinator.app.create_app(Settings(database_url="sqlite:///" + TMP + "/x.db"))
        for command in ("serve", "worker", "migrate", "certs"):
            try:
                secfpp.coordinator.cli.COMMANDS[command](["--help"])
            except SystemExit as exc:
                assert exc.code == 0, (command, exc.code)
        assert "torch" not in sys.modules
    """,
    "participant": """
        import secfpp.participant.cli
        for argv in (["--help"], ["run", "--help"], ["enroll", "--help"]):
            try:
                secfpp.participant.cli.main(argv)
            except SystemExit as exc:
                assert exc.code == 0, (argv, exc.code)
        import secfpp.participant.trainer
        for module in ("fastapi", "sqlalchemy", "uvicorn", "psycopg"):
            assert module not in sys.modules, module
    """,
}


@pytest.mark.parametrize(
    "role",
    [
        # importing torch and open_clip takes the participant's case over 7 s
        pytest.param(r, marks=pytest.mark.slow) if r == "participant" else r
        for r in sorted(ROLES)
    ],
)
def test_entry_points_import_only_their_extra(role: str, tmp_path: Path) -> None:
    code = f"ROLE = {role!r}\nTMP = {str(tmp_path)!r}\n" + BLOCKER + textwrap.dedent(ROLES[role])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]


UNPINNED = {"pip", "setuptools", "wheel"}
"""What ``pip freeze`` leaves out of constraints.txt (torch needs setuptools): pip takes any
version of them, whose requirements are read from the installed one."""


def _would_install(extra: str) -> set[str]:
    """The distributions ``pip install -c constraints.txt ".[extra]"`` installs here."""
    pins = read_pins(ROOT / "constraints.txt")
    names = closure(extra, lambda name: _pinned_requires(name, pins))
    return names - {"secfpp"}


def _pinned_requires(name: str, pins: dict[str, str]) -> list[str]:
    if normalize(name) == "secfpp":
        return project_requires(ROOT / "pyproject.toml")
    requires = installed_requires(name)
    if requires is None:
        skip_or_fail(f"{name} is not installed: install .[dev] with -c constraints.txt")
    version = md.version(name)
    pin = pins.get(normalize(name))
    if pin is None and normalize(name) in UNPINNED:
        return requires
    if version != pin:
        skip_or_fail(
            f"{name} {version} is installed, constraints.txt pins {pin}: the installed "
            "metadata is not what pip would install (reinstall with -c constraints.txt)"
        )
    return requires


def test_pip_installs_no_other_role() -> None:
    coordinator = _would_install("coordinator")
    participant = _would_install("participant")
    assert {"fastapi", "sqlalchemy", "uvicorn"} <= coordinator
    assert not {"torch", "torchvision", "open-clip-torch", "galois"} & coordinator
    assert {"torch", "open-clip-torch", "httpx"} <= participant
    web = {
        "fastapi",
        "starlette",
        "uvicorn",
        "sqlalchemy",
        "psycopg",
        "psycopg-binary",
        "alembic",
        "procrastinate",
        "galois",
    }
    assert not web & participant


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_wheel_holds_only_the_deployed_parts(tmp_path: Path) -> None:
    """bench/, demo/ (and the demo's data sets) and tests/ never land in site-packages."""
    import zipfile

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("secfpp-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
    packages = {name for name in top if not name.endswith((".dist-info", ".data"))}
    assert packages == {"secfpp"}
    names = set(archive.namelist())
    parts = (
        "crypto/field.py",
        "coordinator/app.py",
        "federation/backbones.json",  # prompt.dim of a pinned backbone
        "participant/cli.py",
        "participant/backbones/weights/tiny-offline.pt",
        "migrations/env.py",
        "migrations/script.py.mako",
    )
    for part in parts:
        assert f"secfpp/{part}" in names, part

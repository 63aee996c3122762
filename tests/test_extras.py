"""Each install extra carries what its entry points import, and nothing of the other role.

* **Imports** (fast, no network): in a fresh interpreter, every third-party module that does
  not belong to the extra's dependency closure (read from the installed metadata) is made
  unimportable; the role's entry points must still import, build their parser and answer
  ``--help`` (the coordinator also builds its app). A module of the other role that sneaks
  into an entry point's import graph fails this test.
* **What pip would install** (``pip install --dry-run --report``, resolving from the package
  index with ``constraints.txt``): ``.[coordinator]`` pulls no torch, ``.[participant]`` no web
  server or database driver, and neither pulls the test-only ``galois``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.common import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent

# Runs in the child: block every top-level module whose distribution is outside the closure.
BLOCKER = textwrap.dedent(
    """
    import importlib.abc, importlib.machinery, importlib.metadata as md, re, sys
    from packaging.requirements import Requirement

    def closure(extra):
        todo, seen = [("secfpp", {extra})], set()
        while todo:
            name, extras = todo.pop()
            key = re.sub(r"[-_.]+", "-", name).lower()
            for e in {""} | set(extras):
                if (key, e) in seen:
                    continue
                seen.add((key, e))
                try:
                    requires = md.distribution(name).requires or []
                except md.PackageNotFoundError:
                    continue
                for text in requires:
                    req = Requirement(text)
                    if req.marker is None:
                        wanted = e == ""  # unconditional: counted once, with no extra
                    else:
                        wanted = req.marker.evaluate({"extra": e})
                    if wanted:
                        todo.append((req.name, set(req.extras)))
        return {k for k, _ in seen}

    allowed = closure(ROLE)
    owners = md.packages_distributions()
    blocked = {
        module
        for module, dists in owners.items()
        if not any(re.sub(r"[-_.]+", "-", d).lower() in allowed for d in dists)
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


@pytest.mark.parametrize("role", sorted(ROLES))
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


def _would_install(extra: str, tmp_path: Path) -> set[str]:
    report = tmp_path / f"{extra}.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            "-c",
            str(ROOT / "constraints.txt"),
            f"{ROOT}[{extra}]",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        skip_or_fail(f"pip could not resolve .[{extra}]: {result.stderr[-2000:]}")
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    return {n.replace("_", "-") for n in names}


@pytest.mark.slow
def test_pip_installs_no_other_role(tmp_path: Path) -> None:
    coordinator = _would_install("coordinator", tmp_path)
    participant = _would_install("participant", tmp_path)
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
        "coordinator/federations/backbones.json",  # prompt.dim of a pinned backbone
        "participant/cli.py",
        "participant/backbones/weights/tiny-offline.pt",
        "migrations/env.py",
        "migrations/script.py.mako",
    )
    for part in parts:
        assert f"secfpp/{part}" in names, part

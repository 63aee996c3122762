"""What an install extra of secfpp pulls in, read from package metadata (no network).

:func:`closure` walks the requirements from ``secfpp[EXTRA]`` down, extras of the
dependencies included (``uvicorn[standard]``), evaluating environment markers here. With
secfpp's requirements read from ``pyproject.toml`` and every other distribution's from
its installed metadata at the version ``constraints.txt`` pins, it is the set of
distributions ``pip install -c constraints.txt ".[EXTRA]"`` installs on this platform:
pip installs nothing that no requirement names, and a distribution's requirements
are those of its metadata at that version. (``tests/test_extras.py`` also runs the
closure inside a child interpreter, with installed metadata only.)
"""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import Requirement

__all__ = ["closure", "installed_requires", "normalize", "project_requires", "read_pins"]


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares it (``Open_Clip.torch`` -> ``open-clip-torch``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_requires(name: str) -> list[str] | None:
    """The requirement lines of the installed distribution ``name``; None if not installed."""
    try:
        return md.distribution(name).requires or []
    except md.PackageNotFoundError:
        return None


def project_requires(pyproject: Path) -> list[str]:
    """secfpp's requirement lines as its built metadata writes them: the optional
    dependencies carry an ``extra == "NAME"`` marker."""
    project = tomllib.loads(pyproject.read_text())["project"]
    lines = list(project["dependencies"])
    for extra, requirements in project["optional-dependencies"].items():
        for text in requirements:
            req = Requirement(text)
            marker = f'extra == "{extra}"'
            if req.marker is not None:
                marker = f"({req.marker}) and {marker}"
            req.marker = None
            lines.append(f"{req} ; {marker}")
    return lines


def closure(
    extra: str, requires: Callable[[str], list[str] | None] = installed_requires
) -> set[str]:
    """The normalized names of every distribution ``secfpp[extra]`` pulls in (secfpp too).

    ``requires(name)`` gives a distribution's requirement lines (None: unknown, its own
    requirements are not followed)."""
    todo, seen = [("secfpp", {extra})], set()
    while todo:
        name, extras = todo.pop()
        key = normalize(name)
        for e in {""} | set(extras):
            if (key, e) in seen:
                continue
            seen.add((key, e))
            for text in requires(name) or []:
                req = Requirement(text)
                # unconditional: counted once, with no extra
                wanted = e == "" if req.marker is None else req.marker.evaluate({"extra": e})
                if wanted:
                    todo.append((req.name, set(req.extras)))
    return {k for k, _ in seen}


def read_pins(constraints: Path) -> dict[str, str]:
    """``constraints.txt``'s ``name==version`` lines, by normalized name."""
    pins = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[normalize(name)] = version.strip()
    return pins

"""The crypto core is pure: it imports no web, database, HTTP client or torch module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "crypto"
FORBIDDEN = {
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "psycopg2",
    "httpx",
    "requests",
    "urllib3",
    "aiohttp",
    "torch",
    "torchvision",
    "open_clip",
    "coordinator",
    "participant",
    "pydantic_settings",
}


def test_no_forbidden_imports_in_source() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_importing_the_core_loads_no_forbidden_module() -> None:
    modules = [p.stem for p in CORE.glob("*.py") if p.stem != "__init__"]
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module('crypto.' + m)\n"
        "import crypto.dp\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=CORE.parent
    )
    assert out.stdout.strip() == ""

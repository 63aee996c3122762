"""Who may import whom around the wire schema (secfpp/wire).

* the round core (``coordinator/rounds``) and the federations' service
  (``coordinator/federations``) build wire messages and never import the HTTP layer
  (``secfpp.coordinator.api``; the API's bounds live in ``secfpp.wire.limits``);
* the federation configuration (``secfpp/federation``), which both sides parse, imports
  neither side: only the crypto core, the wire schema, pydantic and the standard library;
* the participant package never imports the coordinator (it parses the coordinator's
  answers with ``secfpp.wire``);
* ``secfpp.wire`` itself is pydantic and the standard library only, so both installs carry it.

Every import a module states counts, a deferred one inside a function included.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``path`` (``from a import b`` gives
    ``a.b`` as well as ``a``, so that ``from secfpp.coordinator import api`` is seen)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _offenders(folder: Path, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted(folder.rglob("*.py"))
        for line, name in _imports(path)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


def test_round_core_does_not_import_the_http_layer() -> None:
    offenders = _offenders(ROOT / "coordinator" / "rounds", ("secfpp.coordinator.api",))
    assert not offenders, "the round core imports the HTTP layer:\n" + "\n".join(offenders)


def test_federation_config_does_not_import_the_http_layer() -> None:
    offenders = _offenders(ROOT / "coordinator" / "federations", ("secfpp.coordinator.api",))
    assert not offenders, "the federation config imports the HTTP layer:\n" + "\n".join(offenders)


def test_federation_config_imports_neither_side() -> None:
    offenders = _offenders(
        ROOT / "secfpp" / "federation",
        ("secfpp.coordinator", "secfpp.participant", "coordinator", "participant"),
    )
    assert not offenders, "the federation config imports a side:\n" + "\n".join(offenders)


def test_participant_never_imports_the_coordinator() -> None:
    offenders = _offenders(ROOT / "participant", ("secfpp.coordinator", "coordinator"))
    assert not offenders, "the participant imports the coordinator:\n" + "\n".join(offenders)


def test_wire_schema_imports_pydantic_and_the_standard_library_only() -> None:
    allowed = ("pydantic", "pydantic_core", "secfpp.wire", "__future__")
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted((ROOT / "secfpp" / "wire").rglob("*.py"))
        for line, name in _imports(path)
        if name.split(".")[0] not in sys.stdlib_module_names
        and not any(name == a or name.startswith(a + ".") for a in allowed)
    ]
    assert not offenders, "\n".join(offenders)
    code = (
        "import sys, secfpp.wire.messages, secfpp.wire.headers\n"
        "bad = ('fastapi', 'starlette', 'sqlalchemy', 'torch', 'httpx', 'secfpp.coordinator',"
        " 'secfpp.participant')\n"
        "print(sorted(m for m in sys.modules if m.startswith(bad)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_the_checker_sees_each_form_of_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import secfpp.coordinator.api.schemas\n"
        "from secfpp.coordinator import api\n"
        "def f():\n    from secfpp.coordinator.api.schemas import Task\n"
    )
    names = [name for _, name in _imports(module)]
    assert "secfpp.coordinator.api.schemas" in names
    assert "secfpp.coordinator.api" in names  # from secfpp.coordinator import api
    assert "secfpp.coordinator.api.schemas.Task" in names  # the deferred import

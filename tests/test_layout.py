"""The source layout's rules, checked on every Python file of the checkout.

* Everything installable is imported under the one name ``secfpp``: a bare ``import crypto``
  (or ``coordinator``, ``participant``, ``migrations``) would load a second copy of a module
  from the checkout, and in a wheel install it would find another distribution's ``crypto``.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PARTS = {"crypto", "coordinator", "participant", "migrations"}


def _python_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    paths = [ROOT / name for name in listed if not name.startswith("secfpp/")]
    return [path for path in paths if path.is_file()]


def _bare_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in PARTS]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] in PARTS
        ):
            found.append((node.lineno, node.module))
    return found


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_no_module_imports_a_part_by_its_bare_name() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _python_files()
        for line, name in _bare_imports(ast.parse(path.read_text(), str(path)))
    ]
    assert not offenders, "import these as secfpp.<part>:\n" + "\n".join(offenders)


def test_the_checker_sees_a_bare_import() -> None:
    source = "import crypto.field\nfrom coordinator import app\nfrom secfpp import crypto\n"
    tree = ast.parse(source)
    assert _bare_imports(tree) == [(1, "crypto.field"), (2, "coordinator")]


def test_secfpp_links_every_part() -> None:
    for part in PARTS:
        link = ROOT / "secfpp" / part
        assert link.is_symlink(), part
        assert link.resolve() == (ROOT / part).resolve(), part

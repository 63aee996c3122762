"""The test suite's own layout rules.

* A conftest holds fixtures and pytest hooks only; what fixtures and tests share (constants,
  fakes, builders, process harnesses) lives once in ``tests/support`` and is imported from
  there, never from a conftest.
* In-process tests reach the app through ``tests.support.asgi.TestClient`` (one thread hop
  a request), never Starlette's or FastAPI's own ``TestClient``.
* Every marker is registered once, in ``pyproject.toml``, and ``slow`` is part of the default
  run (only ``bash dev.sh quick`` leaves it out).
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# markers pytest and its plugins register themselves
PLUGIN_MARKERS = {
    "parametrize",
    "skip",
    "skipif",
    "xfail",
    "usefixtures",
    "filterwarnings",
    "timeout",
    "xdist_group",
}


def _is_fixture(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            return True
    return False


def _not_fixtures_or_hooks(source: str) -> list[str]:
    """Top-level classes and functions of a conftest that are neither fixtures nor hooks."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            found.append(f"class {node.name}")
        elif isinstance(node, ast.FunctionDef) and not (
            node.name.startswith("pytest_") or _is_fixture(node)
        ):
            found.append(f"def {node.name}")
    return found


def test_conftests_hold_only_fixtures_and_hooks() -> None:
    offenders = {
        str(path.relative_to(ROOT)): bad
        for path in sorted(TESTS.rglob("conftest.py"))
        if (bad := _not_fixtures_or_hooks(path.read_text()))
    }
    assert offenders == {}, f"move these to tests/support: {offenders}"


def test_the_conftest_check_sees_a_helper() -> None:
    source = (
        "import pytest\n\nclass FakeClock: ...\n\ndef make_settings(): ...\n\n"
        "@pytest.fixture\ndef clock(): ...\n\ndef pytest_configure(config): ...\n"
    )
    assert _not_fixtures_or_hooks(source) == ["class FakeClock", "def make_settings"]


def test_no_test_module_imports_a_conftest() -> None:
    pattern = re.compile(r"^\s*from\s+(\S*conftest)\s+import|^\s*from\s+\S+\s+import\s+conftest\b")
    offenders = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name != "conftest.py"
        for line in path.read_text().splitlines()
        if pattern.match(line)
    ]
    assert offenders == []


# the one module that wraps Starlette's client, and the test comparing the two
OWN_CLIENT_EXEMPT = {"tests/support/asgi.py", "tests/test_asgi_client.py"}
FOREIGN_CLIENT = re.compile(r"^\s*from\s+(fastapi|starlette)\.testclient\s+import\b")


def test_in_process_tests_use_the_suites_test_client() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        if str(path.relative_to(ROOT)) not in OWN_CLIENT_EXEMPT
        for line in path.read_text().splitlines()
        if FOREIGN_CLIENT.match(line)
    ]
    assert offenders == [], "import TestClient from tests.support.asgi"


def test_the_client_check_sees_both_foreign_imports() -> None:
    assert FOREIGN_CLIENT.match("from fastapi.testclient import TestClient")
    assert FOREIGN_CLIENT.match("    from starlette.testclient import TestClient as T")
    assert not FOREIGN_CLIENT.match("from tests.support.asgi import TestClient")


def _registered() -> dict[str, str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lines = config["tool"]["pytest"]["ini_options"]["markers"]
    return dict(line.split(":", 1) for line in lines)


def test_every_marker_is_registered_in_pyproject_only() -> None:
    registered = _registered()
    used = set()
    for path in TESTS.rglob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r"pytest\.mark\.([a-z_]+)", text))
        if path != Path(__file__):  # this file names the call it looks for
            assert "addinivalue_line(" not in text, f"{path}: register markers in pyproject.toml"
    assert used - PLUGIN_MARKERS - set(registered) == set()
    assert set(registered) - used == set(), "a registered marker no test uses"


def test_slow_is_part_of_the_default_run() -> None:
    slow = _registered()["slow"]
    assert "default run" in slow
    assert "optional" not in slow
    assert "still" not in slow


def test_dev_sh_runs_one_worker_more_than_the_cores() -> None:
    """``bash dev.sh test`` counts the cores with ``OMP_NUM_THREADS`` set to 1, which GNU
    ``nproc`` honours: it once ran one worker too few. Checked by running its count."""
    import os
    import subprocess

    script = ROOT / "dev.sh"
    line = next(x for x in script.read_text().splitlines() if "workers=$((" in x)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_THREAD_LIMIT": "1"}
    done = subprocess.run(
        ["bash", "-c", f"{line.strip()}; echo $workers"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert int(done.stdout) == len(os.sched_getaffinity(0)) + 1
    if "SECFPP_DEFAULT_WORKERS" in os.environ and "SECFPP_TEST_WORKERS" not in os.environ:
        # this run came from dev.sh with its default: as many workers as it computed
        assert os.environ.get("PYTEST_XDIST_WORKER_COUNT") == os.environ["SECFPP_DEFAULT_WORKERS"]

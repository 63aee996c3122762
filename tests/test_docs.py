"""The README is a front door and the docs hold together.

* the README starts with exactly the two set-up commands and stays short;
* every relative link in the README and under ``docs/`` names a file of the repository (and,
  with ``#anchor``, a heading of that file), and none points outside the repository;
* every page under ``docs/`` is reachable from the README by links;
* the generated reference pages match the code (``scripts/gen_reference.py --check``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return [a or b for a, b in LINK.findall(text)]


def test_readme_starts_with_the_two_commands_and_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# SecFPP"
    block = lines[lines.index("```bash") + 1 : lines.index("```")]
    commands = [line.split("#")[0].strip() for line in block]
    assert commands == ["bash dev.sh demo", "bash dev.sh test"]
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail into docs/"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve_inside_the_repository(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if ROOT not in dest.parents and dest != ROOT:
            broken.append(f"{target}: outside the repository")
            continue
        if not dest.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading '#{anchor}' in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_doc_page_is_reachable_from_the_readme() -> None:
    seen: set[Path] = set()
    todo = [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or not page.exists() or page.suffix != ".md":
            continue
        seen.add(page)
        for target in _links(page):
            path_part = target.partition("#")[0]
            if path_part and not re.match(r"^[a-z]+:", target):
                todo.append((page.parent / path_part).resolve())
    orphans = [
        str(p.relative_to(ROOT)) for p in sorted((ROOT / "docs").rglob("*.md")) if p not in seen
    ]
    assert not orphans, f"pages no link leads to: {orphans}"


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_generated_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr

"""The README and docs/ stand alone: every link and path they name is a file of this repository,
and they do not lean on design pages or reference documents kept elsewhere."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Folders a build or an install fills with other people's files (npm, Maven, a venv).
NOT_OURS = {".venv", "node_modules", "target", "dist", ".pytest-tmp"}


def _ours(paths: Iterable[Path]) -> list[Path]:
    return [p for p in paths if NOT_OURS.isdisjoint(p.relative_to(ROOT).parts)]


@functools.cache
def _markdown_names() -> frozenset[str]:
    """The names of the repository's own markdown files. Hidden folders (.git, a test run's
    .pytest-tmp*, whose PostgreSQL data directories come and go while another worker runs) and
    other people's files are never entered."""
    names: set[str] = set()
    for _folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in NOT_OURS]
        names.update(f for f in files if f.endswith(".md"))
    return frozenset(names)


PAGES = sorted(
    _ours(
        [
            ROOT / "README.md",
            *(ROOT / "docs").rglob("*.md"),
            *(ROOT / "examples").rglob("README.md"),
            *(ROOT / "sdk").glob("*/README.md"),
        ]
    )
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
RELATIVE_PATH = re.compile(r"(?<![\w/.])((?:\.\./)+[\w./-]+)")
# Pages outside the repository that the docs used to lean on, by the names they went by
# (in any case: "Reference 003" opened a sentence).
OUTSIDE = re.compile(
    r"(?-i:\bDESIGN\b)|\breferences? 0\d\d\b|\breferences? \d{3}\b|shared/reference|CONDUCTOR-API"
    r"|CONVENTIONS\.md|TOOLCHAIN\.md|\.\./shared|/work/",
    re.IGNORECASE,
)
# A Markdown file named anywhere in a page, linked or not (`shared/CONDUCTOR-API.md`).
MD_NAME = re.compile(r"(?<![\w/.-])([\w./-]*[\w-]\.md)\b")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_a_page_is_a_file_of_the_repository(page: Path) -> None:
    text = page.read_text()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor of the page itself
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            broken.append(target)
    for target in RELATIVE_PATH.findall(text):
        path = (page.parent / target).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_markdown_file_a_page_names_is_in_the_repository(page: Path) -> None:
    """A page's own name (``dispatch.md``) is read next to the page, from the root, or as a
    file of that name anywhere in the repository."""
    names = _markdown_names()
    missing = [
        name
        for name in MD_NAME.findall(page.read_text())
        if not (page.parent / name).exists()
        and not (ROOT / name).exists()
        and not ("/" not in name and name in names)
    ]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_at_documents_kept_outside_the_repository(page: Path) -> None:
    found = [m.group(0) for m in OUTSIDE.finditer(page.read_text())]
    assert found == []


def _shell_blocks(page: Path) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", page.read_text(), re.DOTALL)


def test_the_readme_commands_follow_baton_port_and_baton_data_dir() -> None:
    """Copied as they are, the README's commands reach a `make dev` started with another
    BATON_PORT or BATON_DATA_DIR: no hard-coded port or key path."""
    fixed = [
        line
        for page in (ROOT / "README.md", ROOT / "examples/order_fulfilment/README.md")
        for block in _shell_blocks(page)
        for line in block.splitlines()
        if re.search(r"127\.0\.0\.1:8080|localhost:8080|[^-]\.baton/data/api-key", line)
        and not line.lstrip().startswith(("make ", "#"))
    ]
    assert fixed == []


def test_the_example_does_not_register_a_new_version_of_the_walk_through_definition() -> None:
    walk_through = re.findall(r'"name": "([\w-]+)"', "".join(_shell_blocks(ROOT / "README.md")))
    example = json.loads((ROOT / "examples/order_fulfilment/definition.json").read_text())["name"]
    assert walk_through and example not in walk_through

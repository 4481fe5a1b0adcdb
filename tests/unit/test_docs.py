"""The README and docs/ stand alone: every link and path they name is a file of this repository,
and they do not lean on design pages or reference documents kept elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("README.md")]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
RELATIVE_PATH = re.compile(r"(?<![\w/.])((?:\.\./)+[\w./-]+)")
# Pages outside the repository that the docs used to lean on, by the names they went by.
OUTSIDE = re.compile(r"\bDESIGN\b|\breference 00\d|\breferences? \d{3}\b|shared/reference")


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
def test_no_page_points_at_documents_kept_outside_the_repository(page: Path) -> None:
    found = [m.group(0) for m in OUTSIDE.finditer(page.read_text())]
    assert found == []

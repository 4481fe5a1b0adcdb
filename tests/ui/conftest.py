"""Browser tests of the execution viewer: Debian's ``chromium`` driven by Playwright.

No browser is downloaded: Playwright runs the system's Chromium (``executable_path``). When the
machine has none (``make test`` installs it first when it can: root with apt-get), these tests
alone are skipped, and the run says so loudly at its end.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return str(Path(found).resolve()) if name != "chromium" else _debian_binary(found)
    return None


def _debian_binary(wrapper: str) -> str:
    # Debian's /usr/bin/chromium is a shell wrapper; Playwright wants the binary itself.
    real = Path("/usr/lib/chromium/chromium")
    return str(real) if real.exists() else wrapper


def why_no_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if chromium_path() is None:
        return (
            "no Chromium on this machine: the execution viewer's browser tests (tests/ui) did "
            "NOT run. Install Debian's chromium (apt-get install chromium) and run again."
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: tests/ui did NOT run (make install)"
    return None


def pytest_terminal_summary(terminalreporter: Any) -> None:
    # On the controller too (under xdist the skips happen in the workers).
    why = why_no_browser()
    if why:
        terminalreporter.write_sep("!", "BROWSER TESTS SKIPPED", red=True, bold=True)
        terminalreporter.write_line(why, red=True, bold=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = why_no_browser()
    if why:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield b
        b.close()

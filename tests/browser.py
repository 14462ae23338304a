"""Headless Chromium for the dashboard's browser tests (a pytest plugin, like ``tests/pg.py``).

- Chromium is Debian's ``chromium`` package (``/usr/bin/chromium``), or ``$CHROMIUM``, or
  ``chromium`` / ``chromium-browser`` / ``google-chrome`` wherever ``find_program`` finds
  it. Playwright for Python drives it (``executable_path``; never ``playwright install``,
  which downloads a browser of its own).
- Under ``CI=true`` the browser tests must run: a missing Chromium is installed with
  ``apt-get`` (as root, the way CI's fresh machine runs), and anything still missing
  fails them. Elsewhere they are skipped, saying what is missing and how to get it.
- The browser starts with a new, empty profile (Playwright makes one per launch) and the
  flags a closed network needs (without them it waits on lookups of its own: updates,
  sync, safe browsing).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import find_program

__all__ = ["CHROMIUM_FLAGS", "artifact_dir", "browser", "find_chromium"]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")
NAMES = ("chromium", "chromium-browser", "google-chrome")

_FOUND: str | None = None
_MISSING: str | None = None


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def find_chromium() -> str | None:
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in NAMES:
        found = find_program(name)
        if found:
            return found
    return None


def _install() -> str:
    """Install Debian's chromium (CI only, as root); why it failed otherwise."""
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return "not root, so apt-get cannot install it"
    apt = find_program("apt-get")
    if apt is None:
        return "apt-get is not here to install it"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", "chromium"]):
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=1200,
                              check=False)
        if done.returncode != 0:
            return f"{' '.join(args[1:])} failed: {(done.stderr or done.stdout)[-500:]}"
    return ""


def chromium() -> str:
    """Chromium's path; skips (fails under CI, after trying to install it) without it."""
    global _FOUND, _MISSING
    if _FOUND is None and _MISSING is None:
        found = find_chromium()
        if found is None and _ci():
            why = _install()
            found = find_chromium()
            if found is None:
                _MISSING = f"Chromium is not installed and could not be: {why}"
        if found is None and _MISSING is None:
            _MISSING = ("Chromium is not installed (apt-get install chromium, or set "
                        "CHROMIUM to a Chromium or Chrome binary)")
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            _MISSING = "Playwright is not installed: pip install -e '.[test]'"
        if _MISSING is None:
            _FOUND = found
    if _FOUND is None:
        message = f"browser tests need Chromium: {_MISSING}"
        if _ci():
            pytest.fail(f"{message} (CI=true: browser tests must run)", pytrace=False)
        pytest.skip(message)
    return _FOUND


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for a test module. Playwright starts it with a new, empty
    profile directory of its own (and removes it afterwards). Not for the session: while
    Playwright's sync API runs, the main thread has an event loop running, and later
    tests that call ``asyncio.run`` (the MCP ones) would fail."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=list(CHROMIUM_FLAGS))
        try:
            yield launched
        finally:
            launched.close()


def artifact_dir(tmp_path: Path) -> Path:
    """Where a test keeps what it saw: ``$VMEM_TEST_ARTIFACTS`` (e.g. for CI to upload),
    else the test's own temporary directory."""
    target = Path(os.environ.get("VMEM_TEST_ARTIFACTS") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    return target

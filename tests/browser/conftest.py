"""Headless Debian Chromium driven by Selenium, for the session viewer's tests.

The browser tests run real CLI turns, so they carry the `docker` and `slow` markers and use the
integration fixtures (the engine, the fake model server, an app directory). Without Chromium
they are skipped with the reason, except when `CI` is set, where they fail
(`scripts/ensure-test-tools.sh` installs it). Screenshots go to `build/test-artifacts/browser/`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from tests.integration.conftest import docker_engine as docker_engine
from tests.integration.conftest import test_run_labels as test_run_labels
from tests.integration.runners.conftest import app as app
from tests.integration.runners.conftest import model_server as model_server

_HERE = Path(__file__).parent
ARTIFACTS = _HERE.parent.parent / "build" / "test-artifacts" / "browser"
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.docker)
            item.add_marker(pytest.mark.slow)


def _binaries() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        reason = "no chromium/chromedriver on PATH; run scripts/ensure-test-tools.sh"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return chromium, driver


@pytest.fixture
def browser(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium (its own profile directory), 1280x900."""
    chromium, driver = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROME_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.set_script_timeout(30)
    try:
        yield chrome
    finally:
        call = getattr(request.node, "rep_call", None)
        if call is not None and call.failed:  # what the page showed when the test failed
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            chrome.save_screenshot(str(ARTIFACTS / f"{request.node.name}-failed.png"))
        chrome.quit()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Iterator[Path]:
    """This test's screenshot directory (kept after the run, for CI to upload)."""
    path = ARTIFACTS / request.node.name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    yield path

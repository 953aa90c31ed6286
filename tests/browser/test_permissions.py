"""Answering an agent from the session viewer, in a real browser against a real `cage serve`: a
yaocode assistant whose policy asks before every tool call (`permissions: {mode: ask}`, the real
box, the fake model scripting the calls). The page shows a permission card with its deadline;
Deny makes the turn go on with the refusal and the command never runs (the next command, allowed
from the page, looks for its file in the box); Allow runs it; a question card's free-text answer
reaches the model (the fake model server records the tool results it was sent back). The waiting
card's screenshot (`permission-waiting.png` in the test's artifacts) is the one in
`docs/screenshots/permission.png`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from orchestrator.api import create_app
from orchestrator.settings import Settings
from tests.integration.conftest import TEST_RUN_ID
from tests.integration.native.conftest import NativeApp
from tests.integration.native.conftest import app as app
from tests.integration.native.conftest import native_server as native_server
from tests.integration.runners.conftest import HOST_CA
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys

pytestmark = [pytest.mark.timeout(900)]
SCENARIO = "browser-permissions"
STEPS: list[dict[str, Any]] = [
    {"shell": "echo denied > denied.txt"},  # denied from the page
    {"shell": "cat denied.txt 2>&1; echo allowed > allowed.txt; cat allowed.txt"},  # allowed
    {"tool": "question", "args": {"question": "Which colour?", "options": ["red", "blue"]}},
    {"text": "**Done**: the colour is noted."},
]
SESSION = f"browser-perm-{TEST_RUN_ID[:8]}"
T = TypeVar("T")


@pytest.fixture
def served(app: NativeApp, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    app.server.add_scenario(SCENARIO, STEPS)
    assistant = app.assistant("yaocode", scenario=SCENARIO, lifecycle="session")
    path = app.root / "assistants" / "native" / "yaocode" / "sandbox.yao"
    spec = json.loads(path.read_text())
    spec["permissions"] = {"mode": "ask", "timeout": "5m"}
    path.write_text(json.dumps(spec))
    assert assistant == "native.yaocode"
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-fake-e2e-key-123456")
    settings = Settings(
        app_dir=app.root,
        data_dir=app.data_dir,
        sandbox_labels=app.labels,
        bootstrap_admin_key=BOOTSTRAP_KEY,
        extra_ca_certs=Path(HOST_CA) if Path(HOST_CA).is_file() else None,
        reaper_interval=3600.0,
    )
    keys = create_keys(settings, {"dev": ("user", "dev")})
    server = ServerThread(create_app(settings)).start(timeout=60)
    try:
        yield server, keys
    finally:
        server.stop(timeout=60)


def wait(browser: webdriver.Chrome, what: Callable[[webdriver.Chrome], T | None], timeout: float = 240) -> T:
    return cast(T, WebDriverWait(browser, timeout, poll_frequency=0.2).until(lambda b: what(b) or None))


def waiting_card(browser: webdriver.Chrome, css: str, index: int) -> WebElement | None:
    """The `index`th card matching `css` once it is there and not yet resolved."""
    cards = browser.find_elements(By.CSS_SELECTOR, css)
    if len(cards) <= index or cards[index].get_attribute("data-resolved"):
        return None
    return cards[index]


def decision(card: WebElement) -> str | None:
    return (
        card.find_element(By.CSS_SELECTOR, ".decision").text if card.get_attribute("data-resolved") else None
    )


def test_deny_allow_and_answer_from_the_page(
    app: NativeApp, served: tuple[ServerThread, dict[str, str]], browser: webdriver.Chrome, shots: Path
) -> None:
    server, keys = served
    browser.get(server.base_url + "/ui/")
    wait(browser, lambda b: b.find_element(By.ID, "key")).send_keys(keys["dev"])
    browser.find_element(By.CSS_SELECTOR, ".key-form button[type=submit]").click()
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "table.list[aria-label='Your sessions']"))
    browser.get(f"{server.base_url}/ui/#/s/{SESSION}?assistant=native.yaocode")
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".conn[data-state=live]"))
    browser.find_element(By.ID, "message").send_keys("Note my colour.")
    browser.find_element(By.ID, "send").click()

    first = wait(browser, lambda b: waiting_card(b, ".card.permission", 0))
    assert "Permission: bash" in first.text and "echo denied > denied.txt" in first.text
    assert first.find_element(By.CSS_SELECTOR, ".deadline time").get_attribute("datetime")
    labels = [b.text for b in first.find_elements(By.TAG_NAME, "button")]
    assert labels == ["Allow", "Allow always", "Deny"]
    first.find_element(By.CSS_SELECTOR, "button.danger").click()
    assert wait(browser, lambda b: decision(first)) == "denied (by user): refused by the user"

    second = wait(browser, lambda b: waiting_card(b, ".card.permission", 1))
    assert "echo allowed > allowed.txt" in second.text
    browser.save_screenshot(str(shots / "permission-waiting.png"))
    allow = second.find_element(By.CSS_SELECTOR, "button.allow")
    allow.send_keys(Keys.SPACE)  # the keyboard answers as the mouse does
    assert wait(browser, lambda b: decision(second)) == "allowed (by user)"

    question = wait(browser, lambda b: waiting_card(b, ".card.question-card", 0))
    assert "Which colour?" in question.text
    assert [b.text for b in question.find_elements(By.CSS_SELECTOR, "button.option")] == ["red", "blue"]
    field = question.find_element(By.CSS_SELECTOR, "input[name=answer]")
    field.send_keys("green, actually", Keys.ENTER)
    assert wait(browser, lambda b: decision(question)) == "answered: green, actually"

    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#timeline article.turn[data-status=completed]"))
    browser.save_screenshot(str(shots / "permission-done.png"))
    assert "the colour is noted" in browser.find_element(By.ID, "timeline").text

    results = app.server.requests.for_scenario(SCENARIO)[-1].tool_results()
    assert any("refused by the user" in r for r in results), results
    ran = next(r for r in results if "allowed" in r and "refused" not in r)
    assert "No such file" in ran, ran  # the denied command never ran in the box
    assert any(r.strip() == "green, actually" for r in results), results

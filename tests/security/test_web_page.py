"""The session viewer renders what an agent writes; an agent is hostile. Markup, script and
`javascript:`/`data:` links in its text must reach the page as text, never as elements that run
or navigate. Driven in headless Chromium against a real `cage serve` (LLM mode on the fake
model server: the text is the model's, as a prompt-injected agent would write it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from orchestrator.api import create_app
from orchestrator.settings import Settings
from tests.browser.conftest import browser as browser
from tests.browser.conftest import shots as shots
from tests.integration.conftest import docker_engine as docker_engine
from tests.integration.conftest import test_run_labels as test_run_labels
from tests.integration.runners.conftest import App
from tests.integration.runners.conftest import app as app
from tests.integration.runners.conftest import model_server as model_server
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(300)]
HOSTILE = (
    '<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>\n\n'
    "[click me](javascript:window.pwned=3) and [this](data:text/html,hi) and "
    '<a href="javascript:window.pwned=4">raw</a> <iframe src="/ui/"></iframe>\n\n'
    "**fine** and `<b>code</b>`"
)


@pytest.fixture
def served(app: App, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-fake-e2e-key-123456")
    app.server.add_scenario("hostile", [{"text": HOSTILE}])
    app.assistant("claude", scenario="hostile")  # writes the fake-claude-hostile connector
    session = app.root / "assistants" / "e2e" / "page"
    session.mkdir(parents=True)
    (session / "package.yao").write_text('{"name": "page", "connector": "fake-claude-hostile"}')
    (session / "prompts.yml").write_text("- role: system\n  content: Answer.\n")
    settings = Settings(
        app_dir=app.root,
        data_dir=app.data_dir,
        sandbox_labels=app.labels,
        bootstrap_admin_key=BOOTSTRAP_KEY,
        reaper_interval=3600.0,
    )
    keys = create_keys(settings, {"dev": ("user", "dev")})
    server = ServerThread(create_app(settings)).start(timeout=60)
    try:
        yield server, keys
    finally:
        server.stop(timeout=60)


def test_agent_markup_stays_text(
    served: tuple[ServerThread, dict[str, str]], browser: webdriver.Chrome, shots: Path
) -> None:
    server, keys = served
    browser.get(server.base_url + "/ui/#/s/hostile-1?assistant=e2e.page")
    wait = WebDriverWait(browser, 120, poll_frequency=0.2)
    wait.until(lambda b: b.find_elements(By.ID, "key"))[0].send_keys(keys["dev"] + "\n")
    wait.until(
        lambda b: (
            b.find_elements(By.CSS_SELECTOR, ".conn")
            and b.find_element(By.CSS_SELECTOR, ".conn").text == "live"
        )
    )
    browser.find_element(By.ID, "message").send_keys("say something")
    browser.find_element(By.ID, "send").click()
    (turn,) = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "article.turn[data-status]"))
    assert turn.get_attribute("data-status") == "completed", turn.text
    browser.save_screenshot(str(shots / "hostile-text.png"))

    text = turn.find_element(By.CSS_SELECTOR, ".text .md")
    assert browser.execute_script("return window.pwned") is None
    assert not text.find_elements(By.CSS_SELECTOR, "img, script, iframe, a")  # no element from agent markup
    assert '<img src=x onerror="window.pwned=1">' in text.text and "<script>" in text.text
    assert "[click me](javascript:window.pwned=3)" in text.text  # the link stayed text
    assert text.find_element(By.TAG_NAME, "strong").text == "fine"
    assert text.find_element(By.TAG_NAME, "code").text == "<b>code</b>"
    assert browser.current_url.endswith("#/s/hostile-1?assistant=e2e.page")

"""The session viewer in a real browser against a real `cage serve`: a user signs in with a key,
starts a Claude Code session (a real container, the fake model server), watches the text and the
tool card of a turn appear, reloads the page in the middle of a running tool and finds the
timeline rebuilt from the durable log with no duplicate and no gap, drops the websocket and sees
it resume by seq, interrupts the tool; an admin sees and stops the session's sandbox. Each state
is saved as a screenshot (build/test-artifacts/browser/)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from orchestrator.api import create_app
from orchestrator.settings import Settings
from tests.integration.conftest import TEST_RUN_ID
from tests.integration.runners.conftest import HOST_CA, App
from tests.unit.api.harness import BOOTSTRAP_KEY, ServerThread, create_keys

pytestmark = [pytest.mark.timeout(900)]
SCENARIO = "browser"
# Each turn runs one shell step, then answers in Markdown. The step waits while `slow` exists in
# the workspace, so a turn can be caught, reloaded and interrupted in the middle of its tool.
STEPS: list[dict[str, Any]] = [
    {
        "parts": [
            {"thinking": "The user wants a line in turns.txt."},
            {"shell": "while [ -f slow ]; do sleep 0.2; done; echo turn >> turns.txt; seq 1 60"},
        ]
    },
    {"tool": "Write", "args": {"file_path": "/workspace/notes.md", "content": "# Notes\nturn one\n"}},
    {"text": "**Done**: one line added to `turns.txt`."},
]
T = TypeVar("T")
SESSION = f"browser-{TEST_RUN_ID[:8]}"
"""This run's session: its sandbox and workspace names derive from it, so two runs on one engine
never share a box (a `slow` file one leaves would stall the other's first turn)."""


@pytest.fixture
def served(app: App, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ServerThread, dict[str, str]]]:
    app.server.add_scenario(SCENARIO, STEPS)
    assert app.assistant("claude", scenario=SCENARIO, lifecycle="session") == "e2e.claude"
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-fake-e2e-key-123456")
    settings = Settings(
        app_dir=app.root,
        data_dir=app.data_dir,
        sandbox_labels=app.labels,
        bootstrap_admin_key=BOOTSTRAP_KEY,
        extra_ca_certs=Path(HOST_CA) if Path(HOST_CA).is_file() else None,
        reaper_interval=3600.0,
    )
    keys = create_keys(settings, {"dev": ("user", "dev"), "ops": ("admin", "ops")})
    server = ServerThread(create_app(settings)).start(timeout=60)
    try:
        yield server, keys
    finally:
        server.stop(timeout=60)


def wait(browser: webdriver.Chrome, what: Callable[[webdriver.Chrome], T | None], timeout: float = 120) -> T:
    """Poll `what` until it holds; an element the page re-rendered meanwhile is looked up again."""
    waiter = WebDriverWait(
        browser, timeout, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
    )
    return cast(T, waiter.until(lambda b: what(b) or None))


def turns(browser: webdriver.Chrome) -> list[WebElement]:
    return browser.find_elements(By.CSS_SELECTOR, "#timeline article.turn")


def sign_in(browser: webdriver.Chrome, base_url: str, key: str) -> None:
    browser.get(base_url + "/ui/")
    field = wait(browser, lambda b: b.find_element(By.ID, "key"))
    field.send_keys(key)
    browser.find_element(By.CSS_SELECTOR, ".key-form button[type=submit]").click()
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "table.list[aria-label='Your sessions']"))


def timeline_state(browser: webdriver.Chrome) -> dict[str, Any]:
    """Message ids per turn and the last seq applied, as the page holds them."""
    state: dict[str, Any] = browser.execute_script(
        """
        const timeline = document.getElementById("timeline");
        return {
          lastSeq: Number(timeline.dataset.lastSeq || 0),
          turns: [...timeline.querySelectorAll("article.turn")].map((t) => ({
            id: t.dataset.turnId,
            messages: [...t.querySelectorAll("[data-message-id]")].map((m) => m.dataset.messageId),
            users: t.querySelectorAll(".user-message").length,
          })),
        };
        """
    )
    return state


def assert_no_duplicates(state: dict[str, Any]) -> None:
    ids = [t["id"] for t in state["turns"]]
    assert len(ids) == len(set(ids)), ids
    for turn in state["turns"]:
        assert len(turn["messages"]) == len(set(turn["messages"])), turn
        assert turn["users"] <= 1, turn


def click(browser: webdriver.Chrome, css: str) -> None:
    """Find and click in one step (the admin tables are re-rendered every few seconds)."""
    wait(
        browser,
        lambda b: b.execute_script(
            "const el = document.querySelector(arguments[0]); if (el) el.click(); return Boolean(el);", css
        ),
    )


def send(browser: webdriver.Chrome, text: str) -> None:
    box = browser.find_element(By.ID, "message")
    box.send_keys(text)
    wait(browser, lambda b: b.find_element(By.ID, "send").is_enabled())
    browser.find_element(By.ID, "send").click()


def test_watch_steer_and_administer_a_session(
    served: tuple[ServerThread, dict[str, str]], browser: webdriver.Chrome, shots: Path, tmp_path: Path
) -> None:
    server, keys = served
    admin = {"Authorization": f"Bearer {keys['ops']}"}
    user = {"Authorization": f"Bearer {keys['dev']}"}

    # -- a key page, then the sessions list and a new session with a CLI runner ---------------
    browser.get(server.base_url + "/")
    wait(browser, lambda b: b.find_element(By.ID, "key"))
    assert "ticket" not in browser.current_url and keys["dev"] not in browser.current_url
    browser.save_screenshot(str(shots / "01-key.png"))
    sign_in(browser, server.base_url, keys["dev"])
    assert browser.execute_script("return sessionStorage.getItem('cage.key')") == keys["dev"]
    assert not browser.find_element(By.CSS_SELECTOR, "[data-nav=admin]").is_displayed()  # a user key
    picker = Select(wait(browser, lambda b: b.find_element(By.ID, "new-assistant")))
    wait(browser, lambda b: "e2e.claude" in [o.get_attribute("value") for o in picker.options])
    picker.select_by_value("e2e.claude")
    browser.find_element(By.ID, "new-session").send_keys(SESSION)
    browser.find_element(By.CSS_SELECTOR, ".new-session button[type=submit]").click()
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".conn").text == "live")
    assert keys["dev"] not in browser.current_url

    # -- a turn: text and a tool card appear -------------------------------------------------
    attachment = tmp_path / "brief.txt"
    attachment.write_text("read me first\n")
    browser.find_element(By.ID, "attachments").send_keys(str(attachment))
    send(browser, "add a line to turns.txt")
    (first,) = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "article.turn[data-status]"), 240)
    assert first.get_attribute("data-status") == "completed", first.text
    card, write = first.find_elements(By.CSS_SELECTOR, ".card.tool")
    assert write.get_attribute("data-tool") == "Write"
    assert [line.text for line in write.find_elements(By.CSS_SELECTOR, ".diff .add")] == [
        "+ # Notes",
        "+ turn one",
    ]
    thinking = first.find_element(By.CSS_SELECTOR, "details.thinking")
    assert thinking.get_attribute("open") is None  # collapsed until asked
    thinking.find_element(By.TAG_NAME, "summary").click()
    assert "wants a line" in thinking.find_element(By.CSS_SELECTOR, ".thinking-body").text
    assert card.get_attribute("data-status") == "completed"
    assert "while [ -f slow ]" in card.find_element(By.CSS_SELECTOR, ".command").text
    output = card.find_element(By.CSS_SELECTOR, "pre.output").text
    assert output.startswith("1\n2\n") and output.endswith("59\n60") and "lines not shown" in output
    text = first.find_element(By.CSS_SELECTOR, ".text .md")
    assert text.find_element(By.TAG_NAME, "strong").text == "Done"
    assert text.find_element(By.TAG_NAME, "code").text == "turns.txt"
    said = first.find_element(By.CSS_SELECTOR, ".user-message").text
    assert "add a line to turns.txt" in said and "Attachments: brief.txt" in said
    assert "in" in first.find_element(By.CSS_SELECTOR, ".turn-footer").text  # usage of the turn
    assert first.find_element(By.CSS_SELECTOR, ".sandbox").get_attribute("data-phase")
    browser.save_screenshot(str(shots / "02-session.png"))
    card.screenshot(str(shots / "03-tool-card.png"))

    # -- a second turn caught in its tool: reload mid-turn, drop the socket, interrupt -------
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        (box,) = http.get("/v1/sandboxes", headers=user).json()

        def run(*argv: str) -> dict[str, Any]:
            answer = http.post(
                f"/v1/admin/sandboxes/{box['name']}/exec", headers=admin, json={"argv": list(argv)}
            )
            result: dict[str, Any] = answer.json()
            return result

        assert run("cat", "attachments/brief.txt")["stdout"] == "read me first"  # the attachment arrived
        assert run("touch", "slow")["exit_code"] == 0
        send(browser, "and another one")
        running = "article.turn:nth-of-type(2) .card.tool[data-status=running]"
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, running))
        before = timeline_state(browser)
        browser.save_screenshot(str(shots / "04-tool-running.png"))

        browser.refresh()
        wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".conn").text == "live")
        wait(browser, lambda b: timeline_state(b)["lastSeq"] >= before["lastSeq"])
        after = timeline_state(browser)
        assert_no_duplicates(after)
        assert [t["id"] for t in after["turns"]] == [t["id"] for t in before["turns"]]
        assert after["turns"][0]["messages"] == before["turns"][0]["messages"]
        assert browser.find_elements(By.CSS_SELECTOR, running)  # still running, after the replay
        assert browser.find_element(By.ID, "interrupt").is_enabled()

        def caught_up(b: webdriver.Chrome) -> bool:  # the whole log, then live (the turn goes on)
            logged = http.get(f"/v1/sessions/{SESSION}", headers=user).json()["last_seq"]
            return bool(timeline_state(b)["lastSeq"] == logged)

        wait(browser, caught_up, 30)
        browser.save_screenshot(str(shots / "05-after-reload.png"))

        browser.execute_script("window.cage.reconnect()")
        wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".conn").text != "live", 10)
        wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".conn").text == "live", 30)

        browser.find_element(By.ID, "interrupt").click()
        wait(
            browser,
            lambda b: b.find_elements(By.CSS_SELECTOR, "article.turn:nth-of-type(2)[data-status=cancelled]"),
            60,
        )
        browser.save_screenshot(str(shots / "06-interrupted.png"))
        browser.set_window_size(1280, 1500)  # the two turns whole, for the docs
        browser.execute_script("window.scrollTo(0, 0)")
        browser.save_screenshot(str(shots / "07-session-two-turns.png"))

        final = timeline_state(browser)
        assert_no_duplicates(final)
        events = http.get(f"/v1/sessions/{SESSION}/events", headers=user, params={"limit": 1000}).json()
        assert final["lastSeq"] == events["last_seq"] == len(events["events"])
        tools = {e["message_id"] for e in events["events"] if e["type"] == "execute"}
        shown = {m for t in final["turns"] for m in t["messages"]}
        assert tools <= shown  # every tool run of the log has its card

        # a third turn, cancelled (killed) in its tool
        send(browser, "a third")
        third = "article.turn:nth-of-type(3)"
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, f"{third} .card.tool[data-status=running]"))
        browser.find_element(By.ID, "cancel").click()
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, f"{third}[data-status=cancelled]"), 60)
        assert_no_duplicates(timeline_state(browser))
        run("rm", "slow")
        console = browser.get_log("browser")  # type: ignore[no-untyped-call]
        assert not [e for e in console if e["level"] == "SEVERE" and "/ui/" in e["message"]], console

        # -- the sessions list shows the session ----------------------------------------------
        browser.find_element(By.CSS_SELECTOR, "[data-nav=sessions]").click()
        listed = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, f"tr[data-session-id={SESSION}]"))[
            0
        ]
        assert "e2e.claude" in listed.text and "idle" in listed.text

        # -- the admin view: the session's sandbox, stopped from the page -------------------------
        browser.find_element(By.ID, "sign-out").click()
        sign_in(browser, server.base_url, keys["ops"])
        wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, "[data-nav=admin]").is_displayed())
        browser.find_element(By.CSS_SELECTOR, "[data-nav=admin]").click()
        row = f"tr[data-sandbox='{box['name']}']"
        found = wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, row))[0]
        assert "dev" in found.text and "e2e.claude" in found.text and "session" in found.text
        wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "table[aria-label='Audit log'] tbody tr"))
        browser.save_screenshot(str(shots / "08-admin.png"))
        click(browser, "button[aria-label='Build the claude image']")
        log = browser.find_element(By.ID, "build-log")
        wait(browser, lambda b: log.get_attribute("data-phase") in ("done", "error"), 300)
        assert log.get_attribute("data-phase") == "done", log.text
        assert "cached" in log.text  # the session's image is there already: nothing rebuilt
        click(browser, f"{row} button[aria-label='Stop {box['name']}']")
        wait(browser, lambda b: "stopped" in b.find_element(By.CSS_SELECTOR, row).text, 60)
        (stopped,) = http.get("/v1/admin/sandboxes", headers=admin).json()
        assert stopped["status"] == "stopped"
        audit = http.get("/v1/admin/audit", headers=admin, params={"limit": 10}).json()
        assert any(r["target"] == box["name"] and "stop" in r["action"] for r in audit)


def test_narrow_screen_and_keyboard(
    served: tuple[ServerThread, dict[str, str]], browser: webdriver.Chrome, shots: Path
) -> None:
    """On a 390 px wide screen nothing scrolls sideways; the key form works from the keyboard alone."""
    server, keys = served
    browser.set_window_size(390, 844)
    browser.get(server.base_url + "/ui/")
    field = wait(browser, lambda b: b.find_element(By.ID, "key"))
    assert browser.switch_to.active_element == field  # focus starts in the form
    assert browser.find_element(By.CSS_SELECTOR, "label[for=key]").text == "API key"
    field.send_keys(keys["dev"] + "\n")  # Enter submits
    wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "table.list[aria-label='Your sessions']"))
    browser.get(server.base_url + "/ui/#/s/narrow-1?assistant=e2e.claude")
    wait(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".conn").text == "live")
    width = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width
    for control in ("message", "attachments", "send"):
        assert browser.find_element(By.ID, control).is_displayed()
    browser.save_screenshot(str(shots / "narrow-session.png"))

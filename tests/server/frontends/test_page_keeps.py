"""A page a team keeps, in headless Chromium against a real server (`_page_model.py`'s model):

- answers render as Markdown (a heading, a list, a GFM table, a highlighted code block with Copy), raw HTML
  in an answer stays text and a `javascript:` link is no link;
- a visible working state with Stop: a stop during a streaming answer keeps the partial text marked
  stopped (also after a reload), a stop during a slow tool marks its card stopped, the next turn works;
- the App's face (title, intro, starters, panel) comes from `GET /api/v1/app`;
- conversations get short clean titles, are renamed and deleted on the page;
- a message over the limit is refused before it is sent, with the limit in words;
- a skip link is the first Tab stop and leads to the composer.

Each state is screenshot at 1280 and 390 px, light and dark, and checked by axe-core (no violation of any
impact): tests/artifacts/states-*.png.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from .conftest import LiveServer
from .test_page_states import States

pytestmark = pytest.mark.timeout(240)


def open_page(browser: WebDriver, live: LiveServer, axe: str, token: str) -> States:
    page = States(browser, live, axe)
    page.view("desktop")
    browser.get("about:blank")  # a real load (a new #token on the same page would not reload it)
    browser.get(f"{live.url}/#token={token}")
    page.click("new-conversation", "the new-chat button after sign-in")
    return page


def type_and_send(page: States, text: str) -> None:
    """Send without waiting for the answer (the page is to be seen while it works)."""
    box = page.composer()
    box.clear()
    box.send_keys(text, Keys.ENTER)


def titles(page: States) -> list[str]:
    """The conversation list's titles, read in one go (the list is re-rendered after each turn)."""
    return list(
        page.js(
            "return [...document.querySelectorAll('#conversation-list .title-text')].map(e => e.textContent)"
        )
    )


def answers(page: States) -> list[Any]:
    return page.driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")


def test_answers_render_as_sanitised_markdown(
    browser: WebDriver, page_server: LiveServer, axe_source: str
) -> None:
    page = open_page(browser, page_server, axe_source, page_server.alice)
    page.send("markdown")
    answer = page.wait(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant .markdown h2"), "a heading"
    )[0]
    body = answer.find_element(By.XPATH, "..")
    assert answer.text == "Your week"
    assert [li.text for li in body.find_elements(By.CSS_SELECTOR, "ul > li")] == [
        "Renew the passport",
        "Call the plumber",
    ]
    assert body.find_element(By.CSS_SELECTOR, "strong").text == "what matters"
    assert [th.text for th in body.find_elements(By.CSS_SELECTOR, ".table-scroll table th")] == [
        "Task",
        "Due",
    ]
    assert len(body.find_elements(By.CSS_SELECTOR, "table tbody tr")) == 2
    block = body.find_element(By.CSS_SELECTOR, ".codeblock")
    assert "python" in block.find_element(By.CSS_SELECTOR, ".codeblock-head").text
    assert block.find_element(By.CSS_SELECTOR, "code .hljs-keyword").text == "def"  # highlighted

    # Copy puts the code, as text, on the clipboard.
    page.js(
        "window.__copied = null;"
        "Object.defineProperty(navigator, 'clipboard', {configurable: true, value: "
        "{writeText: async (t) => { window.__copied = t; }}});"
    )
    block.find_element(By.CSS_SELECTOR, "button.copy").click()
    page.wait(lambda d: page.js("return window.__copied") is not None, "the copy")
    assert page.js("return window.__copied") == 'def greet(name: str) -> str:\n    return f"Hello {name}"\n'
    page.wait(lambda d: block.find_element(By.CSS_SELECTOR, "button.copy").text == "Copied", "Copied")

    # Raw HTML is text; a javascript: link is not a link; a web link opens safely.
    assert '<img src=x onerror="alert(1)">' in body.text and "<b>not bold</b>" in body.text
    assert page.js("return document.querySelectorAll('#messages img, #messages b').length") == 0
    bad = body.find_element(By.XPATH, ".//a[normalize-space()='bad link']")
    assert bad.get_attribute("href") is None
    good = body.find_element(By.XPATH, ".//a[normalize-space()='good one']")
    assert good.get_attribute("href") == "https://example.com/docs"
    assert good.get_attribute("rel") == "noopener noreferrer"
    page.no_alert()
    page.check("markdown")
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors  # the vendored modules load under the strict CSP


def test_stop_keeps_the_partial_answer_marked_stopped_and_the_next_turn_works(
    browser: WebDriver, page_server: LiveServer, axe_source: str
) -> None:
    page = open_page(browser, page_server, axe_source, page_server.alice)
    type_and_send(page, "slow please")
    stop = page.wait(
        lambda d: d.find_element(By.ID, "stop") if d.find_element(By.ID, "stop").is_displayed() else None,
        "the Stop button",
    )
    assert not browser.find_element(By.ID, "send").is_displayed()
    assert "working" in browser.find_element(By.ID, "working").text
    page.wait(lambda d: any("first part" in a.text for a in answers(page)), "the first words")
    page.check("working")
    stop.click()
    stopped = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant.stopped"), "stopped")[0]
    assert "The first part of the answer is" in stopped.text and "Stopped" in stopped.text
    page.wait(lambda d: d.find_element(By.ID, "send").is_displayed(), "Send again")
    assert not browser.find_element(By.ID, "stop").is_displayed()
    assert browser.find_element(By.ID, "working").text == ""
    assert not browser.find_element(By.ID, "error").is_displayed()  # a stop is not an error
    page.check("stopped")

    # The server kept it as stopped: a reload shows it so.
    browser.refresh()
    kept = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant.stopped"), "stopped again")
    assert "The first part of the answer is" in kept[0].text

    # The next turn works in the same conversation.
    page.send("add Water the plants")
    page.wait(lambda d: "Water the plants" in page.task_titles(), "the next turn's task")
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_stop_during_a_slow_tool_cancels_it(
    browser: WebDriver, page_server: LiveServer, axe_source: str
) -> None:
    page = open_page(browser, page_server, axe_source, page_server.alice)
    type_and_send(page, "report on sales")
    card = page.wait(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='slow_report']"), "the tool card"
    )[0]
    assert "running" in card.find_element(By.CSS_SELECTOR, ".status").text
    browser.find_element(By.ID, "stop").click()
    page.wait(lambda d: card.find_element(By.CSS_SELECTOR, ".status").text == "stopped", "the card stopped")
    assert "cancelled" in card.text
    page.wait(lambda d: d.find_element(By.ID, "send").is_displayed(), "Send again")
    page.send("list tasks")
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_the_face_comes_from_the_app(browser: WebDriver, page_server: LiveServer, axe_source: str) -> None:
    face = httpx.get(f"{page_server.url}/api/v1/app", timeout=10).json()
    page = open_page(browser, page_server, axe_source, page_server.bob)
    assert browser.find_element(By.ID, "app-title").text == face["title"]
    assert browser.title.startswith(face["title"])
    empty = browser.find_element(By.ID, "empty")
    assert empty.is_displayed() and face["intro"] in empty.text
    starters = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#starters .example")]
    assert starters == face["starters"]
    assert browser.find_element(By.ID, "tasks-title").text == face["panel"]["title"]
    # The demo notice and the empty state agree: this server runs a model of its own, so neither speaks
    # of the demo (test_page_states checks the demo server, where both do).
    assert face["demo"] is False
    assert not browser.find_element(By.ID, "demo-banner").is_displayed()
    assert not browser.find_element(By.ID, "empty-demo").is_displayed()
    browser.find_elements(By.CSS_SELECTOR, "#starters .example")[1].click()
    assert browser.find_element(By.ID, "message").get_attribute("value") == face["starters"][1]
    page.check("face")


def test_conversations_get_titles_and_are_renamed_and_deleted(
    browser: WebDriver, page_server: LiveServer, axe_source: str
) -> None:
    page = open_page(browser, page_server, axe_source, page_server.bob)
    page.send("add **Book** the [venue](https://example.com) for the party on Saturday evening please")
    title = "Add Book the venue for the party…"
    page.wait(
        lambda d: (
            title in [e.text for e in d.find_elements(By.CSS_SELECTOR, "#conversation-list .title-text")]
        ),
        "the conversation listed under a short clean title",
    )
    cid = page.js("return localStorage.getItem('toolrun.conversation')")
    row = browser.find_element(By.CSS_SELECTOR, f"#conversation-list .conversation[data-id='{cid}']")
    assert row.find_element(By.CSS_SELECTOR, ".title-text").text == title
    row.find_element(By.CSS_SELECTOR, ".conversation-title").click()  # focus within: its actions show
    row.find_element(By.CSS_SELECTOR, "button.rename").click()
    field = browser.find_element(By.CSS_SELECTOR, "#conversation-list .rename-field")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("Party venue", Keys.ENTER)
    page.wait(lambda d: "Party venue" in titles(page), "the new title")
    assert page_server.get(f"/api/v1/conversations/{cid}", page_server.bob)["title"] == "Party venue"
    page.check("conversations")

    row = browser.find_element(By.CSS_SELECTOR, f"#conversation-list .conversation[data-id='{cid}']")
    row.find_element(By.CSS_SELECTOR, ".conversation-title").click()
    row.find_element(By.CSS_SELECTOR, "button.delete").click()
    browser.find_element(By.CSS_SELECTOR, "#conversation-list button.confirm-delete").click()
    page.wait(
        lambda d: not d.find_elements(By.CSS_SELECTOR, f"#conversation-list .conversation[data-id='{cid}']"),
        "the conversation gone",
    )
    gone = httpx.get(
        f"{page_server.url}/api/v1/conversations/{cid}",
        headers={"Authorization": f"Bearer {page_server.bob}"},
        timeout=10,
    )
    assert gone.status_code == 404
    assert browser.find_element(By.ID, "empty").is_displayed()  # the open conversation was that one


def test_a_message_over_the_limit_is_refused_before_it_is_sent(
    browser: WebDriver, page_server: LiveServer, axe_source: str
) -> None:
    page = open_page(browser, page_server, axe_source, page_server.bob)
    limit = int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-max-message") or 0)
    assert limit == 32000
    page.js(
        "const box = document.getElementById('message'); box.value = 'x'.repeat(arguments[0]);"
        "box.dispatchEvent(new Event('input'));",
        limit + 1,
    )
    words = browser.find_element(By.ID, "message-limit").text
    assert "32,001" in words and "the limit is 32,000" in words
    assert browser.find_element(By.ID, "send").get_attribute("disabled") is not None
    assert browser.find_element(By.ID, "message").get_attribute("aria-invalid") == "true"
    browser.find_element(By.ID, "message").send_keys(Keys.ENTER)
    assert page.user_messages() == []  # nothing was sent
    page.check("too-long")
    browser.find_element(By.ID, "message").send_keys(Keys.BACKSPACE)
    assert browser.find_element(By.ID, "message-limit").text == ""
    assert browser.find_element(By.ID, "send").get_attribute("disabled") is None


def test_the_skip_link_is_the_first_tab_stop_and_leads_to_the_composer(
    browser: WebDriver, page_server: LiveServer, axe_source: str
) -> None:
    page = open_page(browser, page_server, axe_source, page_server.bob)
    assert page.js("return document.activeElement.id") == "message"  # where a person starts typing
    # From the top of the page (as after a fresh load, before the script moves focus): one Tab.
    page.js("document.body.tabIndex = -1; document.body.focus(); document.body.removeAttribute('tabindex');")
    browser.switch_to.active_element.send_keys(Keys.TAB)
    link = browser.switch_to.active_element
    assert link.get_attribute("class") == "skip-link" and link.is_displayed()
    assert link.text == "Skip to the message box"
    link.send_keys(Keys.ENTER)
    page.wait(lambda d: page.js("return document.activeElement.id") == "message", "the composer focused")


def test_a_message_to_a_busy_conversation_waits_and_goes_when_it_is_free(
    browser: WebDriver, page_server: LiveServer, axe_source: str
) -> None:
    page = open_page(browser, page_server, axe_source, page_server.bob)
    page.send("add Pack the bags")
    cid = page.js("return localStorage.getItem('toolrun.conversation')")
    headers = {"Authorization": f"Bearer {page_server.bob}"}
    started = threading.Event()

    def elsewhere() -> None:  # another tab's answer holds the conversation
        body = {"message": "slow please", "conversation_id": cid}
        with httpx.stream(
            "POST", f"{page_server.url}/api/v1/chat/stream", json=body, headers=headers, timeout=30
        ) as response:
            for line in response.iter_lines():
                if line.startswith("event: text_delta"):
                    started.set()

    worker = threading.Thread(target=elsewhere, daemon=True)
    worker.start()
    assert started.wait(15)
    type_and_send(page, "list tasks")
    waiting = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.user .waiting-note"), "the wait")
    assert "goes as soon as" in waiting[0].text
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg.user.failed")
    stop = httpx.post(f"{page_server.url}/api/v1/conversations/{cid}/stop", headers=headers, timeout=10)
    assert stop.status_code == 202
    worker.join(15)
    page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, ".waiting-note"), "the message sent", 20)
    page.wait(lambda d: d.find_element(By.ID, "send").is_displayed(), "the answer")
    assert page.user_messages() == ["add Pack the bags", "list tasks"]
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_the_sign_in_screen_passes_axe(browser: WebDriver, page_server: LiveServer, axe_source: str) -> None:
    page = States(browser, page_server, axe_source)
    page.view("desktop")
    browser.get("about:blank")
    browser.get(f"{page_server.url}/")
    page.js("localStorage.clear(); sessionStorage.clear();")
    browser.refresh()
    page.wait(lambda d: d.find_element(By.ID, "token").is_displayed(), "the sign-in form")
    assert not browser.find_element(By.ID, "composer").is_displayed()
    page.check("sign-in")

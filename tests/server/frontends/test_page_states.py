"""The page as a person meets it, in headless Chromium: every screen state at 1280×900 and 390×844 (a
phone), light and dark, checked by axe-core (no violation of any impact) and for sideways overflow;
results shown for people; a failed send kept with Retry; a cut answer marked interrupted, then reconnected.

Screenshots go to tests/artifacts/states-*.png (git-ignored); docs/frontends.md shows a few of them.
"""

from __future__ import annotations

import json
import shutil

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .conftest import ARTIFACTS, LiveServer
from .test_page_browser import DOCS_IMAGES, Page

pytestmark = pytest.mark.timeout(240)

SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
DOCS_SHOTS = {
    "states-desktop-light-confirmation",
    "states-phone-light-confirmation",
    "states-desktop-dark-chatting",
}


class States(Page):
    def __init__(self, driver: WebDriver, live: LiveServer, axe: str) -> None:
        super().__init__(driver, live)
        self.axe = axe

    def view(self, size: str, scheme: str = "light") -> None:
        width, height = SIZES[size]
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": size == "phone"},
        )
        self.driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
        )

    def check(self, state: str) -> None:
        """At both sizes, light and dark: nothing wider than the viewport, axe-core clean, a screenshot."""
        for size in SIZES:
            for scheme in ("light", "dark"):
                self.view(size, scheme)
                self.js("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                name = f"states-{size}-{scheme}-{state}"
                wide = self.js("return [document.documentElement.scrollWidth, window.innerWidth]")
                assert wide[0] <= wide[1], f"{name}: the page is {wide[0]} px wide in a {wide[1]} px viewport"
                self.shot_as(name)
                self.accessible(name)
        self.view("desktop")

    def shot_as(self, name: str) -> None:
        path = ARTIFACTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        if name in DOCS_SHOTS:
            shutil.copyfile(path, DOCS_IMAGES / path.name)

    def accessible(self, name: str) -> None:
        if not self.js("return typeof window.axe === 'object'"):
            self.js(self.axe)  # evaluated by the driver: the page's CSP does not apply to it
        result = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {resultTypes: ['violations']}).then(r => done(r.violations))"
            ".catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));"
        )
        bad = [
            {
                "id": v["id"],
                "impact": v["impact"],
                "help": v["help"],
                "where": [n["target"] for n in v["nodes"]][:3],
            }
            for v in result  # of any impact: minor and moderate ones too
        ]
        (ARTIFACTS / f"{name}.axe.json").write_text(json.dumps(result, indent=1))
        assert bad == [], f"{name}: axe-core found {bad}"

    def fake_fetch(self, mode: str) -> None:
        """Stand in for the network the way the browser sees it: `down` (every request fails, as when the
        server is not running), `cut` (the answer's stream breaks off after its first words, and the
        health check fails until `heal`), `heal` (the real network again)."""
        self.js(
            """
            const mode = arguments[0];
            window.__realFetch = window.__realFetch || window.fetch;
            if (mode === 'heal') { window.fetch = window.__realFetch; return; }
            window.fetch = async (url, options) => {
              if (mode === 'down') throw new TypeError('Failed to fetch');
              if (String(url).includes('/healthz')) throw new TypeError('Failed to fetch');
              if (!String(url).includes('/chat/stream')) return window.__realFetch(url, options);
              const conversation = localStorage.getItem('toolrun.conversation');
              const frames = [
                `event: run_started\\ndata: ${JSON.stringify({conversation_id: conversation})}\\n\\n`,
                'event: text_delta\\ndata: {"message_id": "m-cut", "text": "Here is half an ans"}\\n\\n',
              ];
              const body = new ReadableStream({start(controller) {
                for (const f of frames) controller.enqueue(new TextEncoder().encode(f));
                setTimeout(() => controller.error(new TypeError('network error')), 50);
              }});
              return new Response(body, {status: 200, headers: {'Content-Type': 'text/event-stream'}});
            };
            """,
            mode,
        )


def test_every_state_fits_and_passes_axe(
    browser: WebDriver, live_server: LiveServer, axe_source: str
) -> None:
    page = States(browser, live_server, axe_source)
    browser.get(f"{live_server.url}/#token={live_server.bob}")
    page.click("new-conversation", "the new-chat button after sign-in")

    # Empty: a newcomer is told what to type; an example fills the composer.
    empty = browser.find_element(By.ID, "empty")
    assert empty.is_displayed() and "add buy milk" in empty.text  # the App's starters
    # The demo notice and the empty state agree: both say it is the demo model.
    assert browser.find_element(By.ID, "demo-banner").is_displayed()
    assert "demo model" in browser.find_element(By.ID, "empty-demo").text
    page.check("empty")
    browser.find_element(By.CSS_SELECTOR, ".example").click()
    assert browser.find_element(By.ID, "message").get_attribute("value").startswith("add buy milk")

    # Chatting: the result of a task tool is a task row with its due date in words, raw JSON one click away.
    page.send("add Renew passport !high due 2026-12-01 #admin")
    card = page.wait(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".card.tool[data-finished] .result-view .task"),
        "a task row",
    )[0]
    assert "Renew passport" in card.text and "2026-12-01T" not in card.text and "2026" in card.text
    raw = browser.find_element(By.CSS_SELECTOR, ".card.tool details.raw")
    assert not raw.find_element(By.CSS_SELECTOR, "pre").is_displayed()
    raw.find_element(By.CSS_SELECTOR, "summary").click()
    assert '"title": "Renew passport"' in raw.find_element(By.CSS_SELECTOR, "pre").text
    sidebar = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#task-list .task"), "the task list")[0]
    assert "T00:00:00" not in sidebar.text and "due " in sidebar.text  # the same date words as the chat
    assert browser.find_element(By.ID, "empty").is_displayed() is False
    page.check("chatting")

    # A pending confirmation; then approval: the result card comes after the decision, not above it.
    page.send(f"delete {page.task_id('Renew passport')}")
    confirm = page.open_confirmation()
    page.check("confirmation")
    confirm.find_element(By.CSS_SELECTOR, "button.approve").click()
    page.wait(lambda d: "Renew passport" not in page.task_titles(), "the task gone after approval")
    order = page.js(
        "return [...document.querySelectorAll('#messages > li')]"
        ".map(e => e.className.split(' ').slice(0, 2).join(' '))"
    )
    last_confirm = max(i for i, c in enumerate(order) if c == "card confirm")
    assert "card tool" in order[last_confirm + 1 :], (
        f"the approved call's result is not below its decision: {order}"
    )

    # The phone layout: the chat first, the tasks and conversations one tap away, one panel at a time.
    page.view("phone")
    assert browser.find_element(By.CSS_SELECTOR, ".chat").is_displayed()
    assert not browser.find_element(By.CSS_SELECTOR, ".tasks").is_displayed()
    browser.find_element(By.CSS_SELECTOR, ".views [data-show='tasks']").click()
    assert browser.find_element(By.CSS_SELECTOR, ".tasks").is_displayed()
    assert not browser.find_element(By.CSS_SELECTOR, ".chat").is_displayed()
    page.check("phone-tasks")  # (at the desktop size the same page shows all three panels)
    page.view("phone")
    browser.find_element(By.CSS_SELECTOR, ".views [data-show='chat']").click()
    assert browser.find_element(By.CSS_SELECTOR, ".chat").is_displayed()
    page.view("desktop")


def test_a_message_sent_while_the_server_is_down_is_kept_and_can_be_retried(
    browser: WebDriver,
    live_server: LiveServer,
    axe_source: str,
) -> None:
    page = States(browser, live_server, axe_source)
    browser.get(f"{live_server.url}/#token={live_server.bob}")
    page.click("new-conversation", "the new-chat button after sign-in")
    page.fake_fetch("down")
    page.send("add Call the plumber")
    failed = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.user.failed"), "a failed message")[0]
    assert (
        "Call the plumber" in failed.text and "Not sent" in failed.text and "reach the server" in failed.text
    )
    page.check("error")
    page.fake_fetch("heal")
    failed.find_element(By.CSS_SELECTOR, "button.retry").click()
    page.wait(lambda d: "Call the plumber" in page.task_titles(), "the retried message to create the task")
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg.user.failed")
    assert page.user_messages().count("add Call the plumber") == 1  # kept once, not duplicated


def test_an_answer_cut_midway_is_marked_interrupted_and_the_page_reconnects(
    browser: WebDriver,
    live_server: LiveServer,
    axe_source: str,
) -> None:
    page = States(browser, live_server, axe_source)
    browser.get(f"{live_server.url}/#token={live_server.bob}")
    page.wait(lambda d: d.find_element(By.ID, "app").is_displayed(), "the app after sign-in")
    page.send("add Water the plants")  # a conversation the server knows
    page.wait(lambda d: "Water the plants" in page.task_titles(), "the task")
    page.fake_fetch("cut")
    page.send("list tasks")
    cut = page.wait(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.assistant.interrupted"), "an interrupted answer"
    )
    assert "Here is half an ans" in cut[0].text and "Interrupted" in cut[0].text
    error = browser.find_element(By.ID, "error")
    assert error.is_displayed() and "Reconnecting" in error.text and "Traceback" not in error.text
    page.check("interrupted")
    page.fake_fetch(
        "heal"
    )  # the server is back: the page reconnects by itself and shows what the server kept
    page.wait(
        lambda d: not d.find_element(By.ID, "error").is_displayed(), "the page to reconnect", timeout=30
    )
    assert "add Water the plants" in page.user_messages()
    assert browser.find_element(By.ID, "send").is_enabled()

"""The page in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium) against a
real server with the demo model. Screenshots of each step go to tests/artifacts/ (git-ignored)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from .conftest import ARTIFACTS, LiveServer

pytestmark = pytest.mark.timeout(180)

XSS_TITLE = "<img src=x onerror=alert(1)>"
DOCS_IMAGES = Path(__file__).resolve().parents[3] / "docs" / "images"
DOCS_SHOTS = {"2-task-added", "3-confirmation", "4-approved", "6-markup-as-text"}


class Page:
    def __init__(self, driver: WebDriver, live: LiveServer) -> None:
        self.driver = driver
        self.live = live
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)

    def shot(self, name: str) -> None:
        path = ARTIFACTS / f"page-{name}.png"
        self.driver.save_screenshot(str(path))
        if name in DOCS_SHOTS:  # docs/frontends.md shows the page as the last test run saw it
            shutil.copyfile(path, DOCS_IMAGES / path.name)

    def wait(self, what: Callable[[WebDriver], Any], message: str, timeout: float = 15) -> Any:
        # An element the page re-rendered between finding it and reading it is read again on the next poll.
        waiting = WebDriverWait(
            self.driver, timeout, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]
        )
        try:
            return waiting.until(what, message)
        except TimeoutException:
            self.shot("timeout")
            raise

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def click(self, element_id: str, what: str) -> None:
        """Click an element once it is shown and enabled (a button of the signed-in page is hidden until
        sign-in has answered, later on a busy machine)."""
        self.wait(
            lambda d: (e := d.find_element(By.ID, element_id)).is_displayed() and e.is_enabled() and e, what
        ).click()

    def composer(self) -> Any:
        """The message box, once it takes input (after sign-in has answered: later on a busy machine)."""
        return self.wait(
            lambda d: (e := d.find_element(By.ID, "message")).is_displayed() and e.is_enabled() and e,
            "the message box to take input",
        )

    def send(self, text: str) -> None:
        box = self.composer()
        box.clear()
        box.send_keys(text)
        box.send_keys(Keys.ENTER)  # Enter sends
        self.wait(lambda d: not d.find_element(By.ID, "send").get_attribute("disabled"), "the run to finish")

    def tasks(self) -> dict[str, str]:
        """title → id of the task list as shown (read in one go: the list is re-rendered after each call)."""
        pairs = self.js(
            "return [...document.querySelectorAll('#task-list .task')]"
            ".map(e => [e.querySelector('.task-title').textContent, e.dataset.taskId])"
        )
        return dict(pairs)

    def task_titles(self) -> list[str]:
        return list(self.tasks())

    def task_id(self, title: str) -> str:
        tasks = self.tasks()
        assert title in tasks, f"no task {title!r} in {list(tasks)}"
        return tasks[title]

    def user_messages(self) -> list[str]:
        return list(
            self.js("return [...document.querySelectorAll('.msg.user .body')].map(e => e.textContent)")
        )

    def open_confirmation(self) -> Any:
        cards = self.wait(
            lambda d: [
                c
                for c in d.find_elements(By.CSS_SELECTOR, ".card.confirm")
                if not c.get_attribute("data-decided")
            ],
            "a confirmation card",
        )
        return cards[-1]

    def no_alert(self) -> None:
        try:
            alert = self.driver.switch_to.alert
        except NoAlertPresentException:
            return
        text = alert.text
        alert.dismiss()
        raise AssertionError(f"a script ran: alert({text!r})")


def test_the_page_end_to_end(browser: WebDriver, live_server: LiveServer) -> None:
    page = Page(browser, live_server)
    browser.get(f"{live_server.url}/#token={live_server.alice}")  # the dev link's form
    page.wait(lambda d: d.find_element(By.ID, "app").is_displayed(), "the app after sign-in by link")
    assert "#token" not in browser.current_url  # the token left the address bar
    banner = browser.find_element(By.ID, "demo-banner")
    assert banner.is_displayed() and "demo model" in banner.text and "TOOLRUN_MODEL" in banner.text
    page.shot("1-signed-in")

    # Add a task: a tool card with status and duration, and the task in the list beside the chat.
    page.send("add Buy milk !high #home")
    page.wait(lambda d: "Buy milk" in page.task_titles(), "Buy milk in the task list")
    card = browser.find_element(By.CSS_SELECTOR, ".card.tool[data-tool='create_task']")
    assert card.find_element(By.CSS_SELECTOR, ".status").text == "done"
    assert card.find_element(By.CSS_SELECTOR, ".duration").text.endswith("ms")
    assert '"Buy milk"' in card.find_element(By.CSS_SELECTOR, ".result").get_attribute("textContent")
    page.shot("2-task-added")

    # Delete it: a confirmation card with every argument; approve with the keyboard; it is gone.
    milk = page.task_id("Buy milk")
    page.send(f"delete {milk}")
    confirm = page.open_confirmation()
    assert confirm.find_element(By.CSS_SELECTOR, "h3").text == "Confirm: delete_task"
    assert confirm.find_element(By.CSS_SELECTOR, "dt").text == "task_id"
    assert confirm.find_element(By.CSS_SELECTOR, "dd").text == f'"{milk}"'.strip('"') or milk in confirm.text
    approve = confirm.find_element(By.CSS_SELECTOR, "button.approve")
    assert page.js("return document.activeElement === arguments[0]", approve)  # focus is on Approve
    assert "Buy milk" in page.task_titles()  # nothing ran yet
    page.shot("3-confirmation")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    page.wait(lambda d: "Buy milk" not in page.task_titles(), "Buy milk gone after approval")
    assert approve.get_attribute("disabled") is not None
    assert confirm.find_element(By.CSS_SELECTOR, "button.deny").get_attribute("disabled") is not None
    page.wait(lambda d: "Approved" in confirm.find_element(By.CSS_SELECTOR, ".outcome").text, "the outcome")
    page.shot("4-approved")

    # The deny path: the task stays, the card says so, the buttons are spent.
    page.send("add Keep me")
    page.wait(lambda d: "Keep me" in page.task_titles(), "Keep me in the list")
    page.send(f"delete {page.task_id('Keep me')}")
    confirm = page.open_confirmation()
    confirm.find_element(By.CSS_SELECTOR, "button.deny").click()
    page.wait(
        lambda d: (
            "declined"
            in d.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='delete_task'] .status")[-1].text
        ),
        "the delete card to say declined",
    )
    assert "Keep me" in page.task_titles()
    assert confirm.find_element(By.CSS_SELECTOR, "button.approve").get_attribute("disabled") is not None
    page.shot("5-denied")

    # Markup in a task title is text: no element, no script.
    page.send(f"add {XSS_TITLE}")
    page.wait(lambda d: XSS_TITLE in page.task_titles(), "the title shown as text")
    assert page.js("return document.querySelectorAll('img').length") == 0
    page.no_alert()
    page.shot("6-markup-as-text")

    # A reload keeps the conversation (and the token).
    before = page.user_messages()
    browser.refresh()
    page.wait(
        lambda d: page.user_messages() == before,
        "the same conversation after reload",
    )
    assert len(before) == 5 and before[0] == "add Buy milk !high #home"
    assert browser.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='delete_task']")
    page.no_alert()
    page.shot("7-reloaded")

    # The page forbids inline script: a CSP with script-src 'self' and no 'unsafe-inline'.
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_bad_token_is_refused_in_plain_words(browser: WebDriver, live_server: LiveServer) -> None:
    page = Page(browser, live_server)
    browser.get(f"{live_server.url}/")
    page.js("localStorage.clear(); sessionStorage.clear();")
    browser.refresh()
    field = page.wait(
        lambda d: d.find_element(By.ID, "token") if d.find_element(By.ID, "token").is_displayed() else None,
        "the sign-in form",
    )
    field.send_keys("not-a-token", Keys.ENTER)
    error = page.wait(
        lambda d: d.find_element(By.ID, "error") if d.find_element(By.ID, "error").is_displayed() else None,
        "an error",
    )
    assert "token was not accepted" in error.text
    page.shot("8-bad-token")

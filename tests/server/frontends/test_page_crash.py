"""The page when the server really dies mid-answer: a real uvicorn process (tests/server/_crash_server.py)
SIGKILLed while its run works, in headless Chromium. The cut answer is marked interrupted at once; the page
says it is reconnecting, comes back by itself when a new process serves the same port and database, shows
what the server kept (the partial answer, marked interrupted), and a message sent at once is accepted at
once: the new process on this host sees that the lease's holder is gone. No fake network: the proof for
what test_page_states.py shows with a stand-in fetch."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from processes import free_port

from ..test_crashes import CrashServer, _rows, _setup, _until
from .conftest import LiveServer
from .test_page_browser import Page

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _type(page: Page, text: str) -> None:
    box = page.composer()
    box.clear()
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


async def test_a_real_crash_mid_answer_is_marked_interrupted_and_the_page_comes_back(
    browser: WebDriver, tmp_path: Path
) -> None:
    db, token = await _setup(tmp_path)
    port = free_port()
    first = CrashServer(tmp_path, db, port)
    second: CrashServer | None = None
    try:
        page = Page(browser, LiveServer(url=first.url, alice=token, bob=token))
        browser.get(f"{first.url}/#token={token}")
        page.wait(lambda d: d.find_element(By.ID, "app").is_displayed(), "the app after sign-in")
        _type(page, "slow please")
        await _until(lambda: (tmp_path / "slow_started").exists(), "the slow tool to start")
        page.wait(lambda d: "Working on it." in d.find_element(By.ID, "messages").text, "the first words")
        await _until(  # the heartbeat has saved the answer so far
            lambda: _rows(db, "SELECT partial FROM toolrun_runs WHERE partial IS NOT NULL"), "the partial"
        )
        first.kill()

        # Texts are read in one script each time: the page re-renders the messages when it reconnects.
        def texts(selector: str) -> list[str]:
            found = page.js(f"return [...document.querySelectorAll({selector!r})].map(e => e.innerText)")
            return list(found)

        cut = page.wait(lambda d: texts(".msg.assistant.interrupted"), "an interrupted answer")
        assert "Working on it." in cut[-1] and "Interrupted" in cut[-1]
        error = browser.find_element(By.ID, "error")
        assert error.is_displayed() and "Reconnecting" in error.text
        page.shot("crash-interrupted")

        second = CrashServer(tmp_path, db, port)  # a new process, the same port and database
        page.wait(lambda d: not d.find_element(By.ID, "error").is_displayed(), "the page to reconnect", 40)
        kept = page.wait(
            lambda d: [t for t in texts(".msg.assistant.interrupted") if "Working on it." in t],
            "the kept partial answer, shown as cut",
        )
        assert kept and page.user_messages() == ["slow please"]

        # A message sent at once is accepted at once: the dead process's lease names a process that is gone.
        _type(page, "are you there?")
        page.wait(lambda d: "ok" in texts(".msg.assistant .body"), "the answer to the next message", 30)
        assert page.user_messages() == ["slow please", "are you there?"]  # sent once, not twice
        assert not browser.find_element(By.ID, "error").is_displayed()
        page.shot("crash-recovered")
    finally:
        for server in (first, second):
            if server is not None and server.proc.poll() is None:
                server.kill()

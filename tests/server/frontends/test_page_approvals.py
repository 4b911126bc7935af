"""The confirmation card in headless Chromium: the preview from the server's records is what the person
reads (screenshot), an edit — a form made from the tool's schema — is previewed before it is approved,
shown everywhere, and runs on the edited task; focus goes back to the composer; a denial's reason reaches
the assistant and the card speaks to the person; "always allow" makes a standing rule that is listed,
that the next delete runs under (its card says so), and that can be revoked on the page."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from .conftest import LiveServer
from .test_page_browser import Page

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def last_delete_result(page: Page) -> str:
    cards = page.driver.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='delete_task'] .result")
    return str(cards[-1].get_attribute("textContent")) if cards else ""


def tool_messages(live: LiveServer) -> list[str]:
    [latest, *_] = live.get("/api/v1/conversations", live.alice)["conversations"]
    detail = live.get(f"/api/v1/conversations/{latest['id']}", live.alice)
    return [m["content"] for m in detail["messages"] if m["role"] == "tool"]


def test_the_card_shows_the_preview_edits_denies_with_a_reason_and_always_allows(
    browser: WebDriver,
    live_server: LiveServer,
) -> None:
    page = Page(browser, live_server)
    browser.get(f"{live_server.url}/#token={live_server.alice}")
    page.wait(lambda d: d.find_element(By.ID, "app").is_displayed(), "the app")
    page.send("add Renew passport")
    page.send("add Buy milk")
    page.wait(lambda d: {"Renew passport", "Buy milk"} <= set(page.task_titles()), "both tasks listed")
    passport, milk = page.task_id("Renew passport"), page.task_id("Buy milk")

    # The preview, written from the task store, is the card's headline; the call stays one click away.
    page.send(f"delete {passport}")
    confirm = page.open_confirmation()
    preview = confirm.find_element(By.CSS_SELECTOR, ".preview")
    assert preview.text == "Delete the task 'Renew passport' (no due date), permanently."
    assert passport in confirm.find_element(By.CSS_SELECTOR, "dd").text
    page.shot("approval-preview")

    # Edit: previewed again from the store before it can be approved, then it runs on the edited task.
    confirm.find_element(By.CSS_SELECTOR, "button.edit").click()
    assert not confirm.find_elements(By.CSS_SELECTOR, "textarea.json")  # fields, not a JSON box
    field = confirm.find_element(By.CSS_SELECTOR, ".edit-form input[type='text']")
    label = confirm.find_element(By.CSS_SELECTOR, f"label[for='{field.get_attribute('id')}']")
    assert label.text == "task id"
    assert page.js("return document.activeElement === arguments[0]", field)
    field.clear()
    field.send_keys(milk)
    confirm.find_element(By.CSS_SELECTOR, "button.check-edit").click()
    page.wait(lambda d: "Buy milk" in preview.text, "the preview of the edit")
    assert milk in confirm.find_element(By.CSS_SELECTOR, ".edited").text
    assert confirm.find_element(By.CSS_SELECTOR, "dd").text == milk  # the card shows what will run
    page.shot("approval-edit")
    confirm.find_element(By.CSS_SELECTOR, "button.approve").click()
    assert page.js("return document.activeElement.id") == "message"  # back to the composer
    page.wait(lambda d: "Buy milk" not in page.task_titles(), "the edited task deleted")
    assert "Renew passport" in page.task_titles()
    assert any("changed the arguments" in text for text in tool_messages(live_server))  # the model is told
    ran = browser.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='delete_task']")[-1]
    assert milk in ran.find_element(By.CSS_SELECTOR, ".args-line").text  # the edited call, not the model's
    assert passport not in ran.find_element(By.CSS_SELECTOR, ".args-line").text

    # Deny with a reason: the assistant is told it.
    page.send(f"delete {passport}")
    confirm = page.open_confirmation()
    confirm.find_element(By.CSS_SELECTOR, "input.reason").send_keys("not before Friday")
    confirm.find_element(By.CSS_SELECTOR, "button.deny").click()
    assert page.js("return document.activeElement.id") == "message"
    page.wait(lambda d: "The user said: not before Friday" in last_delete_result(page), "the reason")
    assert "Renew passport" in page.task_titles()
    declined = browser.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='delete_task']")[-1]
    words = declined.find_element(By.CSS_SELECTOR, ".result-declined").text
    assert words.startswith("You declined this action") and "The user" not in words  # to the person

    # Always allow: a standing rule; the next delete is not asked.
    page.send("add Old note")
    page.wait(lambda d: "Old note" in page.task_titles(), "Old note listed")
    page.send(f"delete {passport}")
    confirm = page.open_confirmation()
    confirm.find_element(By.CSS_SELECTOR, "input.always").click()
    confirm.find_element(By.CSS_SELECTOR, "button.approve").click()
    page.wait(lambda d: "Renew passport" not in page.task_titles(), "deleted")
    rules: Any = live_server.get("/api/v1/approval-rules", live_server.alice)["rules"]
    assert [(r["tool"], r["decision"]) for r in rules] == [("delete_task", "allow")]
    listed = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#rule-list .rule"), "the rule listed")
    assert "delete_task" in listed[0].text and "runs without asking" in listed[0].text
    asked = len(browser.find_elements(By.CSS_SELECTOR, ".card.confirm"))
    page.send(f"delete {page.task_id('Old note')}")
    page.wait(lambda d: "Old note" not in page.task_titles(), "deleted under the rule, not asked")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".card.confirm")) == asked
    under_rule = browser.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='delete_task']")[-1]
    assert "allowed by your standing rule" in under_rule.find_element(By.CSS_SELECTOR, ".status").text
    page.shot("approval-rule")

    # Revoke it on the page: gone from the list and from the server.
    listed[0].find_element(By.CSS_SELECTOR, "button.revoke").click()
    page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, "#rule-list .rule"), "the rule revoked")
    assert live_server.get("/api/v1/approval-rules", live_server.alice)["rules"] == []
    assert browser.find_element(By.ID, "rules-empty").is_displayed()

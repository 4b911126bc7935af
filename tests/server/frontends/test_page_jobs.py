"""Background jobs on the page, in headless Chromium, against a live server on durable runs: a job card
appears when the model starts a job, shows the tool's progress, can cancel the job, shows the result when
it finishes, and is there again after a reload — fitting both sizes, light and dark, axe-core clean."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from processes import stop

from .conftest import LiveServer, run_node
from .test_page_states import States

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def jobs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Path]]:
    directory = tmp_path_factory.mktemp("jobs-live")
    log = directory / "server.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_jobs_live_server.py")), str(directory)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        if not line:
            process.wait(timeout=10)
            pytest.fail(f"the live server did not start:\n{log.read_text()[-3000:]}")
        info = json.loads(line)
        live = LiveServer(url=f"http://127.0.0.1:{info['port']}", alice=info["alice"], bob=info["bob"])
        yield live, directory
    finally:
        stop(process)


@pytest.fixture(scope="module")
def axe(node_clients: Path) -> str:
    return (node_clients / "node_modules" / "axe-core" / "axe.min.js").read_text()


def _card(page: States, job_id: str | None = None) -> object:
    selector = f'.card.job[data-job-id="{job_id}"]' if job_id else ".card.job"
    return page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, selector), "a job card")[-1]


def test_a_job_card_updates_cancels_and_finishes(
    browser: WebDriver, jobs_server: tuple[LiveServer, Path], axe: str
) -> None:
    live, directory = jobs_server
    page = States(browser, live, axe)
    browser.get(f"{live.url}/#token={live.alice}")
    page.click("new-conversation", "the new-chat button after sign-in")

    # The model starts a job: a card for it, with the tool's own words about its progress.
    page.send("report 1")
    first = _card(page)
    job_id = first.get_attribute("data-job-id")
    assert job_id and job_id.startswith("job_")
    page.wait(lambda d: "reading the ledger (1 of 2)" in first.text, "the job's progress")
    bar = first.find_element(By.CSS_SELECTOR, "progress")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("1", "2")
    assert first.get_attribute("data-status") == "running" and "background job" in first.text.lower()
    # One status for the job: the call that started it says so, never "done" beside "running".
    call = page.driver.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='build_report'] .status")[-1]
    assert call.text == "started in the background"
    assert [s.text for s in first.find_elements(By.CSS_SELECTOR, ".status")] == ["running…"]
    page.check("job-running")

    # Cancel: the card says so once the job has stopped; the API agrees.
    first.find_element(By.CSS_SELECTOR, "button.cancel-job").click()
    page.wait(lambda d: first.get_attribute("data-status") == "cancelled", "the cancelled job")
    assert "Cancelled" in first.text and not first.find_elements(By.CSS_SELECTOR, "button.cancel-job")
    assert live.get(f"/api/v1/jobs/{job_id}", live.alice)["status"] == "cancelled"

    # Another job runs to its end: the card shows the result as a person reads it.
    page.send("report 2")
    second = page.wait(
        lambda d: [
            c
            for c in d.find_elements(By.CSS_SELECTOR, ".card.job")
            if c.get_attribute("data-job-id") != job_id
        ],
        "the second job's card",
    )[-1]
    second_id = second.get_attribute("data-job-id")
    page.wait(lambda d: "reading the ledger" in second.text, "the second job's progress")
    (directory / "release-2").touch()
    page.wait(lambda d: second.get_attribute("data-status") == "completed", "the finished job")
    assert "1234" in second.find_element(By.CSS_SELECTOR, ".result-view").text
    page.check("job-done")

    # A reload rebuilds both cards from the conversation and the jobs API.
    browser.refresh()
    page.wait(lambda d: d.find_element(By.ID, "app").is_displayed(), "the app after reload")
    again = page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".card.job[data-status]"), "the job cards")
    page.wait(
        lambda d: (
            {
                c.get_attribute("data-job-id"): c.get_attribute("data-status")
                for c in d.find_elements(By.CSS_SELECTOR, ".card.job")
            }
            == {job_id: "cancelled", second_id: "completed"}
        ),
        "both jobs as they ended",
    )
    assert len(again) == 2
    # bob sees none of alice's jobs
    assert live.get("/api/v1/jobs", live.bob) == {"jobs": []}


def test_the_real_ai_sdk_reads_the_jobs_stream(
    jobs_server: tuple[LiveServer, Path], node_clients: Path
) -> None:
    """The AI SDK's own parser and `readUIMessageStream` take the jobs stream: one `data-job` part per job,
    each the job's latest state (runs after the page test above: one job cancelled, one completed)."""
    live, _ = jobs_server
    jobs = live.get("/api/v1/jobs", live.alice)["jobs"]
    assert {job["status"] for job in jobs} == {"cancelled", "completed"}
    url = f"{live.url}/api/v1/jobs/events?format=ai-sdk&until_idle=true"
    report = run_node(node_clients, "jobs_stream_client.mjs", {"url": url, "token": live.alice})
    assert report["status"] == 200 and report["error"] is None, report
    parts = [p for p in report["message"]["parts"] if p["type"] == "data-job"]
    assert {p["id"]: p["data"]["status"] for p in parts} == {job["id"]: job["status"] for job in jobs}
    empty = run_node(node_clients, "jobs_stream_client.mjs", {"url": url, "token": live.bob})
    assert empty["error"] is None and not [p for p in empty["message"]["parts"] if p["type"] == "data-job"]


def test_the_real_ag_ui_client_reads_the_jobs_stream(
    jobs_server: tuple[LiveServer, Path], node_clients: Path
) -> None:
    """The AG-UI client's reader and event verification take the jobs stream: one run whose CUSTOM events
    carry each job's state."""
    live, _ = jobs_server
    jobs = live.get("/api/v1/jobs", live.alice)["jobs"]
    url = f"{live.url}/api/v1/jobs/events?format=ag-ui&until_idle=true"
    report = run_node(node_clients, "jobs_stream_ag_ui.mjs", {"url": url, "token": live.alice})
    assert report["error"] is None, report
    types = [event["type"] for event in report["events"]]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    custom = [event for event in report["events"] if event["type"] == "CUSTOM"]
    assert {e["value"]["id"]: e["value"]["status"] for e in custom} == {j["id"]: j["status"] for j in jobs}
    assert {e["name"] for e in custom} == {"job_finished"}

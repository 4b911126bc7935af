"""An image result on the page, in headless Chromium: the tool's card shows its progress while it runs, then
the picture (fetched with the user's token, shown through a blob: URL) — loaded (`naturalWidth > 0`), no
wider than its card, nothing sideways at 1280 and 390 px, light and dark, axe-core clean.

Screenshots: tests/artifacts/image-*.png; the light ones are copied to docs/images/ (docs/rich-results.md
shows them).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from ._rich import CHART_SIZE, STEPS
from .conftest import ARTIFACTS, LiveServer
from .test_page_browser import DOCS_IMAGES
from .test_page_states import SIZES, States

pytestmark = pytest.mark.timeout(240)

RECORD_STATUSES = """
window.__statuses = [];
new MutationObserver(() => {
  for (const s of document.querySelectorAll('.card.tool .status')) {
    if (window.__statuses.at(-1) !== s.textContent) window.__statuses.push(s.textContent);
  }
}).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
"""

GEOMETRY = """
const img = arguments[0];
const box = img.getBoundingClientRect();
const card = img.closest('.card').getBoundingClientRect();
return {
  complete: img.complete, naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight, src: img.src,
  left: box.left, right: box.right, width: box.width, height: box.height,
  cardLeft: card.left, cardRight: card.right,
  scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
};
"""


@pytest.fixture(scope="module")
def axe_source(node_clients: Path) -> str:
    return (node_clients / "node_modules" / "axe-core" / "axe.min.js").read_text()


def test_an_image_result_loads_and_fits_at_both_sizes(
    browser: WebDriver, rich_server: LiveServer, axe_source: str
) -> None:
    page = States(browser, rich_server, axe_source)
    page.view("desktop")
    browser.get(f"{rich_server.url}/#token={rich_server.alice}")
    page.click("new-conversation", "the new-chat button after sign-in")
    page.js(RECORD_STATUSES)
    page.send("chart sales")

    images = page.wait(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".card.tool[data-finished] img.result-image"), "the image"
    )
    assert len(images) == 1
    image = images[0]
    page.wait(
        lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", image),
        "the image to load",
    )
    card = browser.find_element(By.CSS_SELECTOR, ".card.tool[data-tool='chart']")
    assert "sales: 8 points, rising" in card.text  # the text item beside the picture
    statuses = page.js("return window.__statuses")
    running = [s for s in statuses if "drawing sales" in s]
    assert running and all("%" in s for s in running), statuses  # progress shown while it ran
    assert len(running) <= STEPS

    for size in SIZES:
        for scheme in ("light", "dark"):
            page.view(size, scheme)
            page.js("arguments[0].scrollIntoView({block: 'center'})", image)
            page.js("return new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            name = f"image-{size}-{scheme}"
            shape = page.js(GEOMETRY, image)
            assert shape["complete"] and (shape["naturalWidth"], shape["naturalHeight"]) == CHART_SIZE
            assert shape["src"].startswith("blob:"), shape  # bytes fetched with the token, not a bare URL
            assert shape["width"] > 0 and shape["height"] > 0, f"{name}: the image is not shown: {shape}"
            assert shape["scrollWidth"] <= shape["innerWidth"], f"{name}: the page scrolls sideways: {shape}"
            assert shape["cardLeft"] <= shape["left"] and shape["right"] <= shape["cardRight"] + 0.5, (
                f"{name}: the image overflows its card: {shape}"
            )
            assert shape["right"] <= shape["innerWidth"], f"{name}: the image leaves the viewport: {shape}"
            # the picture keeps its proportions when it is scaled down to the card
            ratio = shape["width"] / shape["height"]
            assert abs(ratio - CHART_SIZE[0] / CHART_SIZE[1]) < 0.02, f"{name}: distorted: {shape}"
            path = ARTIFACTS / f"{name}.png"
            browser.save_screenshot(str(path))
            if scheme == "light":
                shutil.copyfile(path, DOCS_IMAGES / f"page-image-result-{size}.png")
            page.accessible(name)
    page.view("desktop")

    # A reload shows the same picture and words again: the stored result keeps what the stream showed.
    browser.refresh()
    again = page.wait(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".card.tool[data-tool='chart'] img.result-image"),
        "the image after a reload",
    )
    page.wait(
        lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", again[0]),
        "the image to load again",
    )
    card = browser.find_element(By.CSS_SELECTOR, ".card.tool[data-tool='chart']")
    assert "sales: 8 points, rising" in card.text

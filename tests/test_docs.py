"""Every ```python block in README.md and docs/ runs, so no page can drift from the code.

The blocks of one page run in order in one namespace (a page is a story: later blocks use names from earlier
ones), in a fresh interpreter with the project's root as working directory. A block that prints what the
page says it prints can pin that with a following ` ```text ` block whose first line is `# output` — the
collector compares them.

People paste examples into files: each block runs as a file (`asyncio.run(main())`), or says where it runs.
A block with top-level `await` must begin with `AWAIT_MARKER` (it runs in `python -m asyncio`, IPython or
Jupyter, as it says); only such blocks are compiled with top-level await allowed, so an unmarked one is a
SyntaxError here as it is in a file. A block that begins with `# file: NAME.py` is also saved under that
name (in a folder of the page's own, on `PYTHONPATH`), so that a later block can import it as a reader's
file would (`from notes_app import app`); it runs with `__file__` set to that path.

Only ` ```python ` blocks run; shell, JSON, TOML and text blocks are shown, never executed.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

AWAIT_MARKER = "# Top-level await: run this in `python -m asyncio`, IPython or Jupyter."
"""The first line of a block that awaits at top level: where it runs, for a reader about to paste it."""

# Runs the blocks of one page: a marked block compiled with top-level await allowed and awaited on one event
# loop; any other block compiled as a file would be.
_RUNNER = r"""
import ast, asyncio, json, sys, types
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__docs__"}
# One loop for every block with top-level await; it is not running between blocks, so a block that calls
# asyncio.run() itself (a script's style) works too.
with asyncio.Runner() as runner:
    for index, (line, code, marked, path) in enumerate(blocks):
        source = "\n" * (line - 1) + code  # tracebacks give the page's own line numbers
        namespace["__file__"] = path
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if marked else 0
        compiled = compile(source, sys.argv[1], "exec", flags=flags)
        result = eval(compiled, namespace)
        if isinstance(result, types.CoroutineType):
            runner.run(result)
        print(f"\x00end of block {index}", flush=True)
"""


def python_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """`(line, code, expected output or None)` for each ```python block of `page`."""
    text = page.read_text()
    found: list[tuple[int, str, str | None]] = []
    matches = list(_FENCE.finditer(text))
    for i, match in enumerate(matches):
        if match.group(1) != "python":
            continue
        expected = None
        following = matches[i + 1] if i + 1 < len(matches) else None
        if (
            following is not None
            and following.group(1) == "text"
            and following.group(2).startswith("# output\n")
            and not text[match.end() : following.start()].strip()
        ):
            expected = following.group(2).removeprefix("# output\n")
        line = text.count("\n", 0, match.start(2)) + 1
        found.append((line, match.group(2), expected))
    return found


def test_collector_finds_blocks_and_expected_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# T\n\n```python\nprint(1)\n```\n\n```text\n# output\n1\n```\n\n```bash\nls\n```\n")
    assert python_blocks(page) == [(4, "print(1)\n", "1\n")]


_FILE = re.compile(r"# file: ([\w./-]+\.py)\n")


def file_name(code: str) -> str | None:
    """The file a block is saved as (`# file: notes_app.py` on its first line), or None."""
    match = _FILE.match(code)
    if match is None:
        return None
    name = match[1]
    if name.startswith("/") or ".." in name.split("/"):
        raise ValueError(f"a block's file name must stay in the page's folder: {name!r}")
    return name


def awaits_at_top_level(code: str) -> bool:
    """Whether `code` is valid only with top-level await (a SyntaxError in a file)."""
    try:
        compile(code, "<block>", "exec")
    except SyntaxError:
        try:
            compile(code, "<block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError:
            return False
        return True
    return False


def test_every_block_runs_as_a_file_or_says_where_it_runs() -> None:
    unmarked = [
        f"{page.relative_to(ROOT)}:{line}"
        for page in PAGES
        for line, code, _ in python_blocks(page)
        if awaits_at_top_level(code) and not code.startswith(AWAIT_MARKER)
    ]
    assert unmarked == [], f"top-level await without {AWAIT_MARKER!r} (or wrap it: asyncio.run(main()))"
    marked_in_vain = [
        f"{page.relative_to(ROOT)}:{line}"
        for page in PAGES
        for line, code, _ in python_blocks(page)
        if code.startswith(AWAIT_MARKER) and not awaits_at_top_level(code)
    ]
    assert marked_in_vain == []


def test_the_await_rule_tells_a_file_from_a_notebook() -> None:
    assert awaits_at_top_level("import asyncio\nawait asyncio.sleep(0)\n")
    assert awaits_at_top_level("async with x as y:\n    pass\n")
    assert not awaits_at_top_level(
        "import asyncio\n\nasync def main():\n    await asyncio.sleep(0)\n\nasyncio.run(main())\n"
    )
    assert not awaits_at_top_level("print(1)\n")


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    "page", [p for p in PAGES if python_blocks(p)], ids=lambda p: str(p.relative_to(ROOT))
)
def test_page_runs(page: Path) -> None:
    run_page(page, sys.executable, cwd=ROOT)


def run_page(page: Path, python: str | Path, *, cwd: Path, env: dict[str, str] | None = None) -> None:
    """Runs `page`'s Python blocks in order in one fresh `python` and checks each pinned output."""
    blocks = python_blocks(page)
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRUN_", "OPENAI_", "ANTHROPIC_"))}
    folder = Path(tempfile.mkdtemp(prefix="toolrun-docs-"))
    sent = []
    for line, code, _ in blocks:
        name = file_name(code)
        path = None
        if name is not None:
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
            path = str(target)
        sent.append((line, code, code.startswith(AWAIT_MARKER), path))
    env = {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH", "")) if p)}
    out = subprocess.run(
        [python, "-c", _RUNNER, str(page.relative_to(ROOT))],
        input=json.dumps(sent),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, f"{page.name}: a block failed\n{out.stderr[-4000:]}"
    printed = out.stdout.split("\x00")
    for index, (line, _, expected) in enumerate(blocks):
        chunk = printed[index] if index < len(printed) else ""
        chunk = chunk.removeprefix(f"end of block {index - 1}\n") if index else chunk
        if expected is not None:
            assert chunk == expected, f"{page.name}:{line}: printed {chunk!r}, the page says {expected!r}"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_docs_site_builds_strictly(tmp_path: Path) -> None:
    """`make docs`: a broken link, a missing page or an unresolvable API reference fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=170,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "runtime" / "index.html").is_file()
    _diagrams_render_offline(tmp_path / "site")


def _diagrams_render_offline(site: Path) -> None:
    """The built site, served on 127.0.0.1 and opened in headless Chromium with every other host
    unreachable, draws its mermaid diagrams: the script is bundled, not fetched from a CDN."""
    import functools
    import http.server
    import threading

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/service/")
        # Material draws each diagram into a closed shadow root of an (otherwise empty) div: a drawn
        # diagram is one with a height; an undrawn one stays an empty div or the source text.
        height = (
            "const e = document.querySelector('div.mermaid'); return e ? e.getBoundingClientRect().height : 0"
        )
        WebDriverWait(driver, 30, poll_frequency=0.2).until(
            lambda d: d.execute_script(height) > 100, "no mermaid diagram was drawn on docs/service.md"
        )
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


def test_every_picture_in_docs_images_is_shown_and_exists() -> None:
    """The screenshots the browser test writes to docs/images/ are all on a page, and every picture a page
    shows exists (a renamed screenshot would otherwise leave a stale file or a broken image)."""
    shown: set[str] = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", page.read_text()):
            path = (page.parent / target).resolve()
            assert path.is_file(), f"{page.relative_to(ROOT)} shows {target}, which does not exist"
            shown.add(str(path))
    images = {str(p.resolve()) for p in (ROOT / "docs" / "images").glob("*.png")}
    assert images, "docs/images/ holds no screenshots"
    assert images <= shown, f"never shown: {sorted(images - shown)}"

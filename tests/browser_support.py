"""What the browser tests share: TensorBoard with the plugin, headless Chromium driven by Playwright,
and helpers to read the plugin's tables.  The fixtures (tensorboard, browser, session) are in
conftest.py; each browser test module defines `logdir` and `EXPECTED_RUNS` and imports this module
first: it skips the module, with the reason, where Playwright, Chromium or the plugin's entry point
is missing.

Needs: Debian's chromium (/usr/bin/chromium, or $CHROMIUM), `pip install playwright` (no
`playwright install`: the system browser is used), and the plugin's `tensorboard_plugins` entry
point installed (`pip install -e .`).  Screenshots go to test-artifacts/screenshots/.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest

from conftest import free_port, get_json

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="Python playwright is not installed (pip install playwright)")
if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)", allow_module_level=True)


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points
    try:
        eps = entry_points(group="tensorboard_plugins")
    except TypeError:  # Python < 3.10
        eps = entry_points().get("tensorboard_plugins", [])
    return any(ep.name == "tb_hwprof" for ep in eps)


if not _plugin_installed():
    pytest.skip("the tb_hwprof tensorboard_plugins entry point is not installed (pip install -e .)",
                allow_module_level=True)


def export_run(files, logdir: Path, run: str):
    cmd = [sys.executable, "-m", "tb_hwprof", "export", *map(str, files), "--logdir", str(logdir), "--run", run]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"


def serve_tensorboard(logdir, tmp_path_factory, expected):
    """A TensorBoard serving `logdir` (yields its base URL); tries the default data server, then
    --load_fast=false.  Waits until /runs lists the `expected` runs."""
    log_dir = tmp_path_factory.mktemp("tb-log")
    failures = []
    for extra in ([], ["--load_fast=false"]):
        port = free_port()
        log = open(log_dir / f"tensorboard{'-slow' if extra else ''}.log", "w+")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
             "--port", str(port), "--reload_interval", "2", *extra],
            stdout=log, stderr=subprocess.STDOUT, cwd=str(tmp_path_factory.getbasetemp()))
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        seen = set()
        while time.time() < deadline and proc.poll() is None:
            try:
                seen = {r["run"] for r in get_json(f"{base}/data/plugin/tb_hwprof/runs")["runs"]}
                if expected <= seen:
                    break
            except (urllib.error.URLError, OSError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        if expected <= seen:
            try:
                yield base
            finally:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                log.close()
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.seek(0)
        failures.append(f"tensorboard {' '.join(extra) or '(default)'}: runs seen {sorted(seen)}; "
                        f"log tail:\n{log.read()[-3000:]}")
        log.close()
    pytest.fail("TensorBoard never listed the tb_hwprof runs:\n" + "\n".join(failures))


def launch_browser():
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Session:
    """The TensorBoard page, its plugin iframe, and what the page did that it should not have."""

    def __init__(self, page, base):
        self.page = page
        self.base = base
        self.dialogs = []
        self.errors = []
        page.on("dialog", self._on_dialog)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _on_dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self):
        self.page.goto(f"{self.base}/#tb_hwprof")
        self.page.wait_for_selector("iframe", state="attached", timeout=30000)
        return self.frame()

    def frame(self):
        deadline = time.time() + 30
        while time.time() < deadline:
            for frame in self.page.frames:
                if "plugin_entry.html" in frame.url and "tb_hwprof" in frame.url:
                    frame.wait_for_selector("header.top nav.views", timeout=30000)
                    return frame
            self.page.wait_for_timeout(200)  # (not time.sleep: Playwright learns of new frames while it waits)
        raise AssertionError(f"no tb_hwprof iframe among {[f.url for f in self.page.frames]}")

    def go(self, hash_: str):
        """Navigate the plugin by its URL hash (what a shared link does)."""
        frame = self.frame()
        frame.evaluate("h => { location.hash = h; }", hash_)
        return frame

    def shot(self, name: str):
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"))


def open_session(browser, base: str):
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    page = context.new_page()
    s = Session(page, base)
    try:
        yield s
    finally:
        context.close()
    assert not s.dialogs, f"a dialog fired: {s.dialogs}"
    assert not s.errors, f"uncaught page errors: {s.errors}"


def wait_rows(frame, role: str, n=None, timeout=30000):
    rows = frame.locator(f"table[data-role={role}] tbody tr[data-row-id]")
    if n is None:
        rows.first.wait_for(timeout=timeout)
    else:
        frame.wait_for_function(
            "([role, n]) => document.querySelectorAll(`table[data-role=${role}] tbody tr[data-row-id]`).length === n",
            arg=[role, n], timeout=timeout)
    return rows


def column(frame, role: str, col: str, attr="data-value"):
    return frame.eval_on_selector_all(
        f"table[data-role={role}] tbody tr[data-row-id] td[data-col={col}]",
        "(cells, attr) => cells.map(c => c.getAttribute(attr))", attr)


def log_pos(value, lo, hi, a, b):
    return a + (math.log10(value) - lo) / (hi - lo) * (b - a)


def nav_of_run(session, run: str) -> list:
    """[view, label] of the nav buttons shown on the Runs view with `run` picked, once they equal
    what GET /runs offers for it (the views about all runs, then the run's own, in the server's
    order); fails if they never do.  The server's list is returned."""
    doc = get_json(f"{session.base}/data/plugin/tb_hwprof/runs")
    [row] = [r for r in doc["runs"] if r["run"] == run]
    offered = [[v["name"], v["title"]] for v in doc["views"] if not v["per_run"] or v["name"] in row["views"]]
    frame = session.go(f"#view=runs&run={run}")
    frame.wait_for_function("""want => JSON.stringify([...document.querySelectorAll('nav.views button')]
        .filter(b => !b.hidden).map(b => [b.dataset.view, b.textContent])) === JSON.stringify(want)""", arg=offered,
        timeout=30000)
    return offered


def open_roofline(session, run: str, points: int):
    """(frame, svg, box) of the Roofline of `run` once its `points` point marks are drawn (kernel
    circles and operator shapes: data-role=point); box is the scale the <svg> carries (log10 domain
    and plot box, frontend/views/roofline.js)."""
    session.open()
    frame = session.go(f"#view=roofline&run={run}")
    svg = frame.locator("svg[data-role=roofline]")
    svg.wait_for()
    frame.wait_for_function("n => document.querySelectorAll('svg[data-role=roofline] [data-role=point]').length === n",
                            arg=points)
    box = {k: float(svg.get_attribute(f"data-{k}")) for k in
           ("x-min", "x-max", "y-min", "y-max", "plot-left", "plot-right", "plot-top", "plot-bottom")}
    return frame, svg, box


# -- the Timeline ---------------------------------------------------------------------------------
def wait_window(frame, predicate_js: str = "true", timeout=30000):
    """Until the Timeline's canvas has drawn a window for which `predicate_js` (over its element `c`)
    holds."""
    frame.wait_for_function(f"() => {{ const c = document.querySelector('canvas[data-role=timeline]'); "
                            f"return c && c.dataset.drawn !== undefined && c.dataset.start !== undefined "
                            f"&& ({predicate_js}); }}", timeout=timeout)


def open_timeline(session, run: str, predicate_js: str = "Number(c.dataset.returned) > 0", timeout=30000):
    """The plugin opened on `run`'s Timeline, once its first window is drawn; the frame."""
    session.open()
    frame = session.go(f"#view=timeline&run={run}")
    wait_window(frame, predicate_js, timeout)
    return frame


def show_window(frame, run: str, start: int, end: int):
    """The Timeline of `run` moved to start..end ns (as a shared link does), once drawn."""
    frame.evaluate("h => { location.hash = h; }", f"#view=timeline&run={run}&start={start}&end={end}")
    wait_window(frame, f"c.dataset.start === '{start}' && c.dataset.end === '{end}'")

"""Headless Chromium for the picture's screenshot tests and benchmark: find it, take a screenshot, read the DOM."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from npu_sim_bridge.childproc import Child

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WINDOW = (1600, 1000)
# A page of 10k nodes draws in a few seconds; headless Chromium now and then hangs at start or at the capture
# and never exits. Such a run is killed, with every process it started, and tried afresh with a new profile.
TRY_SECONDS = 60
TRIES = 3
READ_AFTER_KILL_SECONDS = 10


def find_chromium() -> str | None:
    """$NPU_SIM_CHROMIUM, else the first of NAMES on PATH, else None."""
    explicit = os.environ.get("NPU_SIM_CHROMIUM")
    if explicit:
        return explicit
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _command(chromium: str, url: str, profile: str, *flags: str, window: tuple[int, int] = WINDOW) -> list[str]:
    width, height = window
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start. The virtual time budget lets
    # the page's requestAnimationFrame drawing finish before the capture.
    return [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
            "--no-first-run", "--run-all-compositor-stages-before-draw", "--virtual-time-budget=15000",
            f"--user-data-dir={profile}", f"--window-size={width},{height}", *flags, url]


def _run(chromium: str, url: str, flag: str, timeout: float, tries: int,
         window: tuple[int, int] = WINDOW) -> subprocess.CompletedProcess:
    """Run Chromium on url with flag; a run past `timeout` seconds is killed with its group (its renderer
    and GPU processes too) and tried again, up to `tries`."""
    hung = []
    for _ in range(tries):
        with tempfile.TemporaryDirectory(prefix="npu_sim_chromium_") as profile, \
                Child(_command(chromium, url, profile, flag, window=window)) as browser:
            try:
                stdout, stderr = browser.process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                browser.signal_group(signal.SIGKILL)
                hung.append(_last_words(browser))
                continue
            return subprocess.CompletedProcess(browser.process.args, browser.process.returncode,
                                               stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))
    raise RuntimeError(f"{chromium} hung on {url} {tries} times ({timeout:.0f} s each); check that it starts "
                       f"headless on this machine. Its last words: {hung[-1]}")


def _last_words(browser: Child) -> str:
    """The end of a killed browser's stderr, not read past READ_AFTER_KILL_SECONDS (a process that left
    its group could hold the pipe open)."""
    try:  # communicate hands back what the timed-out call had read already, and the rest
        return browser.process.communicate(timeout=READ_AFTER_KILL_SECONDS)[1].decode("utf-8", "replace")[-1000:]
    except subprocess.TimeoutExpired:
        return "(its output stayed open after the kill)"


def screenshot(chromium: str, html_path: str, png_path: str, fragment: str = "", timeout: float = TRY_SECONDS,
               tries: int = TRIES, window: tuple[int, int] = WINDOW) -> float:
    """Capture the page as Chromium shows it in a window of `window` (width, height) pixels; returns the
    seconds it took, any retried hang included."""
    url = "file://" + os.path.abspath(html_path) + fragment
    started = time.perf_counter()
    completed = _run(chromium, url, f"--screenshot={png_path}", timeout, tries, window)
    if completed.returncode != 0 or not os.path.exists(png_path):
        raise RuntimeError(f"{chromium} could not capture {html_path} (exit {completed.returncode}): "
                           f"{completed.stderr[-2000:]}")
    return time.perf_counter() - started


def dump_dom(chromium: str, html_path: str, fragment: str = "", timeout: float = TRY_SECONDS,
             tries: int = TRIES, window: tuple[int, int] = WINDOW) -> str:
    """The page's DOM after its scripts ran (the picture records its first-draw time in data-render-ms,
    and what the opening view shows in data-view: see view_state)."""
    url = "file://" + os.path.abspath(html_path) + fragment
    completed = _run(chromium, url, "--dump-dom", timeout, tries, window)
    if completed.returncode != 0:
        raise RuntimeError(f"{chromium} could not load {html_path}: {completed.stderr[-2000:]}")
    return completed.stdout


def view_state(dom: str) -> dict:
    """What the picture's first view shows, as the page wrote it in data-view (picture_legend.js viewState):
    zoom, label size in pixels, the boxes fully on screen by op type, the legend's width, the header's rows."""
    found = re.search(r'data-view="([^"]*)"', dom)
    if found is None:
        raise RuntimeError("the page wrote no data-view: its script did not finish its first drawing")
    return json.loads(html.unescape(found.group(1)))

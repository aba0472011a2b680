"""Headless Chromium for the picture's screenshot tests and benchmark: find it, take a screenshot, read the DOM."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
WINDOW = (1600, 1000)


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


def _command(chromium: str, url: str, *flags: str) -> list[str]:
    width, height = WINDOW
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start. The virtual time budget lets
    # the page's requestAnimationFrame drawing finish before the capture.
    return [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
            "--no-first-run", "--run-all-compositor-stages-before-draw", "--virtual-time-budget=15000",
            f"--window-size={width},{height}", *flags, url]


def screenshot(chromium: str, html_path: str, png_path: str, fragment: str = "", timeout: float = 120) -> float:
    """Capture the page as Chromium shows it at WINDOW; returns the seconds Chromium took."""
    started = time.perf_counter()
    url = "file://" + os.path.abspath(html_path) + fragment
    completed = subprocess.run(_command(chromium, url, f"--screenshot={png_path}"), capture_output=True,
                               text=True, timeout=timeout, check=False)
    if completed.returncode != 0 or not os.path.exists(png_path):
        raise RuntimeError(f"{chromium} could not capture {html_path} (exit {completed.returncode}): "
                           f"{completed.stderr[-2000:]}")
    return time.perf_counter() - started


def dump_dom(chromium: str, html_path: str, fragment: str = "", timeout: float = 120) -> str:
    """The page's DOM after its scripts ran (the picture records its first-draw time in data-render-ms)."""
    url = "file://" + os.path.abspath(html_path) + fragment
    completed = subprocess.run(_command(chromium, url, "--dump-dom"), capture_output=True, text=True,
                               timeout=timeout, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{chromium} could not load {html_path}: {completed.stderr[-2000:]}")
    return completed.stdout

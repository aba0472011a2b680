"""The screenshot helper against a stand-in browser: a hung run is killed with its children and tried afresh."""

import os
import stat
import time

import pytest

from npu_sim_bridge.testing import browser

# Hangs (with a child that would outlive a plain kill) until its counter file reaches HANG_RUNS, then
# writes the file named by --screenshot=, or prints a DOM for --dump-dom.
FAKE = """#!/bin/sh
count=$(cat "{counter}" 2>/dev/null || echo 0)
count=$((count + 1))
echo "$count" > "{counter}"
for arg in "$@"; do
  case "$arg" in --user-data-dir=*) echo "${{arg#--user-data-dir=}}" >> "{profiles}";; esac
done
if [ "$count" -le {hang_runs} ]; then
  sleep 600 >/dev/null 2>&1 &  # holds no pipe, so a kill of the browser alone would not hang the test
  echo $! >> "{children}"
  echo "stuck at the capture" >&2
  wait
fi
for arg in "$@"; do
  case "$arg" in
    --screenshot=*) echo png > "${{arg#--screenshot=}}";;
    --dump-dom) echo '<html data-render-ms="5"></html>';;
  esac
done
"""


def fake_browser(tmp_path, hang_runs):
    files = {name: str(tmp_path / name) for name in ("counter", "profiles", "children")}
    path = tmp_path / "chromium"
    path.write_text(FAKE.format(hang_runs=hang_runs, **files))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path), files


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is dead too
        return handle.read().split()[2] != "Z"


def test_a_hung_capture_is_killed_with_its_children_and_tried_with_a_fresh_profile(tmp_path):
    chromium, files = fake_browser(tmp_path, hang_runs=2)
    (tmp_path / "page.html").write_text("<html></html>")
    png = str(tmp_path / "page.png")
    browser.screenshot(chromium, str(tmp_path / "page.html"), png, timeout=1, tries=3)
    assert open(png).read() == "png\n"
    profiles = open(files["profiles"]).read().split()
    assert len(profiles) == 3 and len(set(profiles)) == 3
    assert not any(os.path.exists(profile) for profile in profiles)  # each profile removed after its run
    children = [int(pid) for pid in open(files["children"]).read().split()]
    assert len(children) == 2
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in children)


def test_a_browser_that_always_hangs_is_an_error_that_says_so(tmp_path):
    chromium, _ = fake_browser(tmp_path, hang_runs=99)
    (tmp_path / "page.html").write_text("<html></html>")
    with pytest.raises(RuntimeError, match=r"hung on file://.*page\.html 2 times .*stuck at the capture"):
        browser.dump_dom(chromium, str(tmp_path / "page.html"), timeout=1, tries=2)


def test_a_process_that_left_the_group_does_not_hold_the_helper(tmp_path, monkeypatch):
    # The browser's child starts a session of its own, so the group kill misses it, and keeps stderr open.
    script = tmp_path / "chromium"
    script.write_text("#!/bin/sh\nsetsid sleep 600 &\necho $! > \"%s\"\nwait\n" % (tmp_path / "child"))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "page.html").write_text("<html></html>")
    monkeypatch.setattr(browser, "READ_AFTER_KILL_SECONDS", 1)
    try:
        with pytest.raises(RuntimeError, match=r"hung .* 1 times .*its output stayed open after the kill"):
            browser.dump_dom(str(script), str(tmp_path / "page.html"), timeout=1, tries=1)
    finally:
        os.kill(int((tmp_path / "child").read_text()), 9)


def test_the_dom_comes_back_from_a_run_that_finishes(tmp_path):
    chromium, _ = fake_browser(tmp_path, hang_runs=0)
    (tmp_path / "page.html").write_text("<html></html>")
    assert 'data-render-ms="5"' in browser.dump_dom(chromium, str(tmp_path / "page.html"))

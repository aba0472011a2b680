"""The slow-test list names test files that exist, and the marker it gives is registered."""

import os

from conftest import SLOW_TEST_FILES


def test_every_listed_slow_file_exists():
    here = os.path.dirname(os.path.abspath(__file__))
    missing = sorted(name for name in SLOW_TEST_FILES if not os.path.exists(os.path.join(here, name)))
    assert not missing, f"SLOW_TEST_FILES in tests/conftest.py names files that do not exist: {missing}"


def test_the_slow_marker_is_registered(pytestconfig):
    assert any(line.startswith("slow:") for line in pytestconfig.getini("markers"))

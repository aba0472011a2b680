"""benchmarks/count_rewrite_instructions.py: it refuses a run with no baseline, says what it needs where valgrind
is missing, and reads callgrind's instruction count from its summary."""

import pytest

from script_modules import load_script


@pytest.fixture(scope="module")
def count():
    return load_script("benchmarks/count_rewrite_instructions.py")


def test_a_run_without_the_baseline_or_with_an_unknown_configuration_is_refused(count, capsys):
    for configs in ("npu,npu_all", "tf_amp,npu_some"):
        with pytest.raises(SystemExit) as raised:
            count.main(["--configs", configs])
        assert raised.value.code == 2
        assert "needs tf_amp" in capsys.readouterr().err


def test_without_valgrind_it_says_what_to_install_and_exits_2(count, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "")  # no valgrind to find
    assert count.main(["--configs", "tf_amp"]) == 2
    assert "apt-get install valgrind" in capsys.readouterr().out


def test_the_count_is_read_from_callgrinds_summary(count, monkeypatch):
    summary = "==7== Events    : Ir\n==7== Collected : 5306468437\n==7==\n==7== I   refs:      5,306,468,437\n"

    class Done:
        returncode, stderr = 0, summary

    monkeypatch.setattr(count.subprocess, "run", lambda *args, **kwargs: Done())
    assert count.counted("fixed", 1, "meta.pb") == 5_306_468_437
    Done.returncode = 1
    with pytest.raises(RuntimeError, match="callgrind run fixed x1 failed"):
        count.counted("fixed", 1, "meta.pb")

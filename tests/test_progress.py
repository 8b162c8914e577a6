"""The progress bar: silent off a terminal, counts and figures on one."""

import io

import optuna
import pytest

from iobo.progress import ProgressBar
from iobo.trials import ROLE_DEFAULT, ROLE_SEARCH

from test_report import add


class Terminal(io.StringIO):
    """Captured output that claims to be a terminal."""

    def isatty(self):
        return True


@pytest.fixture
def study(storage):
    s = optuna.create_study(storage=storage, study_name="p", direction="maximize")
    s.set_user_attr("kernel", "vpic")
    s.set_user_attr("ranks", 2)
    return s


def run_loop(bar, study, runs, asks):
    """Feed the bar as the tuner would: trials finish one by one, the rest still in flight."""
    bar.loop_started(study, asks)
    frames = []
    for i, (value, role, minute) in enumerate(runs):
        add(study, value, role, minute)
        bar.trial_finished(study, study.get_trials()[-1], running=asks - i - 1)
        if isinstance(bar.file, Terminal):
            frames.append(bar.file.getvalue().split("\r")[-1])
    bar.loop_finished(study)
    return frames


RUNS = [(100.0, ROLE_DEFAULT, 1), (100.0, ROLE_DEFAULT, 2), (100.0, ROLE_DEFAULT, 3), (150.0, ROLE_SEARCH, 4)]


def test_silent_when_the_output_is_not_a_terminal(study, capsys):
    out = io.StringIO()
    run_loop(ProgressBar(out), study, RUNS[:2], asks=2)
    assert out.getvalue() == ""
    run_loop(ProgressBar(), study, RUNS[2:], asks=2)  # stdout, captured by pytest: not a terminal
    assert capsys.readouterr() == ("", "")


def test_on_a_terminal_it_counts_trials_and_shows_the_best_run(study):
    frames = run_loop(ProgressBar(Terminal()), study, RUNS, asks=4)
    assert "1/4" in frames[0] and "3 in flight" in frames[0] and "best 100 MB/s" in frames[0]
    assert "3/4" in frames[2] and "1 in flight" in frames[2]
    assert "4/4" in frames[3] and "0 in flight" in frames[3] and "best 150 MB/s" in frames[3]
    # no RoTI from the search's single runs: the study's RoTI is a confirmed gain's (150 MB/s once is not one)
    assert not any("RoTI" in frame for frame in frames)

"""``iobo best``: the recommendation and its measured figure first, the lucky single run only as such; its output
can be cut short by the reader (``| head -3``). Studies of known trials in a real SQLite storage."""

import re
import subprocess
import sys

from iobo.cli import main
from iobo.trials import ROLE_SEARCH

from support.studies import add, confirmed, defaults, vpic_tuner

GAIN = [(100.0, 180.0), (104.0, 190.0), (97.0, 170.0), (101.0, 185.0), (99.0, 178.0)]
NO_GAIN = [(100.0, 93.0), (96.0, 101.0), (104.0, 88.0), (101.0, 97.0), (99.0, 104.0)]


def lucky_study(storage, scratch):
    """The default at 100 MB/s, one lucky run of files=per_process at 3,801 MB/s, another at 200."""
    study = vpic_tuner(storage, scratch).open_study()
    defaults(study)
    add(study, 3801.0, ROLE_SEARCH, 4, {"files": "per_process"})
    add(study, 200.0, ROLE_SEARCH, 5, {"files": "per_process"})
    return study


def best(capsys, storage):
    assert main(["best", "--storage", storage]) == 0
    return capsys.readouterr().out.splitlines()


def test_best_headlines_the_recommendation_and_its_confirmed_figure_not_the_lucky_run(storage, scratch, capsys):
    study = lucky_study(storage, scratch)
    lines = best(capsys, storage)
    assert lines[0] == ("recommended: files=per_process (trial 3's configuration, not minimized (`iobo minimize` "
                        "tests which changes matter))")
    # unconfirmed: the median of every run of that configuration, said to be unconfirmed
    assert lines[1] == "measured: 2,000 MB/s, median of 2 run(s) of this configuration; not confirmed: `iobo confirm`"
    assert lines[2].startswith("best single run: 3,801 MB/s (trial 3 of study 's'; the luckiest of 5 runs")
    confirmed(study, GAIN, {"files": "per_process"})
    lines = best(capsys, storage)
    assert re.fullmatch(r"measured: 180 MB/s against the default's 100 MB/s, 1\.80x \[1\.\d\d-1\.\d\d\] \(medians of "
                        r"5 and 5 interleaved runs, `iobo confirm`\)", lines[1])


def test_best_after_an_undecided_confirmation_recommends_the_default_and_says_it_is_undecided(storage, scratch, capsys):
    study = lucky_study(storage, scratch)
    confirmed(study, NO_GAIN, {"files": "per_process"})
    lines = best(capsys, storage)
    assert re.fullmatch(r"recommended: keep the system default: the confirmation of files=per_process measured "
                        r"0\.9\dx \[0\.\d\d-1\.\d\d\], undecided after 5 pairs, not shown to help: about \d+ more "
                        r"pairs would settle it \(proposed: trial 3's configuration, .*\)", lines[0])
    assert lines[1] == "measured: 100 MB/s, median of 8 run(s) of this configuration"  # every default run
    assert "app: files=shared" in lines


def test_best_cut_short_by_its_reader_ends_without_a_traceback(storage, scratch):
    """`iobo best | head -3` with the reader gone before iobo writes: no BrokenPipeError traceback, exit 141 (as a
    program SIGPIPE ended)."""
    lucky_study(storage, scratch)
    program = subprocess.Popen([sys.executable, "-m", "iobo.cli", "best", "--storage", storage],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    program.stdout.close()  # the reader has left
    err = program.stderr.read().decode()
    assert program.wait(timeout=120) == 141
    assert err == ""


def test_best_full_shows_the_whole_configuration_with_its_own_confirmation(storage, scratch, capsys):
    study = lucky_study(storage, scratch)
    confirmed(study, NO_GAIN, {"files": "per_process"})
    assert main(["best", "--storage", storage, "--full"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("recommended: files=per_process (trial 3's configuration, not minimized")
    assert re.fullmatch(r"measured: 97 MB/s against the default's 100 MB/s, 0\.9\dx \[0\.\d\d-1\.\d\d\] .*", lines[1])

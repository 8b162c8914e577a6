"""Parsl in a command: one executor for the whole command (search, walk-back, confirmation), and its logs
(``runinfo``) not left to pile up in ``--workdir``."""

import optuna
import pytest

from iobo.cli import main
from iobo.errors import ConfigError
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC

# a program whose speed a knob sets for sure: every rank writes 1 MB into {workdir}, then pauses (default) or not
PAUSING = "sh -c 'head -c 1000000 /dev/zero > {workdir}/out-$$; sleep {pause}'"


def _interchanges(recorder) -> set[int]:
    """The Parsl interchange processes the test started (one per executor start)."""
    return {pid for pid, (_, command) in recorder.recorded.items() if "interchange" in command}


def test_tune_with_confirm_starts_parsl_once(library, storage, scratch, capsys, no_leftover_processes):
    # 3 default runs and one search trial (seed 1 picks pause=fast): the walk-back and the confirmation then
    # run several batches of trials, which each started their own Parsl executor
    code = main(["tune", "--command", PAUSING, "--knob", "pause=slow:0.3,fast:0", "--objective", "wall",
                 "--params", "cb_buffer_size", "--ranks", "2", "--trials", "4", "--sampler", "random", "--seed", "1",
                 "--no-warmup", "--confirm", "5", "--storage", storage, "--workdir", str(scratch)])
    out, err = capsys.readouterr()
    assert code == 0, err
    study = optuna.load_study(study_name="sh-2ranks", storage=storage)
    roles = [t.user_attrs["role"] for t in study.get_trials()]
    assert "minimize" in roles and "confirm-best" in roles, out  # the phases after the search ran
    no_leftover_processes.sample()
    assert len(_interchanges(no_leftover_processes)) == 1, no_leftover_processes.recorded


def test_parsl_logs_are_removed_after_a_clean_command(storage, scratch, capsys):
    for trials in (4, 5):  # two commands on one workdir: nothing piles up
        code = main(["tune", "vpic", "--ranks", "2", "--trials", str(trials), "--sampler", "random", "--no-warmup",
                     "--confirm", "0", "--option", f"particles={SMALL_VPIC['particles']}",
                     "--option", f"steps={SMALL_VPIC['steps']}", "--storage", storage, "--workdir", str(scratch)])
        assert code == 0, capsys.readouterr().err
        assert not (scratch / "runinfo").exists(), list((scratch / "runinfo").iterdir())


def test_parsl_logs_are_kept_and_named_when_a_command_ends_on_an_error(storage, scratch):
    said = []
    tuner = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="e", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, warmup=False, echo=said.append)
    with pytest.raises(ConfigError, match="repeats must be a positive integer"):
        with tuner:
            tuner.run()
            tuner.confirm(repeats=0)
    kept = scratch / "runinfo" / "000"
    assert (kept / "parsl.log").is_file()
    assert said[-1] == f"the logs of the runner (ParslRunner) of this run are kept in {kept}"

"""``best``, ``export``, ``report`` and ``confirm`` on every kind of study, from another process: a kernel registered
elsewhere (rebuilt from the study, or named as what is missing), a command (rebuilt from the study). Built-in
kernel studies: tests/test_cli.py; a decorated task's: tests/test_decorator.py."""

import argparse
import json
import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from iobo import kernels
from iobo.cli import common
from iobo.errors import ConfigError
from iobo.kernels import KernelSpec, vpic
from iobo.kernels.command import CommandSpec
from iobo.runners.local import LocalRunner
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC

SEARCHED = {"cb_buffer_size": 4 * 1024 * 1024}


def elsewhere(*argv):
    """``iobo ARGV`` in another Python process, whose kernel registry holds only the built-in kernels."""
    done = subprocess.run([sys.executable, "-m", "iobo.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=300)
    return done.returncode, done.stdout, done.stderr


def one_trial(spec_or_name, storage, scratch, space, **kwargs):
    tuner = Tuner(kernel=spec_or_name, ranks=2, storage=storage, study="s", workdir=str(scratch), runner=LocalRunner(),
                  warmup=False, echo=None, **kwargs)
    [trial] = tuner.measure(tuner.open_study(), [({**space.default(), **SEARCHED}, {"role": "search"})])
    assert trial.state == TrialState.COMPLETE, trial.user_attrs.get("fail_reason")
    return tuner.open_study()


def run_args(storage, scratch):
    return argparse.Namespace(storage=storage, workdir=str(scratch), mpiexec=None, timeout=120.0, runner="local",
                              parsl_config=None)


def assert_readable_elsewhere(storage):
    """best, export and report work in a process that never saw the study's kernel or command."""
    code, out, err = elsewhere("best", "--storage", storage)
    assert code == 0, err
    assert "mpiio: cb_buffer_size=4 MiB" in out
    code, out, err = elsewhere("export", "--storage", storage, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["cb_buffer_size"] == SEARCHED["cb_buffer_size"]
    code, out, err = elsewhere("export", "--storage", storage, "--format", "env")
    assert code == 0 and "export IOBO_CB_BUFFER_SIZE=4194304" in out, err
    code, out, err = elsewhere("report", "--storage", storage)
    assert code == 0 and "trials:" in out and "Traceback" not in err, err


def test_a_kernel_registered_in_another_process_is_read_and_rebuilt_from_the_study(storage, scratch):
    spec = KernelSpec(name="myvpic", module="iobo.kernels.vpic", space=vpic.space, workload=vpic.workload,
                      options=dict(vpic.SPEC.options), check_options=vpic.check_options, doc="VPIC-IO, my way")
    with kernels.registered(spec):
        study = one_trial("myvpic", storage, scratch, spec.space(), kernel_options=SMALL_VPIC)
    assert "myvpic" not in kernels.names()
    assert_readable_elsewhere(storage)
    # confirm rebuilds the kernel from the import paths the study recorded, and re-runs it
    assert common.study_spec(study) == spec
    tuner = common.tuner_for(study, run_args(storage, scratch))
    tuner.echo = None
    tuner.confirm(1, minimize=False)
    roles = [t.user_attrs["role"] for t in study.get_trials() if t.state == TrialState.COMPLETE]
    assert roles == ["search", ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST]


def test_a_kernel_that_cannot_be_rebuilt_is_named_in_one_line(storage, scratch):
    def my_space():  # a function in a function: no other process can import it
        return vpic.space()

    spec = KernelSpec(name="local", module="iobo.kernels.vpic", space=my_space, workload=vpic.workload,
                      options=dict(vpic.SPEC.options), check_options=vpic.check_options)
    study = one_trial(spec, storage, scratch, spec.space(), kernel_options=SMALL_VPIC)
    assert study.user_attrs["kernel"] == "local" and study.study_name == "s"
    assert_readable_elsewhere(storage)
    code, out, err = elsewhere("confirm", "--storage", storage, "--runner", "local", "--workdir", scratch)
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("iobo: error: kernel 'local' (registered in another process) "
                                                   "cannot be rebuilt here: ")
    assert "test_a_kernel_that_cannot_be_rebuilt_is_named_in_one_line.<locals>.my_space is defined in a script or " \
           "a function, which another process cannot import" in err
    with pytest.raises(ConfigError, match="cannot be rebuilt here"):
        common.study_spec(study)


def test_a_command_study_is_read_and_rerun_from_the_study_alone(library, programs, storage, scratch):
    spec = CommandSpec(f"{programs['mpiio']} {{workdir}}/d.bin", params=("cb_buffer_size", "romio_cb_write"))
    study = one_trial(spec, storage, scratch, spec.space())
    assert_readable_elsewhere(storage)
    rebuilt = common.study_spec(optuna.load_study(study_name="s", storage=storage))
    assert rebuilt == spec and rebuilt is not spec
    tuner = common.tuner_for(study, run_args(storage, scratch))
    tuner.echo = None
    tuner.confirm(2, minimize=False)
    confirmed = [t for t in study.get_trials() if t.user_attrs["role"] in (ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST)]
    assert [t.state for t in confirmed] == [TrialState.COMPLETE] * 4
    best = [t for t in confirmed if t.user_attrs["role"] == ROLE_CONFIRM_BEST]
    assert all(json.loads(t.user_attrs["stdout_tail"])["hints"]["cb_buffer_size"] == "4194304" for t in best)
    code, out, err = elsewhere("report", "--storage", storage)
    assert code == 0, err
    assert "best, re-measured:" in out and f"kernel:                  command {spec.template} on 2 MPI ranks" in out


@pytest.mark.parametrize("command", ["tune", "minimize", "confirm"])
def test_the_per_trial_limit_help_gives_its_default(command, capsys):
    from iobo.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "per-trial limit in seconds (default: 600)" in " ".join(capsys.readouterr().out.split())

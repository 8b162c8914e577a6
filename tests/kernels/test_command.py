"""CommandSpec: a program iobo did not write, as a kernel. Checked before launch; run on real MPI ranks under the
shim; a program that fails, hangs or prints nothing usable fails its trial and the study goes on."""

import json
import os
import re
import warnings
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from iobo.context import study_context
from iobo.errors import ConfigError, KernelError
from iobo.kernels.command import CommandSpec, Knob, Objective, load_spec
from iobo.report import build_report
from iobo.runners.local import LocalRunner
from iobo.tuner import Tuner

POSIX_BYTES_PER_RANK = 8 * 65536 + 4096  # tests/adapters/programs/posix.c writes and reads this much per rank
RANKS = 2

FILES = Knob("files", (("shared", ""), ("per_process", "-F")))
THREADS = Knob("threads", (("1", "1"), ("4", "4")), env="APP_THREADS")


def test_render_fills_placeholders_appends_fragments_and_sets_environment_knobs(tmp_path):
    spec = CommandSpec("true -o {workdir}/out.h5 -n {ranks} --tag t{trial}", knobs=(FILES, THREADS), cwd=str(tmp_path))
    argv, env = spec.render({"files": "per_process", "threads": "4"}, Path("/dev/shm/a b"), "7", 4)
    assert argv == ["true", "-o", "/dev/shm/a b/out.h5", "-n", "4", "--tag", "t7", "-F"]
    assert env == {"APP_THREADS": "4"}
    assert spec.name == "true" and spec.cwd == str(tmp_path)
    # a knob with a placeholder goes there; an empty environment value unsets the variable
    spec = CommandSpec("true {files} -o x", knobs=(FILES, Knob("mode", (("a", ""), ("b", "x")), env="APP_MODE")))
    assert spec.render({"files": "per_process", "mode": "a"}, Path("/w"), "0", 1) == (["true", "-F", "-o", "x"],
                                                                                     {"APP_MODE": None})
    space = spec.space()
    assert [p.name for p in space.layer("app")] == ["files", "mode"]
    assert space["files"].default == "shared" and space["files"].values == ("shared", "per_process")
    assert "romio_cb_read" in space and "cb_buffer_size" in space  # the shim applies read hints too


def test_production_lines_carry_the_knobs_away_from_their_defaults():
    suffix = Knob("suffix", (("plain", ""), ("tagged", "-tagged")))
    spec = CommandSpec("true {workdir}/a{suffix}.h5", knobs=(FILES, THREADS, suffix))
    values = {**spec.space().default(), "cb_buffer_size": 4 * 1024 * 1024, "files": "per_process",
              "threads": "4", "suffix": "tagged"}
    assert spec.knob_args(values) == (["-F"], {"APP_THREADS": "4"}, {"suffix": "-tagged"})
    assert spec.knob_args(spec.space().default()) == ([], {}, {})
    from iobo.config import IOConfig

    text = spec.env_text(IOConfig(values, spec.space()), "/abs/romio-hints")
    assert text.splitlines() == [
        "export IOBO_CB_BUFFER_SIZE=4194304",
        "export ROMIO_HINTS=/abs/romio-hints",
        "export APP_THREADS=4",
        "# add to the end of the command: -F  (iobo run -- PROGRAM ARGS adds it)",
        "# put '-tagged' where the command template has {suffix}: true {workdir}/a{suffix}.h5",
    ]


def test_knob_and_objective_parse_the_command_line_forms():
    assert Knob.parse("files=shared:,per_process:-F") == FILES
    assert Knob.parse("block=1m,4m") == Knob("block", (("1m", "1m"), ("4m", "4m")))
    assert Knob.parse("APP_THREADS=1,4", env=True) == Knob("APP_THREADS", (("1", "1"), ("4", "4")), env="APP_THREADS")
    assert Objective.parse("regex:Max Write: ([0-9.]+)", "MiB/s") == Objective("regex", "Max Write: ([0-9.]+)",
                                                                               "MiB/s")
    assert Objective.parse("json:results.write.0") == Objective("json", "results.write.0")


@pytest.mark.parametrize("make, message", [
    (lambda: CommandSpec(""), "the command template is empty"),
    (lambda: CommandSpec("   "), "the command template is empty"),
    (lambda: CommandSpec("true {out}"), "uses {out}, which is not a placeholder; allowed: {ranks}, {trial}, {workdir}"),
    (lambda: CommandSpec("true {files}", knobs=(Knob("files", (("a", ""), ("b", "-F")), env="FILES"),)),
     "uses {files}, which is not a placeholder (files set environment variables)"),
    (lambda: CommandSpec("true {0}"), "the command template's {0} is not a placeholder"),
    (lambda: CommandSpec("true {workdir:>5}"), "the command template's {workdir:>5} is not a placeholder"),
    (lambda: CommandSpec("true }"), "is malformed (Single '}' encountered in format string)"),
    (lambda: CommandSpec("true 'unbalanced"), "cannot be split into words (No closing quotation)"),
    (lambda: CommandSpec("mpiexec -n 4 ./app"), "starts with the MPI launcher 'mpiexec'"),
    (lambda: CommandSpec("env A=1 -u B srun ./app"), "starts with the MPI launcher 'srun'"),
    (lambda: CommandSpec("true", params=("cb_buffer_size", "stripe")), "(unknown: ['stripe'])"),
    (lambda: CommandSpec("true", knobs=(FILES, FILES)), "repeated or taken: ['files']"),
    (lambda: CommandSpec("true", knobs=(Knob("layout", (("a", ""), ("b", "x"))),)), "repeated or taken: ['layout']"),
    (lambda: Knob("files", (("shared", ""),)), "needs at least two different values; got ['shared']"),
    (lambda: Knob("files", (("a", ""), ("a", "-F"))), "needs at least two different values"),
    (lambda: Knob("ranks", (("a", ""), ("b", "-F"))), "taken by a placeholder"),
    (lambda: Knob("my-knob", (("a", ""), ("b", "-F"))), "must be an identifier"),
    (lambda: Knob("x", (("a", "{workdir}"), ("b", ""))), "fragments are literal text"),
    (lambda: Knob("p", (("a", "1"), ("b", "2")), env="LD_PRELOAD"), "not IOBO_* nor LD_PRELOAD or ROMIO_HINTS"),
    (lambda: Knob.parse("files"), "a knob is written NAME=VALUE:FRAGMENT,VALUE:FRAGMENT...; got 'files'"),
    (lambda: Objective.parse("bandwidth"), "objective 'bandwidth' is unknown"),
    (lambda: Objective.parse("regex:(a)(b)"), "has 2 groups; allowed: at most one"),
    (lambda: Objective.parse("regex:("), "does not compile"),
    (lambda: Objective.parse("json:"), "a json objective needs a path"),
    (lambda: Objective.parse("shim:x"), "objective 'shim' takes no argument"),
    (lambda: Objective("regex", "x", "MB/min"), "objective unit 'MB/min' is unknown"),
])
def test_bad_specs_are_refused_with_the_rule_and_the_fix(make, message):
    with pytest.raises(ConfigError) as caught:
        make()
    assert message in str(caught.value)


def test_a_missing_program_is_refused_before_any_job(library, storage, scratch, tmp_path):
    spec = CommandSpec("./no-such-app {workdir}/x", cwd=str(tmp_path))
    with pytest.raises(ConfigError, match=rf"the program './no-such-app' of the command is not an executable file "
                                          rf"\(looked in {tmp_path}\)"):
        Tuner(kernel=spec, storage=storage, workdir=str(scratch), runner=LocalRunner(), echo=None)
    assert optuna.get_all_study_names(storage) == [] and list(scratch.iterdir()) == []
    behind_env = CommandSpec("env HDF5_PARAPREFIX={workdir} ./no-such-app", cwd=str(tmp_path))
    assert behind_env.name == "no-such-app"  # the program env runs names the study, not env
    with pytest.raises(ConfigError, match=r"the program './no-such-app' of the command is not an executable file"):
        Tuner(kernel=behind_env, storage=storage, workdir=str(scratch), runner=LocalRunner(), echo=None)
    with pytest.raises(ConfigError, match="a command takes no option \\['particles'\\], only keep=true"):
        Tuner(kernel=CommandSpec("true"), kernel_options={"particles": 1}, storage=storage, workdir=str(scratch))
    with pytest.raises(ConfigError, match="pruner='median' needs per-step bandwidths, which a command does not print"):
        Tuner(kernel=CommandSpec("true"), pruner="median", storage=storage, workdir=str(scratch))


def test_objectives_read_what_the_program_printed(tmp_path):
    lines = ["starting\n", "write: 100.0 MiB/s\n", '{"results": {"write": [250.5, 3]}}\n', "write: 200.0 MiB/s\n"]
    report = {"bytes_written": 4_000_000, "bytes_read": 0, "io_seconds": 0.25, "phase_seconds": 0.5}
    # the last match wins, converted to MB/s; bytes and seconds are the shim's
    assert Objective("regex", r"write: ([0-9.]+) MiB/s", "MiB/s").measure(lines, report, "", tmp_path, 2.0) == (
        pytest.approx(200.0 * 1.048576), 4_000_000, 0.5)
    assert Objective("json", "results.write.0").measure(lines, None, "no report", tmp_path, 2.0) == (250.5, 0, 0.0)
    assert Objective().measure(lines, report, "", tmp_path, 2.0) == (8.0, 4_000_000, 0.5)
    (tmp_path / "out.0").write_bytes(b"x" * 3_000_000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "out.1").write_bytes(b"x" * 1_000_000)
    assert Objective("wall").measure(lines, None, "", tmp_path, 2.0) == (2.0, 4_000_000, 2.0)
    for objective, reason in [
        (Objective("regex", r"read: ([0-9.]+)"), "has no match for the objective regex 'read: ([0-9.]+)'"),
        (Objective("regex", r"write: (\S+) MiB/s"), None),  # matches "200.0": fine
        (Objective("regex", r"(starting)"), "matched 'starting', not a number"),
        (Objective("json", "results.read"), "no JSON line on the program's stdout has a number at 'results.read'"),
        (Objective(), "no I/O accounting: no report"),
    ]:
        if reason is None:
            objective.measure(lines, None, "no report", tmp_path, 2.0)
            continue
        with pytest.raises(KernelError) as caught:
            objective.measure(lines, None, "no report", tmp_path, 2.0)
        assert reason in caught.value.reason
    with pytest.raises(KernelError, match="the shim saw no I/O by the program .*; its output ends: "
                                          "'write: 200.0 MiB/s'$"):
        Objective().measure(lines, {**report, "bytes_written": 0}, "", tmp_path, 2.0)
    with pytest.raises(KernelError, match="; it printed nothing$"):
        Objective().measure(["\n"], {**report, "bytes_written": 0}, "", tmp_path, 2.0)
    with pytest.raises(KernelError, match="the program left no file in {workdir}"):
        Objective("wall").measure(lines, None, "", tmp_path / "sub" / "empty", 2.0)


def test_spec_file_and_study_attr_give_the_same_spec(tmp_path):
    (tmp_path / "app.toml").write_text('''
command = "./app -o {workdir}/out.h5 {files}"
params = ["cb_buffer_size", "layout", "chunk_size"]
objective = { regex = "Write: ([0-9.]+)", unit = "MiB/s" }

[knobs.files]
fragments = { shared = "", per_process = "-F" }

[knobs.threads]
env = "APP_THREADS"
values = [1, 4]
''')
    spec = load_spec(tmp_path / "app.toml")
    assert spec == CommandSpec("./app -o {workdir}/out.h5 {files}", (FILES, THREADS),
                               Objective("regex", "Write: ([0-9.]+)", "MiB/s"),
                               ("cb_buffer_size", "layout", "chunk_size"), cwd=str(tmp_path))
    assert spec.name == "app"
    assert CommandSpec.from_attr(json.loads(json.dumps(spec.to_attr()))) == spec  # through the study's JSON
    (tmp_path / "app.json").write_text(json.dumps({"command": "./app", "objective": "wall",
                                                   "knobs": {"files": {"fragments": {"a": "", "b": "-F"}}}}))
    assert load_spec(tmp_path / "app.json", params=["layout"]).params == ("layout",)
    (tmp_path / "bad.toml").write_text('command = "./app"\n[knobs.files]\nvalues = ["a", "b"]\n')
    with pytest.raises(ConfigError, match="knob 'files' in .*bad.toml needs either `fragments"):
        load_spec(tmp_path / "bad.toml")
    (tmp_path / "typo.toml").write_text('comand = "./app"\n')
    with pytest.raises(ConfigError, match="needs `command`.*got keys \\['comand'\\]"):
        load_spec(tmp_path / "typo.toml")


def _tuner(spec, storage, scratch, **kwargs):
    return Tuner(kernel=spec, ranks=RANKS, storage=storage, study="s", workdir=str(scratch), runner=LocalRunner(),
                 sampler=optuna.samplers.RandomSampler(seed=0), warmup=False, echo=None, **kwargs)


def test_a_failing_hanging_or_unmeasurable_program_fails_its_trial_and_the_study_goes_on(library, programs, storage,
                                                                                        scratch):
    says_why = ("echo starting; echo ERROR: block size must be a multiple of transfer size; "
                "echo HDF5-DIAG: Error detected in HDF5 >&2; echo \"    minor: Some MPI function failed\" >&2; exit 255;")
    behaviour = Knob("behaviour", (("ok", ""), ("fail", "echo cannot open >&2; exit 3;"), ("hang", "sleep 60;"),
                                   ("says_why", says_why)))
    spec = CommandSpec(f"sh -c '{{behaviour}} exec {programs['posix']} {{workdir}}/e'", knobs=(behaviour,))
    tuner = _tuner(spec, storage, scratch, timeout_s=5)
    study = tuner.open_study()
    default = spec.space().default()
    runs = [({**default, "behaviour": b}, {"role": "search"}) for b in ("fail", "hang", "ok", "says_why")]
    failed, hung, ok, said = tuner.measure(study, runs)

    assert failed.state == TrialState.FAIL
    assert failed.user_attrs["fail_reason"] == "command 'sh' exited with code 3; the program said: cannot open"
    # the program's own error, printed on stdout (as IOR does), over HDF5's error stack on stderr; stdout is kept
    assert said.state == TrialState.FAIL
    assert said.user_attrs["fail_reason"] == (
        "command 'sh' exited with code 255; the program said: ERROR: block size must be a multiple of transfer size")
    assert "starting" in said.user_attrs["stdout_tail"] and "minor:" in said.user_attrs["stderr_tail"]
    assert hung.state == TrialState.FAIL
    assert hung.user_attrs["fail_reason"] == "command 'sh' timed out after 5 s and was killed"
    assert ok.state == TrialState.COMPLETE  # the study went on
    # the value is the shim's: the bytes the program says it moved, over the slowest rank's seconds in I/O
    printed = json.loads(ok.user_attrs["stdout_tail"])
    assert ok.user_attrs["bytes"] == 2 * printed["bytes_written"] == 2 * RANKS * POSIX_BYTES_PER_RANK
    assert ok.value == pytest.approx(ok.user_attrs["bytes"] / ok.user_attrs["seconds"] / 1e6)
    io = ok.user_attrs["io"]
    assert io["level"] == "posix" and io["ranks"] == RANKS and io["phase_seconds"] == ok.user_attrs["seconds"] > 0
    assert list(scratch.iterdir()) == []  # trial directories removed (no keep)


def test_an_objective_that_finds_nothing_fails_the_trial(library, programs, storage, scratch):
    spec = CommandSpec(f"{programs['posix']} {{workdir}}/e", objective=Objective("regex", r"bandwidth: ([0-9.]+)"))
    tuner = _tuner(spec, storage, scratch)
    [trial] = tuner.measure(tuner.open_study(), [(spec.space().default(), {"role": "search"})])
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["fail_reason"].startswith("the program's output has no match for the objective regex "
                                                      "'bandwidth: ([0-9.]+)'; its output ends: '{\"bytes_written\":")


def test_the_wall_objective_counts_the_files_left_in_workdir(library, programs, storage, scratch):
    spec = CommandSpec(f"{programs['posix']} {{workdir}}/e", objective=Objective("wall"))
    tuner = _tuner(spec, storage, scratch, kernel_options={"keep": True})
    [trial] = tuner.measure(tuner.open_study(), [(spec.space().default(), {"role": "search"})])
    assert trial.state == TrialState.COMPLETE
    left = sorted(Path(trial.user_attrs["workdir"], "work").iterdir())
    assert [p.name for p in left] == ["e.0", "e.1"]
    assert trial.user_attrs["bytes"] == sum(os.path.getsize(p) for p in left) == RANKS * POSIX_BYTES_PER_RANK
    assert trial.value == pytest.approx(trial.user_attrs["bytes"] / trial.user_attrs["wall_seconds"] / 1e6, rel=0.05)
    assert sorted(p.name for p in Path(trial.user_attrs["workdir"], "report").iterdir()) == ["io.0.json", "io.1.json"]


def test_a_command_study_records_its_context_as_the_command(library, programs, storage, scratch):
    spec = CommandSpec(f"{programs['posix']} {{workdir}}/e")
    tuner = _tuner(spec, storage, scratch, trials=4)
    study = tuner.run()
    context = study_context(study)
    assert (context.command, context.kernel) == (spec.template, None)
    assert context.bytes_per_rank == 2 * POSIX_BYTES_PER_RANK and context.fs_type  # written, then read back
    assert context.describe().startswith(f"{spec.template} on {RANKS} rank(s) (1 node(s)), ")
    assert re.search(rf"^context: +{re.escape(context.describe())}$", build_report(study).text(), re.M)


def test_a_default_that_never_runs_stops_the_search_after_its_runs(library, storage, scratch):
    """A program that exits 0 without I/O (here: one that needs another rank count and says so): the three default
    runs fail with what it printed, and the search stops there instead of failing every trial of the budget."""
    said = []
    spec = CommandSpec("sh -c 'echo this example needs 4 processes; echo Quitting...'")
    tuner = _tuner(spec, storage, scratch, trials=10)
    tuner.echo = said.append
    study = tuner.run()
    done = study.get_trials()
    assert len(done) == tuner.default_repeats == 3 and all(t.state == TrialState.FAIL for t in done)
    assert done[-1].user_attrs["fail_reason"].endswith("; its output ends: 'Quitting...'")
    assert any(line.startswith("the system default failed in all 3 of its runs, so there is no baseline: the search "
                               "stops here") for line in said)


def test_the_file_system_is_where_the_program_wrote_and_a_command_without_workdir_is_warned(
        library, programs, storage, scratch, tmp_path):
    """The program writes to tmpfs (an absolute path of its own) while --workdir is on the root disk: the trial's
    file system is the one the shim saw the HDF5 file opened on, not --workdir's; the command has no {workdir}, so
    its trials overwrite one file: iobo says so before any job runs."""
    from iobo.errors import IoboWarning
    from iobo.stack import filesystem_type

    assert filesystem_type(tmp_path) != "tmpfs" == filesystem_type(scratch)
    spec = CommandSpec(f"{programs['hdf5_18']} {scratch / 'fixed.h5'}")
    with pytest.warns(IoboWarning, match=r"has no \{workdir\}: every trial writes where the program chooses"):
        tuner = Tuner(kernel=spec, ranks=RANKS, storage=storage, study="fs", workdir=str(tmp_path / "work"),
                      runner=LocalRunner(), warmup=False, echo=None)
    [trial] = tuner.measure(tuner.open_study(), [(spec.space().default(), {"role": "default"})])
    assert trial.user_attrs["fs_type"] == "tmpfs"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CommandSpec(f"{programs['hdf5_18']} {{workdir}}/out.h5").check()  # with {workdir}: nothing to say

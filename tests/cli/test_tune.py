"""``iobo tune --command`` on real compiled programs (tests/adapters/programs/), checked against evidence iobo
does not produce: what the program prints of what HDF5 and MPI-IO tell it (its access list, MPI_File_get_info,
the I/O mode on its transfer list, the bytes it moved), and ``h5dump -p``/``h5ls -va`` on the files it left."""

import json
import math
import re
import subprocess
import os
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from iobo.cli import main
from iobo.space import MiB
from iobo.trials import stored_space

from support.programs import h5dump_layouts, h5ls_addresses

RANKS = 2
HINTS = ("cb_buffer_size", "romio_cb_write", "romio_cb_read", "romio_ds_read", "cb_nodes")
HDF5_SETTINGS = ("alignment_threshold", "alignment_interval", "layout", "chunk_size", "transfer_mode")
COLLECTIVE_MODES = {2, 4}  # H5D_MPIO_CHUNK_COLLECTIVE, H5D_MPIO_CONTIGUOUS_COLLECTIVE

# program -> (the file argument, the parameters tuned)
CASES = {
    "hdf5_18": ("a.h5",
                "cb_buffer_size,romio_cb_write,cb_nodes,alignment_threshold,alignment_interval,layout,chunk_size"),
    "hdf5_16": ("b.h5", "layout,chunk_size,transfer_mode"),  # it prints no hints: HDF5 settings only
    "hdf5_18_static": ("c.h5", "alignment_interval,layout,cb_buffer_size,romio_cb_write"),
    "mpiio": ("d.bin", "cb_buffer_size,romio_cb_write,romio_cb_read,romio_ds_read,cb_nodes"),
    "posix": ("e", "cb_buffer_size,alignment_interval,layout"),
}


def tune(capsys, *argv):
    """``iobo tune`` without the confirmation unless asked for (these tests look at the search trials)."""
    argv = [str(a) for a in argv]
    code = main(argv + ([] if "--confirm" in argv else ["--confirm", "0"]))
    out, err = capsys.readouterr()
    return code, out, err


def printed(trial) -> dict:
    """The JSON line the program printed (rank 0)."""
    lines = [line for line in trial.user_attrs["stdout_tail"].splitlines() if line.startswith("{")]
    assert len(lines) == 1, trial.user_attrs["stdout_tail"]
    return json.loads(lines[0])


def changed(trial, space) -> dict:
    return {k: v for k, v in trial.user_attrs["config"].items() if v != space[k].default}


@pytest.mark.parametrize("program", list(CASES))
def test_tune_a_compiled_program_and_check_what_each_trial_says_took_effect(program, library, programs, hdf5_tools,
                                                                           capsys, storage, scratch):
    target, params = CASES[program]
    code, out, err = tune(capsys, "tune", "--command", f"{programs[program]} {{workdir}}/{target}",
                          "--params", params, "--ranks", RANKS, "--trials", 6, "--runner", "local", "--sampler",
                          "random", "--seed", 3, "--keep", "--storage", storage, "--workdir", scratch)
    assert code == 0, err
    assert out.count("[default]") == 3 and "command " in out
    study = optuna.load_study(study_name=f"{program}-{RANKS}ranks", storage=storage)
    assert study.user_attrs["command"]["template"] == f"{programs[program]} {{workdir}}/{target}"
    space = stored_space(study)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 6, [t.user_attrs.get("fail_reason") for t in trials]
    checked = 0
    frozen = study.user_attrs.get("frozen", {})
    if program in ("posix", "mpiio", "hdf5_18_static"):
        # the default runs showed no HDF5 call reaching the shim (and, for posix, no MPI-IO file): what the shim
        # could not set is frozen at its default before the search (iobo.stack.inert_knobs), never proposed
        inert = set(params.split(",")) if program == "posix" else set(params.split(",")) & set(HDF5_SETTINGS)
        assert set(frozen) == inert, frozen
        assert not any(set(t.params) & inert for t in trials)
        checked += len(inert)
    for trial in trials:
        attrs, seen = trial.user_attrs, printed(trial)
        values, not_applied = changed(trial, space), attrs["not_applied"]
        path = Path(attrs["workdir"], "work", target)
        # the value is the shim's accounting, the bytes the ones the program counted itself
        level = attrs["io"]["level"]
        expected_bytes = seen["bytes_written"] + seen["bytes_read"]
        if program == "hdf5_18_static":  # the top level seen is MPI-IO: HDF5's own metadata writes come on top
            assert level == "mpiio" and expected_bytes <= attrs["bytes"] < expected_bytes + 64 * 1024
        elif program == "posix":
            assert level == "posix" and attrs["bytes"] == expected_bytes
        else:
            assert attrs["bytes"] == expected_bytes
        assert trial.value == pytest.approx(attrs["bytes"] / attrs["seconds"] / 1e6)

        # every MPI-IO hint the trial says took effect is what MPI_File_get_info told the program, and one it
        # says did not is not
        for hint in set(values) & set(HINTS):
            if program == "posix":
                assert hint in not_applied
                continue
            shown = seen["hints"].get(hint)
            if hint in not_applied:
                assert shown != str(values[hint]), (hint, shown, not_applied[hint])
            else:
                assert shown == str(values[hint]), (hint, shown)
                checked += 1
        if program in ("posix", "mpiio", "hdf5_18_static"):
            # no HDF5 call reached the shim: every HDF5 setting asked for is reported not applied
            for name in set(values) & set(HDF5_SETTINGS):
                assert name in not_applied, (name, not_applied)
                checked += 1
        if program == "hdf5_18_static":
            assert seen["alignment"] == [1, 4096]  # the program's own, untouched
            assert set(h5dump_layouts(path).values()) == {("contiguous", None)}
            if set(values) & set(HDF5_SETTINGS):
                assert any("linked statically" in w for w in attrs["shim_warnings"]), attrs["shim_warnings"]
        if program == "posix":
            assert [os.path.getsize(f"{path}.{rank}") for rank in range(RANKS)] == [seen["bytes_written"] // RANKS] * 2

        if program in ("hdf5_18", "hdf5_16"):
            assert not set(values) & set(HDF5_SETTINGS) & set(not_applied), not_applied
            layouts = h5dump_layouts(path)
            if values.get("layout") == "chunked":
                chunk = trial.user_attrs["config"]["chunk_size"]
                for name, (layout, dims) in layouts.items():
                    assert layout == "chunked" and math.prod(dims) * 4 <= chunk, (name, dims, chunk)
                    assert attrs["effective"][f"dataset /{'g/' if program == 'hdf5_16' else ''}{name}"] \
                        == f"chunked {list(dims)}"
                checked += 1
            else:
                assert set(layouts.values()) == {("contiguous", None)}
        if program == "hdf5_18":
            # what iobo changed is in effect; what it left at the default stays the program's own (1 and 4096)
            own = {"alignment_threshold": 1, "alignment_interval": 4096}
            assert seen["alignment"] == [values.get(name, own[name]) for name in own]
            assert [attrs["effective"][name] for name in own] == seen["alignment"]
            checked += bool(set(own) & set(values))
            threshold, interval = seen["alignment"]
            if values.get("layout") != "chunked" and RANKS * MiB >= threshold:  # each dataset: 1 MiB per rank
                addresses = h5ls_addresses(path)
                assert len(addresses) == 3 and all(a % interval == 0 for a in addresses.values()), addresses
        if program == "hdf5_16":
            collective = values.get("transfer_mode") == "collective"
            assert all((mode in COLLECTIVE_MODES) == collective for mode in seen["actual_io_modes"]), seen
            checked += collective
    assert checked >= 2, "the search trials changed nothing the test can check: pick another seed"


def test_a_knob_whose_value_breaks_the_program_fails_those_trials_and_the_study_goes_on(library, programs, capsys,
                                                                                      storage, scratch):
    code, out, err = tune(capsys, "tune", "--command", f"{programs['hdf5_18']} {{workdir}}/a.h5 {{extra}}",
                          "--knob", "extra=none:,bad:--oops", "--params", "cb_buffer_size", "--trials", 8,
                          "--runner", "local", "--sampler", "random", "--storage", storage, "--workdir", scratch)
    assert code == 0, err
    study = optuna.load_study(study_name="hdf5_18-2ranks", storage=storage)
    trials = study.get_trials()
    bad = [t for t in trials if t.user_attrs["config"]["extra"] == "bad"]
    good = [t for t in trials if t.user_attrs["config"]["extra"] == "none"]
    assert bad and len(good) > 3
    assert all(t.state == TrialState.FAIL for t in bad)
    # MPI_Abort(2) on both ranks; mpiexec may report another code, or lose a rank's last lines, when it kills the job
    # the reason quotes the program's own words (its CHECK line), never MPICH's abort banner; mpiexec may report
    # another code, or lose or interleave a rank's last lines, when it kills the job
    reasons = [t.user_attrs["fail_reason"] for t in bad]
    assert all(re.match(r"command 'hdf5_18' exited with code [1-9]\d*", r) and "Abort(" not in r for r in reasons), \
        reasons
    assert any(re.search(r"; the program said: \S*hdf5_18.c:\d+: usage: hdf5_18 FILE failed", r) for r in reasons), \
        reasons
    assert any("usage: hdf5_18 FILE" in t.user_attrs["stderr_tail"] for t in bad)
    assert all(t.state == TrialState.COMPLETE for t in good)
    assert "FAILED: command 'hdf5_18' exited with code" in out and "speedup" in out
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["--command", ""], "the command template is empty"),
    (["--command", "true {outdir}/x"], "uses {outdir}, which is not a placeholder"),
    (["--command", "mpiexec -n 2 true"], "starts with the MPI launcher"),
    (["--command", "./nowhere {workdir}/x"], "the program './nowhere' of the command is not an executable file"),
    (["--command", "true", "--knob", "files"], "a knob is written NAME=VALUE:FRAGMENT"),
    (["--command", "true", "--objective", "regex:(("], "does not compile"),
    (["--command", "true", "--params", "cb_buffer_size,nope"], "(unknown: ['nope'])"),
    (["--command", "true", "--option", "particles=4"], "--option is for kernels"),
    (["vpic", "--command", "true"], "tune takes one of KERNEL, --command, --spec or --trace; got KERNEL, --command"),
    (["vpic", "--knob", "a=b:c,d:e"], "--knob apply to --command or --spec, not to a kernel"),
    ([], "tune takes one of KERNEL, --command, --spec or --trace; got none"),
    (["--spec", "missing.toml"], "the command spec missing.toml must be a readable TOML or JSON file"),
])
def test_bad_command_specs_exit_2_before_any_job(library, capsys, storage, scratch, argv, message):
    code, out, err = tune(capsys, "tune", *argv, "--storage", storage, "--workdir", scratch, "--runner", "local")
    assert code == 2 and message in err and "Traceback" not in err
    assert optuna.get_all_study_names(storage) == [] and list(scratch.iterdir()) == []


@pytest.fixture(scope="module")
def write_only(tmp_path_factory):
    """tests/support/write_only.c compiled: MPI-IO writes, no read, no HDF5 (as IOR -w -a MPIIO)."""
    out = tmp_path_factory.mktemp("write_only") / "write_only"
    source = Path(__file__).parents[1] / "support" / "write_only.c"
    build = subprocess.run(["mpicc.mpich", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return out


NEVER_READS = "the program never reads through MPI-IO"
NO_HDF5 = "the program opens no HDF5 file"


@pytest.mark.parametrize("program, inert", [
    ("write_only", {"romio_cb_read": NEVER_READS, "romio_ds_read": NEVER_READS, "alignment_threshold": NO_HDF5,
                    "layout": NO_HDF5}),
    ("mpiio", {"alignment_threshold": NO_HDF5, "layout": NO_HDF5}),  # it reads back: its read hints are searched
])
def test_knobs_the_default_runs_give_no_call_to_act_on_are_frozen_before_the_search(program, inert, library, programs,
                                                                                   write_only, capsys, storage,
                                                                                   scratch):
    """Under the shim, the default runs show which calls the program makes; a knob with none to act on (read hints
    of a program that never reads, HDF5 settings of one without HDF5) is frozen at its default before the first
    search trial, with the reason printed, so it is never proposed, ranked or exported."""
    executable = write_only if program == "write_only" else programs[program]
    params = "romio_cb_read,romio_ds_read,cb_buffer_size,romio_cb_write,alignment_threshold,layout"
    code, out, err = tune(capsys, "tune", "--command", f"{executable} {{workdir}}/f.bin", "--params", params,
                          "--ranks", RANKS, "--trials", 9, "--runner", "local", "--sampler", "random", "--seed", 2,
                          "--storage", storage, "--workdir", scratch)
    assert code == 0, err
    name = f"{program}-{RANKS}ranks"
    study = optuna.load_study(study_name=name, storage=storage)
    assert study.user_attrs["frozen"] == inert
    reads = [k for k, reason in inert.items() if reason == NEVER_READS]
    if reads:
        line = f"frozen at their defaults: {', '.join(reads)} ({NEVER_READS})"
        assert line in out and out.index(line) < out.index("[search]"), out
    assert f"frozen at their defaults: alignment_threshold, layout ({NO_HDF5})" in out
    search = [t for t in study.get_trials() if t.user_attrs["role"] == "search"]
    assert len(search) == 6 and all(t.state == TrialState.COMPLETE for t in search)
    space = stored_space(study)
    for trial in search:  # never proposed: not among the trial's parameters, at its default in what ran
        assert not set(trial.params) & set(inert), trial.params
        assert not set(changed(trial, space)) & set(inert)
    assert any(set(changed(t, space)) - set(inert) for t in search)  # the other knobs were searched
    for full in ([], ["--full"]):
        assert main(["export", "--storage", storage, "--study", name, "--format", "json", *full]) == 0
        exported, _ = capsys.readouterr()
        exported = json.loads(exported)
        assert not {k for k in inert if exported.get(k, space[k].default) != space[k].default}, exported


def test_transfer_mode_is_frozen_when_the_program_writes_collectively_itself(library, programs, capsys, storage,
                                                                            scratch):
    """A program that asks for collective transfers itself (IOR -c): the shim only turns independent transfers
    collective, so transfer_mode has nothing to change; the default runs show it (HDF5 reports the modes) and it is
    frozen before the search, never proposed (with IOR -c, searches used to vary it among identical runs)."""
    command = f"{programs['checkpoint']} {{workdir}}/ck 1 1 2 1 collective"
    code, out, err = tune(capsys, "tune", "--command", command, "--params", "transfer_mode,cb_buffer_size",
                          "--ranks", RANKS, "--trials", 6, "--runner", "local", "--sampler", "random", "--seed", 1,
                          "--storage", storage, "--workdir", scratch, "--confirm", 0)
    assert code == 0, err
    study = optuna.load_study(study_name=f"checkpoint-{RANKS}ranks", storage=storage)
    reason = "the program's writes are collective already (HDF5 reports it)"
    assert study.user_attrs["frozen"]["transfer_mode"].startswith(reason)
    assert out.index("frozen at their defaults: transfer_mode") < out.index("[search]")
    search = [t for t in study.get_trials() if t.user_attrs["role"] == "search"]
    assert search and all("transfer_mode" not in t.params for t in search)

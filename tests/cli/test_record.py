"""iobo record and iobo tune --trace on a real program: the checkpoint C program (parallel HDF5, computation between
checkpoints) recorded on 2 MPI ranks under the shim, its trace tuned as a kernel through Parsl with a real SQLite
study."""

import json

import optuna
import pytest

from iobo.cli import main
from iobo.replay import Trace

RANKS = 2
MIB, SLABS = 1, 4


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def record(capsys, programs, scratch, checkpoints, *extra):
    return cli(capsys, "record", "--ranks", RANKS, *extra, "--", programs["checkpoint"], scratch / "out" / "ck",
               checkpoints, MIB, SLABS, 1, "collective")


@pytest.fixture
def here(scratch, monkeypatch):
    """The program's directory: iobo record runs it in the current directory."""
    (scratch / "out").mkdir()
    monkeypatch.chdir(scratch)
    return scratch


def test_record_saves_the_trace_with_the_program_and_its_signature(library, programs, here, capsys):
    """The default <program>.trace.json here: loads, 2 ranks, the command line, cwd and the shim's signature of the
    program (its HDF5 bytes), and the summary names the fold, the I/O vs wall time and what is not recorded."""
    code, out, err = record(capsys, programs, here, 3)
    assert code == 0, err
    path = here / "checkpoint.trace.json"
    trace = Trace.load(path)
    meta = trace.metadata
    assert trace.ranks == meta["ranks"] == RANKS and trace.repeats(0) == [3]
    assert meta["command"][0] == str(programs["checkpoint"]) and meta["cwd"] == str(here)
    assert meta["signature"]["levels"]["hdf5"]["write"]["bytes"] == 3 * MIB * 2 ** 20 * RANKS
    assert meta["signature"]["datasets"] == {"/temperature": {"layout": "contiguous", "chunk": []}}
    assert 0 < meta["io_s"] < meta["wall_s"]
    assert f"ranks: {RANKS}, events recorded: " in out and "3 x a block of" in out
    assert f"({path.stat().st_size:,} bytes)" in out and "s in I/O (slowest rank) of" in out
    assert "  - stdio (fwrite, fread, fprintf to files) is not recorded" in out


def test_a_longer_run_gives_a_trace_of_the_same_size(library, programs, here, capsys):
    """10 checkpoints fold like 2: the saved traces differ by a small constant, not by 5x."""
    sizes = {}
    for checkpoints in (2, 10):
        code, _, err = record(capsys, programs, here, checkpoints, "--out", here / f"t{checkpoints}.json")
        assert code == 0, err
        assert Trace.load(here / f"t{checkpoints}.json").repeats(0) == [checkpoints]
        sizes[checkpoints] = (here / f"t{checkpoints}.json").stat().st_size
    assert abs(sizes[10] - sizes[2]) < 600, sizes


def test_a_failing_program_exits_with_its_error_and_writes_no_trace(library, programs, here, capsys):
    """0 checkpoints: the program refuses its arguments; iobo record says so, exits non-zero, saves nothing."""
    code, out, err = record(capsys, programs, here, 0)
    assert code != 0
    assert "exited with code" in err and "arguments" in err
    assert not (here / "checkpoint.trace.json").exists() and "trace:" not in out


def test_an_mpi_launcher_in_the_command_is_refused(library, programs, here, capsys):
    code, _, err = cli(capsys, "record", "--ranks", RANKS, "--", "mpiexec.mpich", "-n", 2, programs["checkpoint"],
                       "out/ck")
    assert code == 2 and "starts with the MPI launcher 'mpiexec.mpich'" in err
    assert not list(here.glob("*.trace.json"))


def test_tune_trace_tunes_the_kernel_under_the_shim(library, programs, here, capsys, tmp_path):
    """iobo tune --trace: 6 completed trials of <program>-kernel whose shim reports show the replay's HDF5 writes,
    the program's bytes per run; a warning that the trace was never checked; --ranks 3 refused before any job."""
    code, _, err = record(capsys, programs, here, 3)
    assert code == 0, err
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    code, out, err = cli(capsys, "tune", "--trace", "checkpoint.trace.json", "--ranks", RANKS, "--trials", 6,
                         "--confirm", 0, "--storage", storage, "--workdir", here / "trials", "--seed", 1)
    assert code == 0, err
    assert "iobo: warning: the kernel of checkpoint.trace.json may not do its program's I/O: it has never been " \
           "checked" in err
    study = optuna.load_study(study_name="checkpoint-kernel-2ranks", storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 6, [(t.state, t.user_attrs.get("fail_reason")) for t in study.trials]
    program_bytes = 3 * MIB * 2 ** 20 * RANKS
    for trial in done:
        io = trial.user_attrs["io"]
        assert (io["level"], io["bytes_written"]) == ("hdf5", program_bytes)
        assert io["levels"]["hdf5"]["write"]["calls"] == 3 * SLABS * RANKS
        assert "-m iobo.replay.run" in trial.user_attrs["command"]
    assert "study 'checkpoint-kernel-2ranks'" in out

    code, _, err = cli(capsys, "tune", "--trace", "checkpoint.trace.json", "--ranks", 3, "--storage", storage,
                       "--workdir", here / "trials3")
    assert code == 2
    assert "recorded on 2 ranks" in err and "got --ranks 3" in err and "record again with --ranks 3" in err
    assert not (here / "trials3").exists() or not any((here / "trials3").iterdir())


def test_tune_trace_refuses_a_missing_or_malformed_trace(here, capsys, tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    code, _, err = cli(capsys, "tune", "--trace", here / "none.json", "--storage", storage)
    assert code == 2 and "none.json must be a JSON file saved by Trace.save" in err
    (here / "bad.json").write_text(json.dumps({"format": "iobo-replay-trace", "version": 1, "ranks": 2}))
    code, _, err = cli(capsys, "tune", "--trace", here / "bad.json", "--storage", storage)
    assert code == 2 and "bad.json is damaged" in err

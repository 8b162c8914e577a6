"""A Python program that uses h5py, recorded and replayed: h5py closes files and datasets with H5Idec_ref and
opens datasets by path with H5Oopen, not H5Fclose/H5Dclose/H5Dopen2. The shim takes the last H5Idec_ref of a file
or dataset as its close and H5Oopen of a dataset as its open, so the trace holds them, the replay closes the
checkpoint before reopening it, and the kernel's signature matches the program's (iobo check's thresholds)."""

import json
import sys
import textwrap

import pytest

from iobo.cli import main
from iobo.replay import Trace
from iobo.replay.check import failures

RANKS = 2
PROGRAM = textwrap.dedent('''
    import sys
    import h5py
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out = sys.argv[1]
    for step in range(2):  # two checkpoints: each rank writes its 64 Ki float64, then the file is closed
        with h5py.File(f"{out}/ck_{step}.h5", "w", driver="mpio", comm=comm) as f:
            d = f.create_dataset("temperature", (comm.size * 65536,), dtype="f8")
            d[comm.rank * 65536:(comm.rank + 1) * 65536] = np.full(65536, float(step))
    with h5py.File(f"{out}/ck_1.h5", "r", driver="mpio", comm=comm) as f:  # the restart reads the last one back
        back = f["temperature"][comm.rank * 65536:(comm.rank + 1) * 65536]
    assert back.min() == 1.0
''')


@pytest.fixture
def trace(library, scratch, monkeypatch, capsys):
    (scratch / "out").mkdir()
    program = scratch / "h5py_checkpoint.py"
    program.write_text(PROGRAM)
    monkeypatch.chdir(scratch)
    code = main(["record", "--ranks", str(RANKS), "--out", "h5py.trace.json", "--", sys.executable, str(program),
                 str(scratch / "out")])
    assert code == 0, capsys.readouterr().err
    return scratch / "h5py.trace.json"


def test_h5pys_closes_and_opens_are_in_the_trace(trace):
    ops = [e["op"] for e in Trace.load(trace).expand(0)]
    assert ops.count("H5Fcreate") == 2 and ops.count("H5Fopen") == 1, ops
    assert ops.count("H5Fclose") == 3, ops  # File.close: the last H5Idec_ref of each file
    assert "H5Dopen" in ops and "H5Dread" in ops, ops  # f["temperature"]: H5Oopen of a dataset


def test_the_replay_of_an_h5py_program_matches_it(trace, capsys):
    code = main(["check", "--trace", str(trace), "--configs", "1", "--repeats", "1"])
    out = capsys.readouterr().out
    stored = json.loads((trace.parent / "h5py.trace.json.check.json").read_text())
    rows = {row["what"]: row for row in stored["signature"]}
    assert rows["hdf5 read bytes"]["program"] == rows["hdf5 read bytes"]["kernel"] == RANKS * 65536 * 8, out
    assert failures(stored["signature"]) == [] and code == 0, out
    # h5py writes with HDF5's default transfer list; the replay passes it too (not an explicit independent one)
    modes = {what: row for what, row in rows.items() if "transfers" in what}
    assert modes and all(row["program"] == row["kernel"] for row in modes.values()), modes

"""A write from a buffer with ghost cells is replayed from the same memory layout.

The halo C program (tests/adapters/programs/halo.c) writes the interior of a
(ROWS + 2) x (COLS + 2) buffer collectively; HDF5 and ROMIO then make other
MPI-IO and POSIX calls than for a flat buffer (a derived memory datatype,
ROMIO's read-modify-write). Recorded on 2 real MPI ranks under the shim, the
trace must hold the memory dataspace and selection, and the kernel must make
the program's calls at every level (iobo check's signature, judged with its
thresholds). POSIX reads are compared by the bytes they asked for: those
reads at the file's end return what the file holds by then, which varies
from run to run of the program itself.
"""

import json

import pytest

from iobo.cli import main
from iobo.replay.check import failures

RANKS, ROWS, COLS = 2, 500, 1000


@pytest.fixture
def trace(library, programs, scratch, monkeypatch, capsys):
    (scratch / "out").mkdir()
    monkeypatch.chdir(scratch)
    code = main(["record", "--ranks", str(RANKS), "--out", "halo.trace.json", "--", str(programs["halo"]),
                 str(scratch / "out" / "halo.h5"), str(ROWS), str(COLS)])
    assert code == 0, capsys.readouterr().err
    return scratch / "halo.trace.json"


def test_the_trace_holds_the_memory_selection(trace):
    writes = [e for rank in json.loads(trace.read_text())["events"] for e in rank if e.get("op") == "H5Dwrite"]
    assert len(writes) == RANKS, writes
    for write in writes:
        memory = write["mem"]
        assert memory["dims"] == [ROWS + 2, COLS + 2], write
        selection = memory["sel"]  # HDF5 may describe the block as count x 1 or 1 x block
        assert selection["kind"] == "hyperslab" and selection["start"] == [1, 1], write
        assert [c * b for c, b in zip(selection["count"], selection["block"])] == [ROWS, COLS], write


def test_the_kernel_makes_the_programs_calls_at_every_level(trace, capsys):
    code = main(["check", "--trace", str(trace), "--configs", "1", "--repeats", "1"])
    out = capsys.readouterr().out
    stored = json.loads((trace.parent / "halo.trace.json.check.json").read_text())
    rows = {row["what"]: row for row in stored["signature"]}
    assert rows["posix write calls"]["program"] == rows["posix write calls"]["kernel"], out
    assert rows["mpiio write calls"]["program"] == rows["mpiio write calls"]["kernel"], out
    assert failures(stored["signature"]) == [], out
    assert code == 0 and stored["passed"], out

"""Vectored POSIX calls recorded and replayed.

The vectored C program (tests/adapters/programs/vectored.c) writes and reads
a file per rank with writev, pwritev, pwritev2 (at the file position),
readv and preadv. Recorded on 2 real MPI ranks under the shim, the trace
must hold each call with its offset, bytes and number of buffers, and the
kernel must make the program's POSIX calls (iobo check's signature, judged
with its thresholds): before the shim wrapped these calls, the trace held
only the opens and closes and the kernel moved no byte.
"""

import json

import pytest

from iobo.cli import main
from iobo.replay import Trace
from iobo.replay.check import failures

RANKS, KIB = 2, 1024
RECORD, BLOCKS, SMALL = 64 * KIB, 8, 4 * KIB


@pytest.fixture
def trace(library, programs, scratch, monkeypatch, capsys):
    (scratch / "out").mkdir()
    monkeypatch.chdir(scratch)
    code = main(["record", "--ranks", str(RANKS), "--out", "vectored.trace.json", "--",
                 str(programs["vectored"]), str(scratch / "out" / "v")])
    assert code == 0, capsys.readouterr().err
    return scratch / "vectored.trace.json"


def test_the_trace_holds_each_vectored_call_with_its_offset_bytes_and_buffers(trace):
    loaded = Trace.load(trace)
    assert loaded.ranks == RANKS and loaded.repeats(0) == [BLOCKS, BLOCKS]  # writes and reads fold: 8 x one call
    for rank in range(RANKS):
        events = loaded.expand(rank)
        moved = [(e["op"], e.get("offset"), e["bytes"], e["segments"]) for e in events if "segments" in e]
        records = [("writev", k * RECORD, RECORD, 3) for k in range(BLOCKS)]
        end = BLOCKS * RECORD
        assert moved == records + [("pwritev", end + SMALL, SMALL, 2), ("writev", end, SMALL, 2)] + [
            ("readv", k * RECORD, RECORD, 3) for k in range(BLOCKS)] + [("preadv", end, SMALL, 2)], moved


def test_the_kernel_makes_the_programs_vectored_calls(trace, capsys):
    code = main(["check", "--trace", str(trace), "--configs", "1", "--repeats", "1"])
    out = capsys.readouterr().out
    stored = json.loads((trace.parent / "vectored.trace.json.check.json").read_text())
    rows = {row["what"]: row for row in stored["signature"]}
    per_rank = BLOCKS * RECORD + 2 * SMALL
    assert rows["posix write bytes"]["program"] == rows["posix write bytes"]["kernel"] == RANKS * per_rank, out
    assert rows["posix write calls"]["program"] == rows["posix write calls"]["kernel"] == RANKS * (BLOCKS + 2), out
    assert rows["posix read calls"]["program"] == rows["posix read calls"]["kernel"] == RANKS * (BLOCKS + 1), out
    assert failures(stored["signature"]) == [], out
    assert code == 0 and stored["passed"], out

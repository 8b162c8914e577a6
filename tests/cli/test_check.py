"""iobo check --trace on a real program: the checkpoint C program recorded on 2 MPI ranks, its kernel and itself run
under the shim (the default, then spread configurations, interleaved), the check stored next to the trace."""

import json

import pytest

from iobo.cli import main
from iobo.replay.record import check_path, unchecked_reason

RANKS = 2


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def trace(library, programs, scratch, monkeypatch, capsys):
    """The checkpoint program (3 checkpoints of 1 MiB per rank, 4 slabs, collective) recorded here."""
    (scratch / "out").mkdir()
    monkeypatch.chdir(scratch)
    code, _, err = cli(capsys, "record", "--ranks", RANKS, "--out", "ck.trace.json", "--", programs["checkpoint"],
                       scratch / "out" / "ck", 3, 1, 4, 1, "collective")
    assert code == 0, err
    return scratch / "ck.trace.json"


def test_check_compares_the_kernel_with_its_program_and_stores_a_pass(trace, capsys):
    """The signature table has 0% error on the HDF5 bytes and calls, every configuration has a speedup on both
    sides and a correlation is given; <trace>.check.json holds a pass, after which the trace is no longer
    unchecked."""
    assert "never been checked" in unchecked_reason(trace)
    code, out, err = cli(capsys, "check", "--trace", trace, "--configs", 3, "--repeats", 1)
    assert code == 0, out + err
    rows = {line.split("  ")[0]: line.split() for line in out.splitlines()}
    assert rows["hdf5 write bytes"][-1] == "0%" and rows["hdf5 write calls"][-1] == "0%"
    assert rows["hdf5 write bytes"][-3] == rows["hdf5 write bytes"][-2] == str(3 * 2 ** 20 * RANKS)
    for name in ("default", "chunked 1 MiB", "collective buffering 4 MiB"):
        assert any(line.startswith(name) and line.endswith("x") for line in out.splitlines()), name
    assert "rank correlation (Spearman), kernel vs program:" in out and "median trial wall time: program" in out
    assert "PASS: bytes per level within 0.1%, operation counts within 2%" in out
    stored = json.loads(check_path(trace).read_text())
    assert stored["passed"] and stored["failures"] == [] and stored["ranks"] == RANKS
    assert [c["name"] for c in stored["configurations"]] == ["default", "chunked 1 MiB", "collective buffering 4 MiB"]
    assert stored["configurations"][0]["kernel_speedup"] == stored["configurations"][0]["program_speedup"] == 1.0
    assert all(len(stored["runs"][name][side]) == 1 for name in stored["runs"] for side in ("kernel", "program"))
    # one run of each configuration on each side: the signature's default runs are the default's measurements
    runs = [line.split(":")[1].strip() for line in err.splitlines() if line.startswith("iobo check: ")]
    assert sorted(runs) == sorted(f"{side} {name}" for side in ("kernel", "program")
                                  for name in ("default", "chunked 1 MiB (1/1)", "collective buffering 4 MiB (1/1)")), err
    assert unchecked_reason(trace) is None


def test_a_check_of_another_recording_does_not_count(trace, capsys):
    """A check file whose digest is not the trace's (recorded again since) leaves the trace unchecked."""
    check_path(trace).write_text(json.dumps({"passed": True, "trace_sha256": "0" * 64}))
    assert "of another recording" in unchecked_reason(trace)

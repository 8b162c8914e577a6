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


def checkpoint_command(programs, checkpoints, sweeps):
    """The checkpoint program writing ``checkpoints`` checkpoints of 1 MiB per rank in 4 collective slabs into its
    {workdir}, ``sweeps`` Jacobi sweeps before each."""
    return f"{programs['checkpoint']} {{workdir}}/ck {checkpoints} 1 4 {sweeps} collective"


def test_a_kernel_given_as_a_command_is_checked_against_the_program(library, programs, scratch, capsys):
    """--command with --kernel-command: the same check on two commands. The program with 1 sweep between its
    checkpoints instead of 300 does the same I/O: a pass stored at --out, the kernel faster. With 2 checkpoints
    instead of 3 it does not: a failure naming the HDF5 bytes (2 MiB vs 3 MiB a rank), exit 1."""
    program = checkpoint_command(programs, 3, 300)
    out_path = scratch / "faithful.check.json"
    code, out, err = cli(capsys, "check", "--command", program, "--kernel-command", checkpoint_command(programs, 3, 1),
                         "--ranks", RANKS, "--configs", 2, "--repeats", 1, "--workdir", scratch / "work",
                         "--out", out_path)
    assert code == 0, out + err
    assert f"PASS: bytes per level within 0.1%, operation counts within 2%, same datasets and layouts; saved " \
           f"{out_path}" in out
    stored = json.loads(out_path.read_text())
    assert stored["passed"] and stored["kernel_command"].endswith(" 3 1 4 1 collective")
    assert stored["median_wall_s"]["kernel"] < stored["median_wall_s"]["program"]

    code, out, err = cli(capsys, "check", "--command", program, "--kernel-command", checkpoint_command(programs, 2, 1),
                         "--ranks", RANKS, "--configs", 1, "--repeats", 1, "--workdir", scratch / "work")
    assert code == 1, out + err
    mib = 2 ** 20
    assert f"hdf5 write bytes: program {3 * mib * RANKS}, kernel {2 * mib * RANKS}" in out, out
    assert not json.loads((scratch / "work" / "checkpoint.check.json").read_text())["passed"]


@pytest.mark.parametrize("words, got", [(["--command", "x {workdir}"], "--command"),
                                        (["--kernel-command", "x {workdir}"], "--kernel-command"),
                                        ([], "none of them")])
def test_check_needs_a_trace_or_both_commands(capsys, words, got):
    code, _, err = cli(capsys, "check", *words)
    assert code == 2 and ("check takes --trace TRACE, or --command 'PROGRAM ARGS' with --kernel-command 'KERNEL "
                          f"ARGS'; got {got}") in err, err

"""iobo.replay.darshan and iobo record --from-darshan on pydarshan's shipped logs.

Of the logs pydarshan ships (darshan/examples), two have DXT records:
``dxt.darshan`` (1 rank, 169 files read and written through POSIX) and
``ior_hdf5_example.darshan`` (IOR's HDF5 back end on 4 ranks: DXT_MPIIO and
DXT_POSIX of one shared file). Their traces must hold, per rank and level,
the bytes of the log's DXT segments, agree with the log's POSIX and MPI-IO
counters, and replay for real (mpiexec.mpich, as many ranks as the log, the
shim preloaded) with the shim counting those bytes and calls. A log without
DXT (``example.darshan``: counters only) is refused with the way to get DXT.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import darshan
import optuna
import pytest

from iobo import adapters
from iobo.cli import main
from iobo.config import IOConfig
from iobo.errors import ConfigError
from iobo.kernels import ior
from iobo.replay import WORKDIR, Trace, event_bytes
from iobo.replay.darshan import DxtMissing, from_darshan
from iobo.replay.run import direction_of, level_of

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
DXT_LOGS = {"dxt.darshan": ("posix", "DXT_POSIX", "POSIX"), "ior_hdf5_example.darshan": ("mpiio", "DXT_MPIIO",
                                                                                           "MPI-IO")}
"""Each log's replay level, the DXT module it replays and its counters' module."""


def report_of(name: str):
    return darshan.DarshanReport(str(LOGS / name), read_all=True)


def dxt_sums(report, module: str) -> dict[int, dict[str, int]]:
    """The DXT segments' bytes by rank and direction, as pydarshan gives them."""
    sums: dict[int, dict[str, int]] = {}
    for record in report.records[module].to_df():
        mine = sums.setdefault(int(record["rank"]), {"write": 0, "read": 0})
        for direction in ("write", "read"):
            frame = record[f"{direction}_segments"]
            mine[direction] += int(frame["length"].sum()) if len(frame) else 0
    return sums


def counters(report, module: str) -> dict[str, int]:
    """Bytes and calls of a module's counters, every file."""
    frame = report.records[module].to_df()["counters"]
    if module == "POSIX":
        return {"write bytes": int(frame["POSIX_BYTES_WRITTEN"].sum()), "read bytes": int(frame["POSIX_BYTES_READ"].sum()),
                "write calls": int(frame["POSIX_WRITES"].sum()), "read calls": int(frame["POSIX_READS"].sum())}
    calls = {d: int(sum(frame[f"MPIIO_{k}_{d.upper()}S"].sum() for k in ("INDEP", "COLL", "SPLIT", "NB")))
             for d in ("write", "read")}
    return {"write bytes": int(frame["MPIIO_BYTES_WRITTEN"].sum()), "read bytes": int(frame["MPIIO_BYTES_READ"].sum()),
            "write calls": calls["write"], "read calls": calls["read"]}


def trace_io(trace: Trace) -> tuple[dict[int, dict[str, dict[str, int]]], dict[str, int]]:
    """(per rank: level -> direction -> bytes, totals of bytes and calls per direction) of a trace's events."""
    per_rank, totals = {}, {"write bytes": 0, "read bytes": 0, "write calls": 0, "read calls": 0}
    for rank in range(trace.ranks):
        mine = {level: {"write": 0, "read": 0} for level in ("mpiio", "posix")}
        for event in trace.expand(rank):
            direction = direction_of(event["op"])
            if direction:
                mine[level_of(event["op"])][direction] += event_bytes(event)
                totals[f"{direction} bytes"] += event_bytes(event)
                totals[f"{direction} calls"] += 1
        per_rank[rank] = mine
    return per_rank, totals


@pytest.mark.parametrize("name", sorted(DXT_LOGS))
def test_trace_has_the_dxt_bytes_per_rank_and_level_and_the_counters(name):
    level, module, counter_module = DXT_LOGS[name]
    report = report_of(name)
    trace = from_darshan(LOGS / name)

    assert trace.ranks == report.metadata["job"]["nprocs"]
    per_rank, totals = trace_io(trace)
    sums = dxt_sums(report, module)
    other = "posix" if level == "mpiio" else "mpiio"
    for rank in range(trace.ranks):
        assert per_rank[rank][level] == sums.get(rank, {"write": 0, "read": 0}), rank
        assert per_rank[rank][other] == {"write": 0, "read": 0}  # an MPI-IO file's POSIX segments are not replayed
    # every file of these logs has DXT records: the trace does what the counters count
    assert totals == counters(report, counter_module)
    meta = trace.metadata
    assert meta["source"] == "darshan-dxt" and meta["log"] == str(LOGS / name) and meta["nprocs"] == trace.ranks
    assert meta["signature"]["levels"][level]["write"]["bytes"] == totals["write bytes"]
    assert meta["signature"]["top_level"] == level
    assert any("HDF5 is not in DXT" in sentence for sentence in trace.not_recorded)
    assert not any("partial" in sentence for sentence in trace.not_recorded)
    # opens before a file's first access, closes after its last, paths under {workdir}
    for rank in range(trace.ranks):
        open_handles = set()
        for event in trace.expand(rank):
            handle = event.get("fh", event.get("fd"))
            if event["op"] in ("open", "MPI_File_open"):
                assert event["path"].startswith(WORKDIR + "/") and handle not in open_handles
                open_handles.add(handle)
            elif event["op"] in ("close", "MPI_File_close"):
                open_handles.remove(handle)
            else:
                assert handle in open_handles, event
        assert not open_handles


def test_mpiio_log_opens_the_shared_file_on_every_rank_with_independent_writes():
    """IOR's file has one shared MPI-IO record: every rank opens it, on all 4; its counters say 23 independent
    writes and no collective one; it is read, so it is sized first; the log's HDF5 and STDIO use is said."""
    trace = from_darshan(LOGS / "ior_hdf5_example.darshan")

    for rank in range(4):
        events = trace.expand(rank)
        assert [e["op"] for e in events[:2]] == ["MPI_File_open", "MPI_File_set_size"]
        assert events[0]["path"] == "{workdir}/test123.h5" and events[0]["procs"] == 4
        assert events[-1]["op"] == "MPI_File_close"
        assert {e["op"] for e in events[2:-1]} == {"MPI_File_write_at", "MPI_File_read_at"}
    assert trace.workdir == "/global/cscratch1/sd/ssnyder" and trace.metadata["program"] == "ior"
    notes = " ".join(trace.not_recorded)
    assert "HDF5 counters (H5F, H5D)" in notes and "2,421 bytes written" in notes and "hints" in notes
    assert trace.folds()  # the 256 KiB writes fold


def replay(trace_path: Path, ranks: int, scratch: Path) -> tuple[dict, dict]:
    """The trace replayed by python -m iobo.replay.run on ``ranks`` MPICH ranks under the shim: (its line, the
    shim's report)."""
    prefix = scratch / "report"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOBO_") and k not in ("LD_PRELOAD", "ROMIO_HINTS")}
    env.update(adapters.preload_env(IOConfig.from_values({}, space=ior.space()), report_prefix=prefix))
    done = subprocess.run(["mpiexec.mpich", "-n", str(ranks), sys.executable, "-m", "iobo.replay.run", str(trace_path),
                           "--workdir", str(scratch / "replay")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]), adapters.read_report(prefix)


@pytest.mark.parametrize("name", sorted(DXT_LOGS))
def test_the_trace_replays_with_the_logs_bytes_and_calls(library, scratch, name):
    level, _, counter_module = DXT_LOGS[name]
    trace = from_darshan(LOGS / name)
    path = scratch / "trace.json"
    trace.save(path)
    printed, report = replay(path, trace.ranks, scratch)

    assert printed["not_replayed"] == {} and report["level"] == level
    logged = counters(report_of(name), counter_module)
    shim = report["levels"][level]
    for direction in ("write", "read"):
        assert shim[direction]["bytes"] == logged[f"{direction} bytes"]
        assert shim[direction]["calls"] == logged[f"{direction} calls"]
    if level == "mpiio":
        assert shim["write"]["collective_calls"] == 0 and shim["write"]["independent_calls"] == logged["write calls"]


def test_a_log_without_dxt_is_refused_with_how_to_get_it(tmp_path):
    log = LOGS / "example.darshan"  # POSIX, MPI-IO, LUSTRE and STDIO counters of 2048 ranks, no DXT
    with pytest.raises(DxtMissing) as caught:
        from_darshan(log)
    assert str(log) in str(caught.value) and "DXT_ENABLE_IO_TRACE=1" in str(caught.value)
    (tmp_path / "not.darshan").write_text("not a log\n")
    with pytest.raises(ConfigError, match="must be a Darshan log pydarshan can read"):
        from_darshan(tmp_path / "not.darshan")


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_record_from_darshan_then_check_and_tune(library, scratch, monkeypatch, capsys):
    """iobo record --from-darshan saves the trace and says what it cannot hold; iobo check says it has no program
    to run and passes the kernel against the log's counters; iobo tune --trace tunes it without the unchecked
    warning. A log without DXT, and --ranks with --from-darshan, are refused."""
    monkeypatch.chdir(scratch)
    log = LOGS / "ior_hdf5_example.darshan"
    code, out, err = cli(capsys, "record", "--from-darshan", log)
    assert code == 0, err
    trace = Trace.load(scratch / "ior_hdf5_example.trace.json")
    assert trace.ranks == 4 and "replayed at the MPI-IO level: 1 files" in out and "ranks: 4, events: 71" in out
    assert "  - HDF5 is not in DXT" in out and "next: iobo check --trace ior_hdf5_example.trace.json" in out

    code, out, err = cli(capsys, "check", "--trace", "ior_hdf5_example.trace.json")
    assert code == 0, out + err
    assert "has no program here to run" in out and "PASS: mpiio bytes within 0.1%" in out
    result = json.loads((scratch / "ior_hdf5_example.trace.json.check.json").read_text())
    rows = {row["what"]: row for row in result["signature"]}
    assert rows["mpiio write bytes"]["program"] == rows["mpiio write bytes"]["kernel"] == 4195800
    assert rows["mpiio read calls"]["program"] == rows["mpiio read calls"]["kernel"] == 36

    storage = f"sqlite:///{scratch / 'study.db'}"
    code, out, err = cli(capsys, "tune", "--trace", "ior_hdf5_example.trace.json", "--ranks", 4, "--trials", 4,
                         "--confirm", 0, "--storage", storage)
    assert code == 0, err
    assert "study 'ior-kernel-4ranks'" in out and "may not do its program's I/O" not in err
    study = optuna.load_study(study_name="ior-kernel-4ranks", storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) >= 4 and all(t.value > 0 for t in done)

    code, _, err = cli(capsys, "record", "--from-darshan", LOGS / "example.darshan")
    assert code == 2 and "has no DXT records" in err and "DXT_ENABLE_IO_TRACE=1" in err
    code, _, err = cli(capsys, "record", "--from-darshan", log, "--ranks", 2)
    assert code == 2 and "drop --ranks" in err

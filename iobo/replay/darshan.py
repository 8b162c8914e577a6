"""A Darshan DXT log as a replay trace (issue 28 item 5): ``iobo record --from-darshan LOG``.

Darshan's DXT modules (``DXT_POSIX``, ``DXT_MPIIO``; enabled at run time with
``DXT_ENABLE_IO_TRACE=1``) hold, per file and rank, every read and write
segment: offset, length, start and end time (seconds since the job started).
:func:`from_darshan` turns them, read with pydarshan, into a :class:`Trace`
that ``python -m iobo.replay.run`` replays:

- a file with ``DXT_MPIIO`` records is replayed at the MPI-IO level on every
  rank (its ``DXT_POSIX`` segments are what MPI-IO did underneath), others
  at the POSIX level;
- opens are inferred, one per file and rank before its first segment, closes
  after its last; a file with one shared MPI-IO record in the log (Darshan's
  rank -1: every rank opened it) is opened on all ranks at its first segment
  on any rank and closed after its last, so collective opens line up;
- MPI-IO segments are collective or independent as the log's MPI-IO counters
  say for the file (all collective or all independent); where they mix, DXT
  cannot tell which segment was which: replayed as independent, and said;
- a file the program read is made its largest accessed size right after its
  open (``ftruncate`` or ``MPI_File_set_size``: sparse, neither is a read or
  a write), so the replay's reads find as many bytes;
- paths keep their structure below the files' common directory, which
  becomes ``{workdir}``; ``gap_s`` is the time from the rank's previous
  access's end to the next one's start (the computation, and whatever DXT
  does not trace); repeated blocks are folded as in :func:`iobo.replay.read_raw`;
- ``not_recorded`` says in sentences what DXT cannot tell (HDF5 structure,
  hints, views, the calls themselves, a partial DXT module, counters that
  show I/O the segments lack); ``metadata`` holds the log, its program line,
  ranks and run time, and the log's own counters as a signature
  (:func:`log_signature`) that ``iobo check`` compares the replay with.

pydarshan is imported inside the functions: ``import iobo`` stays light.
"""

from __future__ import annotations

import datetime
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError
from iobo.replay._model import GAP_FLOOR_S, WORKDIR, Trace

DARSHAN_SOURCE = "darshan-dxt"
"""``metadata["source"]`` of a trace made from a Darshan DXT log."""
DXT_MODULES = ("DXT_MPIIO", "DXT_POSIX")
_MODE_CREATE, _MODE_WRONLY, _MODE_RDWR = 1, 4, 8  # MPI_MODE_* in MPICH and Open MPI
_DIRECTIONS = ("write", "read")
_STREAMS = ("<STDIN>", "<STDOUT>", "<STDERR>")


class DxtMissing(ConfigError):
    """A Darshan log with no DXT records: it has counters only, no per-call segments to replay."""


@dataclass
class _File:
    """One file of the log: its path, replay level, and the segments of each rank."""

    path: str
    level: str  # "mpiio" or "posix"
    index: int
    segments: dict[int, list[tuple[float, float, str, int, int]]] = field(default_factory=dict)
    # rank -> [(start_s, end_s, direction, offset, length)]
    shared: bool = False  # one MPI-IO record of rank -1 in the log: every rank opened it
    modes: dict[str, str | None] = field(default_factory=dict)  # direction -> collective, independent or None
    below: list[tuple[str, int]] = field(default_factory=list)  # an MPI-IO file's DXT_POSIX (direction, length)

    def all_segments(self):
        return [s for segments in self.segments.values() for s in segments]

    def extent(self) -> int:
        return max((offset + length for *_, offset, length in self.all_segments() if offset >= 0), default=0)

    def read(self) -> bool:
        return any(s[2] == "read" for s in self.all_segments())


def _open_report(log_path: str | os.PathLike):
    import logging

    try:
        import darshan
    except ImportError:
        raise ConfigError("reading a Darshan log needs pydarshan: pip install darshan (iobo's dependency; it "
                          "bundles the log reader)") from None
    logging.getLogger("darshan").setLevel(logging.ERROR)  # pydarshan warns about modules it has no plots for
    try:
        return darshan.DarshanReport(os.fspath(log_path), read_all=True)
    except RuntimeError as exc:
        raise ConfigError(f"{log_path} must be a Darshan log pydarshan can read; it failed: "
                          f"{' '.join(str(exc).split())}") from None


def _counters(report, module: str):
    """The module's counters as a DataFrame (columns rank, id, counter names), or None."""
    if module not in report.records or not len(report.records[module]):
        return None
    return report.records[module].to_df()["counters"]


def _sum(frame, ids, *columns) -> int:
    if frame is None:
        return 0
    rows = frame[frame["id"].isin(list(ids))]
    return int(sum(rows[c].sum() for c in columns if c in rows))


def _io_columns(level: str, direction: str) -> tuple[str, tuple[str, ...]]:
    """(bytes column, call count columns) of a direction in the POSIX or MPI-IO counters."""
    kind = "WRITES" if direction == "write" else "READS"
    if level == "posix":
        return f"POSIX_BYTES_{'WRITTEN' if direction == 'write' else 'READ'}", (f"POSIX_{kind}",)
    return (f"MPIIO_BYTES_{'WRITTEN' if direction == 'write' else 'READ'}",
            tuple(f"MPIIO_{k}_{kind}" for k in ("INDEP", "COLL", "SPLIT", "NB")))


def _files(report) -> tuple[list[_File], dict[str, Any]]:
    """The log's DXT files (MPI-IO level where it has DXT_MPIIO records) and what was read of each module."""
    names = report.name_records
    dxt = {module: report.records[module].to_df() for module in DXT_MODULES
           if module in report.records and len(report.records[module])}
    mpiio_ids = {record["id"] for record in dxt.get("DXT_MPIIO", [])}
    files: dict[int, _File] = {}
    for module, records in dxt.items():
        level = "mpiio" if module == "DXT_MPIIO" else "posix"
        for record in records:
            path = names.get(record["id"], "")
            if path in _STREAMS or not path:
                continue
            if level == "posix" and record["id"] in mpiio_ids:  # what MPI-IO did: kept for the signature only
                below = files.setdefault(record["id"], _File(path, "mpiio", len(files))).below
                for direction in _DIRECTIONS:
                    below.extend((direction, int(n)) for n in record[f"{direction}_segments"].get("length", []))
                continue
            file = files.setdefault(record["id"], _File(path, level, len(files)))
            mine = file.segments.setdefault(int(record["rank"]), [])
            for direction in _DIRECTIONS:
                frame = record[f"{direction}_segments"]
                if len(frame):
                    mine.extend((float(s), float(e), direction, int(o), int(n)) for o, n, s, e in zip(
                        frame["offset"], frame["length"], frame["start_time"], frame["end_time"]))
    mpiio = _counters(report, "MPI-IO")
    for fid, file in files.items():
        if file.level != "mpiio":
            continue
        rows = mpiio[mpiio["id"] == fid] if mpiio is not None else None
        file.shared = rows is not None and bool((rows["rank"] == -1).any())
        for direction in _DIRECTIONS:
            kind = "WRITES" if direction == "write" else "READS"
            collective = _sum(mpiio, [fid], f"MPIIO_COLL_{kind}", f"MPIIO_SPLIT_{kind}")
            independent = _sum(mpiio, [fid], f"MPIIO_INDEP_{kind}", f"MPIIO_NB_{kind}")
            file.modes[direction] = ("collective" if collective and not independent else
                                     "independent" if independent and not collective else None)
    return sorted((f for f in files.values() if f.all_segments()), key=lambda f: f.index), dxt


def _base(paths: list[str]) -> str | None:
    """The directory that becomes ``{workdir}``: the common directory of the absolute paths."""
    parents = [os.path.dirname(p) for p in paths if os.path.isabs(p)]
    return os.path.commonpath(parents) if parents else None


def _mapped(path: str, base: str | None) -> str:
    if base is None or not os.path.isabs(path):
        return f"{WORKDIR}/{os.path.normpath(path)}"
    return f"{WORKDIR}/{os.path.relpath(path, base)}"


def _rank_events(rank: int, nprocs: int, files: list[_File], base: str | None) -> tuple[list[dict[str, Any]], float]:
    """One rank's events in time order with their gaps, and the end of its last event (seconds)."""
    timeline = []  # (time_s, phase: 0 open / 1 access / 2 close, file index, sequence, end_s, event)
    for file in files:
        mine = sorted(file.segments.get(rank, []))
        takes_part = bool(mine) or (file.level == "mpiio" and file.shared)
        if not takes_part:
            continue
        everyone = sorted(file.all_segments())
        first = everyone[0][0] if file.shared else mine[0][0]
        last = max(s[1] for s in everyone) if file.shared else max(s[1] for s in mine)
        path = _mapped(file.path, base)
        reads = file.read()
        if file.level == "mpiio":
            amode = _MODE_CREATE | (_MODE_RDWR if reads else _MODE_WRONLY)
            opening = [{"op": "MPI_File_open", "fh": None, "name": path, "path": path, "amode": amode,
                        "procs": nprocs if file.shared else 1, "hints": {}}]
            if reads:
                opening.append({"op": "MPI_File_set_size", "fh": None, "size": file.extent()})
            closing = {"op": "MPI_File_close", "fh": None}
        else:
            flags = os.O_CREAT | (os.O_RDWR if reads else os.O_WRONLY)
            opening = [{"op": "open", "fd": None, "name": path, "path": path, "flags": flags}]
            if reads:
                opening.append({"op": "ftruncate", "fd": None, "size": file.extent()})
            closing = {"op": "close", "fd": None}
        for sequence, event in enumerate(opening):
            timeline.append((first, 0, file.index, sequence, first, event))
        for sequence, (start, end, direction, offset, length) in enumerate(mine):
            if file.level == "mpiio":
                collective = file.modes.get(direction) == "collective"
                op = f"MPI_File_{direction}{'_at' if offset >= 0 else ''}{'_all' if collective else ''}"
                event = {"op": op, "fh": None, "offset": offset if offset >= 0 else None, "bytes": length,
                         "collective": collective}
            else:
                event = {"op": f"p{direction}", "fd": None, "offset": offset, "bytes": length}
            timeline.append((start, 1, file.index, sequence, end, event))
        timeline.append((last, 2, file.index, 0, last, closing))
    timeline.sort(key=lambda item: item[:4])
    events, previous, symbols, counts = [], 0.0, {}, {"fh": 0, "fd": 0}
    for start, _, index, _, end, event in timeline:
        kind = "fh" if "fh" in event else "fd"
        if event["op"] in ("MPI_File_open", "open"):
            symbols[index] = counts[kind]
            counts[kind] += 1
        event = dict(event, **{kind: symbols[index]}, ok=True)
        gap = start - previous
        event["gap_s"] = round(gap, 6) if gap >= GAP_FLOOR_S else 0.0
        previous = max(previous, end)
        events.append(event)
    return events, previous


def _collective_counts_agree(file: _File, nprocs: int, direction: str) -> bool:
    """Whether every rank of a shared file has as many segments of ``direction`` (a collective call is made by
    every rank of the communicator: different counts would leave the replay waiting)."""
    counts = {sum(1 for s in file.segments.get(rank, []) if s[2] == direction) for rank in range(nprocs)}
    return len(counts) == 1


def _bin(length: int) -> int:
    """The shim's request-size bin of a length: its lower bound, 0 or a power of two."""
    return 0 if length <= 0 else 1 << (length.bit_length() - 1)


def log_signature(report, files: list[_File], nprocs: int) -> dict[str, Any]:
    """The log's own view of the files the trace replays, in the form of :func:`iobo.replay.signature.signature`:
    bytes and calls per level and direction from its counters (POSIX and MPI-IO modules), the request-size
    histograms from its DXT segments (the shim's bins), files as (file, rank) opens, as the shim counts them. The
    POSIX level holds every replayed file, those MPI-IO wrote through included (the levels nest, as in the shim's
    report); no HDF5, datasets or transfer modes (DXT has none)."""
    frames = {"posix": _counters(report, "POSIX"), "mpiio": _counters(report, "MPI-IO")}
    by_id = _ids(report, files)
    ids = {"mpiio": [fid for fid, f in by_id.items() if f.level == "mpiio"], "posix": list(by_id)}
    opens = {f.index: (nprocs if f.shared else len(f.segments)) for f in files}
    levels: dict[str, Any] = {"hdf5": {"files": 0, **{d: {"bytes": 0, "calls": 0, "histogram": {}}
                                                      for d in _DIRECTIONS}}}
    for level in ("mpiio", "posix"):
        frame = frames[level]
        chosen = [by_id[fid] for fid in ids[level]]
        entry: dict[str, Any] = {"files": sum(opens[f.index] for f in chosen)}
        for direction in _DIRECTIONS:
            bytes_column, call_columns = _io_columns(level, direction)
            lengths = [s[4] for f in chosen if f.level == level for s in f.all_segments() if s[2] == direction]
            if level == "posix":
                lengths += [n for f in chosen for d, n in f.below if d == direction]
            histogram: dict[int, int] = {}
            for length in lengths:
                histogram[_bin(length)] = histogram.get(_bin(length), 0) + 1
            entry[direction] = {"bytes": _sum(frame, ids[level], bytes_column),
                                "calls": _sum(frame, ids[level], *call_columns), "histogram": dict(sorted(
                                    histogram.items()))}
        levels[level] = entry
    collective = {}
    for direction in _DIRECTIONS:
        kind = "WRITES" if direction == "write" else "READS"
        together = _sum(frames["mpiio"], ids["mpiio"], f"MPIIO_COLL_{kind}", f"MPIIO_SPLIT_{kind}")
        calls = levels["mpiio"][direction]["calls"]
        collective[direction] = together / calls if calls else None
    return {"version": 1, "ranks": nprocs, "top_level": "mpiio" if ids["mpiio"] else "posix", "levels": levels,
            "collective_share": collective, "files": {"hdf5": 0, "mpiio": len(ids["mpiio"])},
            "datasets": {}, "transfer_modes": {d: {} for d in _DIRECTIONS}}


def _ids(report, files: list[_File]) -> dict[int, _File]:
    by_path = {f.path: f for f in files}
    return {fid: by_path[name] for fid, name in report.name_records.items() if name in by_path}


def _notes(report, files: list[_File], nprocs: int) -> list[str]:
    """What the trace cannot hold, in sentences: DXT's limits, then this log's."""
    levels = {f.level for f in files}
    notes = [
        "a Darshan DXT log holds each rank's reads and writes (offset, length, start and end time), not the calls "
        "themselves: opens and closes are inferred (one per file and rank, before its first access and after its "
        "last), the open flags and access modes guessed (created; read-write where the file is read)",
        "HDF5 is not in DXT: no files, groups, datasets, types, dimensions, layouts, chunking, filters, selections "
        "or transfer modes; the MPI-IO or POSIX calls HDF5 made are replayed instead",
    ]
    if "posix" in levels:
        notes.append("which POSIX call moved a segment (write, pwrite, writev, read, pread, readv) is not in DXT: "
                     "replayed as pwrite and pread at the logged offset")
    if "mpiio" in levels:
        notes += [
            "MPI-IO hints, file views and datatypes are not in DXT: files are opened with no hints and the default "
            "view, at the byte offsets Darshan logged (the log's 'h' metadata are Darshan's own hints for writing "
            "the log)",
            "the communicator of an MPI-IO open is not in DXT: a file with one shared MPI-IO record (every rank "
            "opened it) is opened on all ranks, any other on each rank alone",
            "which MPI-IO call moved a segment (write_at, write, write_all, iwrite, a split collective) is not in "
            "DXT: replayed as write_at (write_at_all where the counters say collective) and the read forms alike",
        ]
    notes += [
        "metadata calls (stat, lseek, fsync, fdatasync, ftruncate, unlink, mkdir) and their times are not in DXT: "
        "not replayed; the time they took counts as computation (gap_s), as does the opens' and closes'",
        "stdio (fwrite, fread, fprintf to files) and memory-mapped I/O are not in DXT: not replayed",
        "files Darshan does not instrument (by default under /etc, /proc, /sys, /usr and the like) are not in the "
        "log",
        "the data is synthetic; a file the program read is made its largest accessed size (sparse) after its "
        "open, so the replay's reads find as many bytes",
    ]
    for module in DXT_MODULES:
        if module in report.modules and report.modules[module].get("partial_flag"):
            notes.append(f"the log's {module} module is partial: Darshan ran out of DXT memory (raise "
                         f"DXT_TRACE_MEM, or DARSHAN_MODMEM) and the segments after that point are missing: the "
                         f"replay does less I/O than the program did")
    for file in files:
        if file.level != "mpiio":
            continue
        for direction in _DIRECTIONS:
            if not any(s[2] == direction for s in file.all_segments()):
                continue
            if file.modes.get(direction) is None:
                notes.append(f"{file.path}: the log's MPI-IO counters mix collective and independent {direction}s "
                             f"(or have none) and DXT does not say which segment was which: replayed as independent")
            elif file.modes[direction] == "collective" and file.shared and not _collective_counts_agree(
                    file, nprocs, direction):
                file.modes[direction] = None
                notes.append(f"{file.path}: collective {direction}s in the counters, but the ranks have different "
                             f"numbers of {direction} segments: replayed as independent")
    by_id = _ids(report, files)
    for level, module in (("posix", "POSIX"), ("mpiio", "MPI-IO")):
        frame = _counters(report, module)
        if frame is None:
            continue
        for direction in _DIRECTIONS:
            bytes_column, call_columns = _io_columns(level, direction)
            wanted = [fid for fid, f in by_id.items() if f.level == level]
            counted = _sum(frame, wanted, *call_columns)
            segments = sum(1 for fid in wanted for s in by_id[fid].all_segments() if s[2] == direction)
            if counted > segments:
                notes.append(f"the {module} counters count {counted} {direction}s of the files replayed at that "
                             f"level, DXT holds {segments}: the others are missing from the trace")
            others = sorted(set(frame["id"]) - set(by_id))
            missing = _sum(frame, others, bytes_column)
            if missing:
                notes.append(f"{len(others)} files of the {module} counters have no DXT segments ({missing:,} bytes "
                             f"{'written' if direction == 'write' else 'read'}; DXT was off for them, filtered or "
                             f"ran out of memory): not replayed")
    stdio = _counters(report, "STDIO")
    if stdio is not None:
        written, read = int(stdio["STDIO_BYTES_WRITTEN"].sum()), int(stdio["STDIO_BYTES_READ"].sum())
        if written or read:
            notes.append(f"the log's STDIO counters show {written:,} bytes written and {read:,} read through stdio: "
                         f"not replayed")
    hdf5 = [m for m in ("H5F", "H5D") if m in report.records and len(report.records[m])]
    if hdf5:
        notes.append(f"the log has HDF5 counters ({', '.join(hdf5)}): the program used HDF5, whose datasets and "
                     f"layouts a DXT trace cannot replay (record the program with iobo record for that)")
    return notes


def from_darshan(log_path: str | os.PathLike) -> Trace:
    """The trace of a Darshan log's DXT records (this module's rules); :class:`DxtMissing` for a log without
    them, :class:`ConfigError` for a file pydarshan cannot read."""
    log_path = Path(log_path)
    if not log_path.is_file():
        raise ConfigError(f"the Darshan log {log_path} does not exist: give the .darshan file the run wrote")
    report = _open_report(log_path)
    files, dxt = _files(report)
    if not files:
        raise DxtMissing(f"the Darshan log {log_path} has no DXT records (modules: {', '.join(report.modules)}), "
                         f"only counters, which hold no per-call offsets, sizes or times to replay: run the program "
                         f"again with DXT on, DXT_ENABLE_IO_TRACE=1 in its environment, e.g. "
                         f"DXT_ENABLE_IO_TRACE=1 mpiexec -n N ./app")
    job = report.metadata["job"]
    nprocs = int(job["nprocs"])
    if any(rank < 0 or rank >= nprocs for f in files for rank in f.segments):
        raise ConfigError(f"the Darshan log {log_path} has DXT segments of ranks outside 0..{nprocs - 1}: it is "
                          f"damaged")
    notes = _notes(report, files, nprocs)  # before the events: it may turn a file's collective mode off
    base = _base([f.path for f in files])
    per_rank, tails = [], []
    run_time = float(job.get("run_time") or (job["end_time_sec"] - job["start_time_sec"]))
    for rank in range(nprocs):
        events, end = _rank_events(rank, nprocs, files, base)
        per_rank.append(events)
        tail = run_time - end
        tails.append(round(tail, 6) if tail >= GAP_FLOOR_S else 0.0)
    idle = [rank for rank in range(nprocs) if not per_rank[rank]]
    if idle:
        notes.insert(0, f"{len(idle)} of {nprocs} ranks have no DXT segments: they replay no I/O")
    exe = report.metadata.get("exe") or ""
    try:
        command = shlex.split(exe)
    except ValueError:
        command = exe.split()
    io_s = max(sum(sum(e - s for s, e, *_ in f.segments.get(rank, [])) for f in files) for rank in range(nprocs))
    metadata = {
        "source": DARSHAN_SOURCE, "log": str(log_path.resolve()), "exe": exe, "nprocs": nprocs,
        "jobid": job.get("jobid"), "run_time_s": run_time,
        "started": datetime.datetime.fromtimestamp(job["start_time_sec"], datetime.timezone.utc).isoformat(),
        "darshan_version": (job.get("metadata") or {}).get("lib_ver"), "log_version": job.get("log_ver"),
        "dxt_modules": {m: {"records": len(dxt[m]), "partial": bool(report.modules[m].get("partial_flag"))}
                        for m in dxt},
        "levels": {level: sum(1 for f in files if f.level == level) for level in ("mpiio", "posix")},
        "command": command, "cwd": None, "ranks": nprocs,
        "program": Path(command[0]).name if command else log_path.name.split(".")[0],
        "wall_s": run_time, "io_s": round(io_s, 6),
        "signature": log_signature(report, files, nprocs),
    }
    return Trace.from_events(per_rank, program=command[0] if command else None, argv=command, cwd=None,
                             workdir=base, outside=[], not_recorded=notes, tail_gap_s=tails, metadata=metadata)


__all__ = ["DARSHAN_SOURCE", "DXT_MODULES", "DxtMissing", "from_darshan", "log_signature"]

"""Reading the shim's raw per-rank traces (``<prefix>.<rank>.trace.jsonl``) into a :class:`Trace`."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError
from iobo.replay._model import GAP_FLOOR_S, WORKDIR, Trace, opens_for_writing

RAW_FORMAT = "iobo-trace"
RAW_VERSION = 1
NEVER_RECORDED = (
    "stdio (fwrite, fread, fprintf to files) is not recorded",
    "memory-mapped I/O (mmap) is not recorded",
    "POSIX asynchronous I/O (aio_*) is not recorded",
    "Fortran MPI-IO bindings (mpi_file_write_* called from Fortran) are not recorded",
    "HDF5 groups and links are not recorded: groups are created as a dataset's path needs them",
    "direct chunk writes (H5Dwrite_chunk, H5DOwrite_chunk) are not recorded",
    "HDF5 called through a statically linked library is not recorded",
)
"""What the shim never records, whatever the program (the end of the raw trace format's description)."""
_HANDLES = {"H5Fcreate": "file", "H5Fopen": "file", "H5Dcreate": "dset", "H5Dopen": "dset", "H5Acreate": "attr",
            "MPI_File_open": "fh", "open": "fd"}
_CLOSES = {"H5Fclose": "file", "H5Dclose": "dset", "H5Aclose": "attr", "MPI_File_close": "fh", "close": "fd"}


def raw_files(prefix: str | os.PathLike) -> dict[int, Path]:
    """The raw trace files ``<prefix>.<rank>.trace.jsonl`` by rank."""
    prefix = Path(prefix)
    pattern = re.compile(re.escape(prefix.name) + r"\.(\d+)\.trace\.jsonl")
    found = {}
    if prefix.parent.is_dir():
        for path in prefix.parent.iterdir():
            match = pattern.fullmatch(path.name)
            if match:
                found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def _read_lines(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """(header, events, end line or None) of one rank's raw trace."""
    lines = []
    with open(path) as stream:
        for number, line in enumerate(stream, 1):
            if not line.strip():
                continue
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError as exc:
                if number > 1 and not line.endswith("\n"):  # a last line cut off by a crash
                    break
                raise ConfigError(f"line {number} of the raw trace {path} must be one JSON object; got {line[:80]!r}: "
                                  f"{exc}") from None
    header = lines[0] if lines else {}
    if header.get("format") != RAW_FORMAT or header.get("version") != RAW_VERSION:
        raise ConfigError(f"{path} must start with the shim's trace header (format {RAW_FORMAT!r} version "
                          f"{RAW_VERSION}); got {json.dumps(header)[:120]}: record the program again with the shim "
                          f"built from this iobo (IOBO_PRELOAD_TRACE)")
    end = lines[-1] if len(lines) > 1 and lines[-1].get("op") == "end" else None
    return header, lines[1:len(lines) - (end is not None)], end


def _workdir(opens: list[dict[str, Any]]) -> str | None:
    """The directory the program wrote its files into: the common directory of the files it opened for writing,
    or, when that is the root, the directory holding most of them."""
    parents = [os.path.dirname(e["path"]) for e in opens if e.get("ok", True) and e.get("path") and opens_for_writing(e)]
    if not parents:
        return None
    common = os.path.commonpath(parents)
    return common if common != os.sep else Counter(parents).most_common(1)[0][0]


def _unused_opens(events: list[dict[str, Any]]) -> set[int]:
    """Indices of POSIX opens (and their closes) of files never read, written or synced before their close: MPI's
    shared-memory files, opened and mapped at MPI_Init (the report does not count them either)."""
    live: dict[Any, list[int]] = {}  # fd -> [index of its open, uses]
    unused: set[int] = set()
    for index, event in enumerate(events):
        op, fd = event["op"], event.get("fd")
        if op == "open":
            if fd in live and not live[fd][1]:
                unused.add(live[fd][0])
            live[fd] = [index, 0]
        elif op == "close" and fd in live:
            opened, uses = live.pop(fd)
            if not uses:
                unused.update((opened, index))
        elif fd in live:
            live[fd][1] += 1
    unused.update(opened for opened, uses in live.values() if not uses)
    return unused


class _Symbols:
    """One rank's handles -> symbols: the k-th open of each kind, until its close."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.live: dict[str, dict[int, int]] = {kind: {} for kind in ("file", "dset", "attr", "fh", "fd")}
        self.dset_file: dict[int, int | None] = {}  # dataset symbol -> its file's symbol
        self.last_file: int | None = None  # the newest HDF5 file still open
        self.unknown: Counter = Counter()

    def opened(self, kind: str, handle: int) -> int:
        symbol = self.counts[kind]
        self.counts[kind] += 1
        self.live[kind][handle] = symbol
        if kind == "file":
            self.last_file = symbol
        return symbol

    def get(self, kind: str, handle: Any, op: str) -> int | None:
        symbol = self.live[kind].get(handle)
        if symbol is None:
            self.unknown[op] += 1
        return symbol

    def closed(self, kind: str, handle: Any) -> None:
        symbol = self.live[kind].pop(handle, None)
        if kind == "file" and symbol == self.last_file:
            self.last_file = max(self.live["file"].values(), default=None)

    def location(self, handle: Any) -> dict[str, Any]:
        """A location handle (``loc``/``obj``) as {"file": k} or {"dset": k}; a group (unrecorded) as the newest
        open file with ``on_group``."""
        if handle in self.live["file"]:
            return {"file": self.live["file"][handle]}
        if handle in self.live["dset"]:
            return {"dset": self.live["dset"][handle]}
        return {"file": self.last_file, "on_group": True}


def _symbolic(raw: dict[str, Any], symbols: _Symbols, workdir: str | None) -> dict[str, Any]:
    """One raw event with its handles as symbols and its paths under ``workdir`` as ``{workdir}``."""
    op = raw["op"]
    event = {k: v for k, v in raw.items() if k not in ("t0", "t1", "loc", "obj")}
    event.setdefault("ok", True)
    if op in _HANDLES:
        kind = _HANDLES[op]
        event[kind] = symbols.opened(kind, raw[kind]) if event["ok"] else None
        if op in ("H5Dcreate", "H5Dopen"):
            where = symbols.location(raw.get("loc"))
            file = where["file"] if "file" in where else symbols.dset_file.get(where["dset"])
            event["file"] = file
            if event[kind] is not None:
                symbols.dset_file[event[kind]] = file
        elif op == "H5Acreate":
            event.update(symbols.location(raw.get("loc")))
        if op in ("H5Fcreate", "H5Fopen", "MPI_File_open", "open") and workdir:
            for key in ("name", "path"):
                value = event.get(key)
                if isinstance(value, str) and (value == workdir or value.startswith(workdir + os.sep)):
                    event[key] = WORKDIR + value[len(workdir):]
    elif op in _CLOSES:
        kind = _CLOSES[op]
        event[kind] = symbols.get(kind, raw.get(kind), op)
        symbols.closed(kind, raw.get(kind))
    elif op == "H5Fflush":
        event.update(symbols.location(raw.get("obj")))
        event.pop("on_group", None)
    else:
        for kind in ("dset", "attr", "fh", "fd"):
            if kind in raw:
                event[kind] = symbols.get(kind, raw[kind], op)
    return event


def read_raw(prefix: str | os.PathLike, workdir: str | os.PathLike | None = None) -> Trace:
    """The trace of a run recorded with ``IOBO_PRELOAD_TRACE=prefix`` (every rank's
    ``<prefix>.<rank>.trace.jsonl``), symbolic, with its paths relative to ``workdir`` (default: the directory the
    program wrote its files into) and folded.

    POSIX opens of files never read, written or synced (MPI's shared-memory files) are left out.
    Gaps: ``gap_s`` of an event is the time from the previous outermost call's return (the first: from the shim's
    load) to its entry, 0 below :data:`GAP_FLOOR_S`.
    """
    files = raw_files(prefix)
    if not files:
        raise ConfigError(f"no raw trace {os.fspath(prefix)}.<rank>.trace.jsonl: run the program with the shim "
                          f"preloaded and IOBO_PRELOAD_TRACE={os.path.abspath(os.fspath(prefix))}")
    loaded = {rank: _read_lines(path) for rank, path in files.items()}
    headers = [header for header, _, _ in loaded.values()]
    ranks = max(header["ranks"] for header in headers)
    for rank, (header, events, end) in loaded.items():
        unused = _unused_opens(events)
        loaded[rank] = (header, [e for i, e in enumerate(events) if i not in unused], end)
    opens = [e for _, events, _ in loaded.values() for e in events if e["op"] in ("H5Fcreate", "H5Fopen",
                                                                                 "MPI_File_open", "open")]
    base = os.path.abspath(os.fspath(workdir)) if workdir is not None else _workdir(opens)
    notes: list[str] = []
    missing = [rank for rank in range(ranks) if rank not in loaded]
    if missing:
        notes.append(f"ranks {missing} of {ranks} wrote no trace (no MPI, HDF5 or file I/O seen, or they ended "
                     f"before writing it): they replay no I/O")
    if any(header.get("hdf5_linked") == "static" for header in headers):
        notes.append("the program links HDF5 statically: its HDF5 calls were not recorded, only the MPI-IO and POSIX "
                     "calls HDF5 made (relink it with the shared libhdf5, e.g. h5pcc -shlib, to record them)")
    per_rank, tails = [], []
    for rank in range(ranks):
        header, raw_events, end = loaded.get(rank, ({}, [], {"t0": 0.0}))
        if rank in loaded and end is None:
            notes.append(f"rank {rank}'s trace has no end line: the program ended before MPI_Finalize or exit, "
                         f"calls after the last line written are missing")
        elif end is not None and end.get("dropped"):
            notes.append(f"rank {rank}: {end['dropped']} calls were seen but not written to the trace")
        for what in (end or {}).get("unwrapped", []):
            sentence = f"not recorded: {what}"
            if sentence not in notes:
                notes.append(sentence)
        symbols, events, previous = _Symbols(), [], 0.0
        for raw in raw_events:
            gap = raw["t0"] - previous
            event = _symbolic(raw, symbols, base)
            event["gap_s"] = round(gap, 6) if gap >= GAP_FLOOR_S else 0.0
            events.append(event)
            previous = raw["t1"]
        tail = (end or {}).get("t0", previous) - previous
        tails.append(round(tail, 6) if tail >= GAP_FLOOR_S else 0.0)
        for op, count in sorted(symbols.unknown.items()):
            notes.append(f"rank {rank}: {count} {op} call(s) on a handle no recorded open produced (opened before the "
                         f"shim loaded or by an unwrapped call): not replayed")
        per_rank.append(events)
    outside = sorted({e["path"] for e in opens if e.get("path") and not (
        base and (e["path"] == base or e["path"].startswith(base + os.sep)))})
    first = headers[0]
    return Trace.from_events(per_rank, program=first.get("program"), argv=first.get("argv", []), cwd=first.get("cwd"),
                             workdir=base, outside=outside, not_recorded=notes + list(NEVER_RECORDED),
                             tail_gap_s=tails)

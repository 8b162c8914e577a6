"""The replay trace: every rank's I/O events, symbolic and folded, saved as one JSON file.

Events (what :meth:`Trace.expand` gives back) are dicts with ``op`` (the C
call's name as the shim wrote it), its arguments, ``ok`` and ``gap_s``. The
program's handles are replaced by symbols, numbered per rank in the order of
the opens that produced them (a program reuses a closed handle's value):
``file`` (the k-th HDF5 file opened), ``dset`` (the k-th dataset created or
opened), ``attr``, ``fh`` (the k-th MPI-IO open), ``fd`` (the k-th POSIX
open); None for a handle no recorded open produced. Where a call names a
location, it is resolved: ``H5Dcreate``/``H5Dopen`` carry ``file``;
``H5Acreate`` carries ``file`` or ``dset`` (``on_group`` True when it was an
HDF5 group, which the shim does not record: replayed on the file's root);
``H5Fflush`` carries ``file`` or ``dset``. Paths under the directory the
program wrote into start with ``{workdir}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError
from iobo.replay._compress import GAP, Repeat, compress, expand, item_from_json

TRACE_FORMAT = "iobo-replay-trace"
TRACE_VERSION = 1
WORKDIR = "{workdir}"
OPEN_OPS = ("H5Fcreate", "H5Fopen", "MPI_File_open", "open")
"""The calls that name a file by path (``name`` as given, ``path`` absolute)."""
_MPI_WRITE_MODES = 1 | 4 | 8  # MPICH's MPI_MODE_CREATE, MPI_MODE_WRONLY, MPI_MODE_RDWR
_H5F_ACC_RDWR = 1
GAP_FLOOR_S = 1e-3
"""Gaps between two I/O calls shorter than this (seconds) are the program's own overhead between calls (a loop,
a hyperslab computed, a barrier on an idle machine), not computation: they are stored as 0. A replay's own Python
overhead between calls is of that order too, so replaying them would count it twice."""


@dataclass
class Trace:
    """A program's I/O, per rank, as replayable events (folded: :mod:`iobo.replay._compress`)."""

    ranks: int
    events: list[list]  # per rank: folded items
    program: str | None = None
    argv: list[str] = field(default_factory=list)
    cwd: str | None = None
    workdir: str | None = None  # the directory the program wrote into (now {workdir}), None if none
    outside: list[str] = field(default_factory=list)  # files it used elsewhere, absolute
    not_recorded: list[str] = field(default_factory=list)
    tail_gap_s: list[float] = field(default_factory=list)  # per rank: from the last call to the end
    metadata: dict[str, Any] = field(default_factory=dict)
    """About the recording run (``iobo record``, :func:`iobo.replay.record`): ``command`` (argv), ``cwd``,
    ``ranks``, ``wall_s`` (the job's wall time, seconds), ``io_s`` (the slowest rank's seconds in I/O phases),
    ``recorded_at`` (ISO 8601) and ``signature`` (:func:`iobo.replay.signature.signature` of its shim report)."""

    @classmethod
    def from_events(cls, per_rank: list[list[dict[str, Any]]], **fields: Any) -> "Trace":
        """A trace of per-rank event lists (folded here)."""
        return cls(ranks=len(per_rank), events=[compress(events) for events in per_rank], **fields)

    def expand(self, rank: int, steps: int | None = None, workdir: str | os.PathLike | None = None
               ) -> list[dict[str, Any]]:
        """Rank ``rank``'s events in order; with ``steps``, the first ``steps`` of the N repetitions of each
        top-level repeated block; with ``workdir``, ``{workdir}`` in paths replaced by it."""
        if not 0 <= rank < self.ranks:
            raise ConfigError(f"rank {rank} is not in the trace: it has ranks 0 to {self.ranks - 1}")
        if steps is not None and (mismatch := self.steps_mismatch()):
            raise ConfigError(mismatch)
        events = expand(self.events[rank], steps)
        if workdir is not None:
            for event in events:
                if event["op"] in OPEN_OPS:
                    for key in ("name", "path"):
                        if isinstance(event.get(key), str):
                            event[key] = event[key].replace(WORKDIR, os.fspath(workdir))
        return events

    def steps_mismatch(self) -> str | None:
        """Why replaying K of each repeated block would cut the ranks differently, or None when it would not.

        Each rank's events fold on their own; when the ranks' top-level blocks differ (in number, order,
        counts or lengths), keeping the first K repetitions of each keeps different calls on different ranks,
        and a collective call (``H5Fcreate``, ``MPI_File_open``) made by one rank and not the others fails or
        hangs."""
        shapes = [[(item.count, len(item.body)) if isinstance(item, Repeat) else None for item in items]
                  for items in self.events]
        differing = [rank for rank, shape in enumerate(shapes) if shape != shapes[0]]
        if not differing:
            return None
        def folds(rank: int) -> str:  # the first blocks, as N repetitions x items in the block
            blocks = [f"{n}x{size}" for n, size in filter(None, shapes[rank])]
            return " ".join(blocks[:6]) + (f" ... ({len(blocks)} in all)" if len(blocks) > 6 else "")

        return (f"--steps cuts each rank's repeated blocks on their own, and this trace's ranks repeat differently "
                f"(rank 0: {len(shapes[0])} top-level items, blocks {folds(0)}; rank {differing[0]}: "
                f"{len(shapes[differing[0]])} items, blocks {folds(differing[0])}), so the ranks would replay "
                f"different collective calls; replay every repetition (no --steps)")

    def repeats(self, rank: int) -> list[int]:
        """The counts N of rank ``rank``'s top-level repeated blocks, in order."""
        return [item.count for item in self.events[rank] if isinstance(item, Repeat)]

    def folds(self) -> list[tuple[int, int]]:
        """The distinct (N, items in its block) of every rank's top-level repeated blocks, sorted."""
        return sorted({(item.count, len(item.body)) for items in self.events for item in items
                       if isinstance(item, Repeat)})

    def to_json(self) -> dict[str, Any]:
        return {"format": TRACE_FORMAT, "version": TRACE_VERSION, "ranks": self.ranks, "program": self.program,
                "argv": self.argv, "cwd": self.cwd, "workdir": self.workdir, "outside": self.outside,
                "not_recorded": self.not_recorded, "gap_floor_s": GAP_FLOOR_S, "tail_gap_s": self.tail_gap_s,
                "metadata": self.metadata, "events": [[item.to_json() for item in items] for items in self.events]}

    def save(self, path: str | os.PathLike) -> None:
        """Write the trace as one JSON file."""
        Path(path).write_text(json.dumps(self.to_json(), separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Trace":
        """Read a trace :meth:`save` wrote; :class:`ConfigError` for anything else."""
        try:
            data = json.loads(_mapped(path))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"the replay trace {path} must be a JSON file saved by Trace.save; cannot read it: "
                              f"{exc}") from exc
        if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT or data.get("version") != TRACE_VERSION:
            seen = (data.get("format"), data.get("version")) if isinstance(data, dict) else None
            raise ConfigError(f"{path} is not a replay trace of format {TRACE_FORMAT!r} version {TRACE_VERSION} "
                              f"(format, version seen: {seen}); make it with iobo.replay.read_raw(PREFIX).save(PATH)")
        try:
            trace = cls(ranks=data["ranks"],
                        events=[[item_from_json(item) for item in items] for items in data["events"]],
                        program=data.get("program"), argv=data.get("argv", []), cwd=data.get("cwd"),
                        workdir=data.get("workdir"), outside=data.get("outside", []),
                        not_recorded=data.get("not_recorded", []), tail_gap_s=data.get("tail_gap_s", []),
                        metadata=data.get("metadata", {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"the replay trace {path} is damaged ({type(exc).__name__}: {exc}): record it again "
                              f"(iobo record)") from None
        if not isinstance(trace.ranks, int) or trace.ranks < 1 or len(trace.events) != trace.ranks:
            raise ConfigError(f"the replay trace {path} is damaged: it says {trace.ranks!r} ranks and holds events "
                              f"of {len(trace.events)}; record it again (iobo record)")
        return trace


def _mapped(path: str | os.PathLike) -> bytes:
    """A file's bytes read through mmap, which the shim does not trace or count: a replay reading its own trace
    does no I/O its signature would show (the program never read it)."""
    import mmap

    with open(path, "rb") as stream:
        if os.fstat(stream.fileno()).st_size == 0:
            return b""
        with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return bytes(mapped)


def event_bytes(event: dict[str, Any]) -> int:
    """Bytes an event moves (0 for opens, closes, syncs and failed calls)."""
    return int(event.get("bytes") or 0) if event.get("ok", True) else 0


def without_gap(event: dict[str, Any]) -> dict[str, Any]:
    """The event's op and arguments (``gap_s`` left out)."""
    return {k: v for k, v in event.items() if k != GAP}


def opens_for_writing(event: dict[str, Any]) -> bool:
    """Whether an open event (:data:`OPEN_OPS`) opens its file for writing (flags and modes as on this platform:
    Linux, MPICH, HDF5 1.10)."""
    op, flags = event["op"], event.get("flags") or 0
    if op == "H5Fcreate":
        return True
    if op == "H5Fopen":
        return bool(flags & _H5F_ACC_RDWR)
    if op == "MPI_File_open":
        return bool((event.get("amode") or 0) & _MPI_WRITE_MODES)
    return op == "open" and (flags & os.O_ACCMODE) != os.O_RDONLY

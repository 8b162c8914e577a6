"""Hand-made raw traces in the shim's format (iobo.replay.RAW_FORMAT), written from symbolic events.

A test describes each rank's I/O as the events :meth:`iobo.replay.Trace.expand`
should give back (symbols: the k-th file, dataset, attribute, MPI-IO open,
POSIX open; ``{workdir}`` in paths) and :func:`write_raw` writes what the
shim would have: real-looking handles, reused after a close as HDF5 and the
kernel reuse them, absolute paths, ``loc``/``obj`` handles, times. So the
expected result of reading the trace back is the description itself, made
independently of the reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HID_BASE = {"file": 72057594037927936, "dset": 360287970189639680, "attr": 504403158265495552}
OPENS = {"H5Fcreate": "file", "H5Fopen": "file", "H5Dcreate": "dset", "H5Dopen": "dset", "H5Acreate": "attr",
         "MPI_File_open": "fh", "open": "fd"}
CLOSES = {"H5Fclose": "file", "H5Dclose": "dset", "H5Aclose": "attr", "MPI_File_close": "fh", "close": "fd"}


class _Handles:
    """Symbol -> handle, the lowest free handle given at each open (so values are reused after closes)."""

    def __init__(self) -> None:
        self.live: dict[str, dict[int, int]] = {kind: {} for kind in ("file", "dset", "attr", "fh", "fd")}
        self.fh_opens = 0

    def open(self, kind: str, symbol: int) -> int:
        if kind == "fh":  # the index of the MPI_File's open: never reused
            handle = self.fh_opens
            self.fh_opens += 1
        else:
            used = set(self.live[kind].values())
            handle = next(h for h in ((HID_BASE[kind] + i) if kind in HID_BASE else 3 + i for i in range(10**6))
                          if h not in used)
        self.live[kind][symbol] = handle
        return handle

    def close(self, kind: str, symbol: int) -> int:
        return self.live[kind].pop(symbol)


def raw_events(events: list[dict[str, Any]], workdir: Path, start: float = 0.5,
               call_s: float = 1e-4) -> list[dict[str, Any]]:
    """The raw lines of one rank for symbolic ``events`` (each may carry ``gap_s``, the time before it)."""
    handles, clock, out = _Handles(), start, []
    for symbolic in events:
        event = {k: v for k, v in symbolic.items() if k != "gap_s"}
        op = event["op"]
        for key in ("name", "path"):
            if op in OPENS and isinstance(event.get(key), str):
                event[key] = event[key].replace("{workdir}", str(workdir))
        if op in OPENS:
            kind = OPENS[op]
            if op in ("H5Dcreate", "H5Dopen"):
                event["loc"] = handles.live["file"][event.pop("file")]
            if op == "H5Acreate":
                where = "dset" if "dset" in event else "file"
                event["loc"] = handles.live[where][event.pop(where)]
            event[kind] = handles.open(kind, event[kind])
        elif op in CLOSES:
            kind = CLOSES[op]
            event[kind] = handles.close(kind, event[kind])
        elif op == "H5Fflush":
            where = "dset" if "dset" in event else "file"
            event["obj"] = handles.live[where][event.pop(where)]
        else:
            for kind in ("dset", "attr", "fh", "fd"):
                if kind in event:
                    event[kind] = handles.live[kind][event[kind]]
        clock += symbolic.get("gap_s", 0.0)
        event["t0"], event["t1"] = clock, clock + call_s
        clock += call_s
        out.append(event)
    return out


def write_raw(prefix: Path, per_rank: list[list[dict[str, Any]]], workdir: Path, hdf5_linked: str = "dynamic",
              unwrapped: tuple[str, ...] = (), end: bool = True) -> None:
    """Write ``prefix.<rank>.trace.jsonl`` for every rank of ``per_rank`` (symbolic events, see the module)."""
    for rank, events in enumerate(per_rank):
        lines = raw_events(events, workdir)
        header = {"format": "iobo-trace", "version": 1, "rank": rank, "ranks": len(per_rank),
                  "program": "/abs/app", "argv": ["./app", str(workdir)], "cwd": str(workdir.parent),
                  "hdf5_linked": hdf5_linked}
        text = [json.dumps(header)] + [json.dumps(line) for line in lines]
        if end:
            last = lines[-1]["t1"] if lines else 0.0
            text.append(json.dumps({"op": "end", "t0": last + 0.25, "t1": last + 0.25, "events": len(lines),
                                    "dropped": 0, "unwrapped": list(unwrapped)}))
        Path(f"{prefix}.{rank}.trace.jsonl").write_text("\n".join(text) + "\n")


def checkpoint_steps(rank: int, ranks: int, steps: int, slabs: int = 8, rows: int = 16, cols: int = 1024,
                     compute_s: float = 0.05, chunked: bool = False, collective: bool = True,
                     itemsize: int = 8, first: int = 0) -> list[dict[str, Any]]:
    """A checkpointing program's events on one rank: per step, ``ck.<step>.h5`` created on the MPI-IO driver, one
    dataset of ranks x rows rows, ``slabs`` hyperslab writes of this rank's rows, dataset and file closed.
    ``first``: the symbol of the first step's file and dataset (the number of files and datasets opened before)."""
    events = []
    per = rows // slabs
    for step in range(steps):
        symbol = first + step
        events.append({"op": "H5Fcreate", "file": symbol, "name": f"{{workdir}}/ck.{symbol}.h5",
                       "path": f"{{workdir}}/ck.{symbol}.h5", "flags": 2, "mpio": True, "procs": ranks, "ok": True,
                       "gap_s": compute_s})
        events.append({"op": "H5Dcreate", "dset": symbol, "file": symbol, "name": "/fields/temperature",
                       "type": {"class": "float", "size": itemsize}, "dims": [ranks * rows, cols],
                       "maxdims": [ranks * rows, cols], "layout": "chunked" if chunked else "contiguous",
                       "chunk": [per, cols] if chunked else None,
                       "filters": [{"id": 1, "name": "deflate", "values": [4]}] if chunked else [],
                       "api": "2", "ok": True})
        for slab in range(slabs):
            events.append({"op": "H5Dwrite", "dset": symbol, "bytes": per * cols * itemsize,
                           "sel": {"kind": "hyperslab", "start": [rank * rows + slab * per, 0], "stride": [1, 1],
                                   "count": [1, 1], "block": [per, cols]},
                           "xfer": "collective" if collective else "independent", "ok": True})
        events.append({"op": "H5Dclose", "dset": symbol, "ok": True})
        events.append({"op": "H5Fclose", "file": symbol, "ok": True})
    return events

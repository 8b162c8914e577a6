"""A run's I/O signature, read off the shim's report, and a kernel's compared with its program's.

:func:`signature` takes what :func:`iobo.adapters.read_report` returns and
keeps what a faithful kernel must reproduce: per level (HDF5, MPI-IO, POSIX)
and direction the bytes, the calls and the request-size histogram, the files
used, the MPI-IO collective share, the datasets with their layouts and the
transfer modes HDF5 used. :func:`compare` sets a kernel's against a program's
row by row with relative errors (a kernel that replayed K of N steps is
compared with its extensive rows, bytes and counts, multiplied by ``scale``);
:func:`render` prints the rows as a table.

POSIX bytes are those the calls asked for (the report's ``requested``), not
those they returned: a read at a file's end returns only what the file holds
by then, which depends on the ranks' timing (ROMIO's read-modify-write in a
collective write reads regions another rank may not have written yet: the
same program returned 9.2 to 15.5 MB of 62 identical reads over four runs).

The levels nest (an H5Dwrite ends in MPI-IO and POSIX calls), so each level's
rows hold every call at that level, the library's own included. A replay run
by Python reads its interpreter's modules through POSIX ``read``: its POSIX
read rows hold those reads too, not the program's alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from iobo.adapters import DIRECTIONS, LEVELS

SIGNATURE_VERSION = 1


def signature(report: Mapping[str, Any]) -> dict[str, Any]:
    """The I/O signature of one run from its merged shim report (:func:`iobo.adapters.read_report`)."""
    levels = {}
    for level in LEVELS:
        entry: dict[str, Any] = {"files": report["levels"][level]["files_opened"]}
        for direction in DIRECTIONS:
            part = report["levels"][level][direction]
            entry[direction] = {"bytes": part.get("requested", part["bytes"]), "calls": part["calls"],
                                "histogram": {int(k): v for k, v in part["histogram"].items()}}
        levels[level] = entry
    mpiio = report["levels"]["mpiio"]
    collective = {}
    for direction in DIRECTIONS:
        calls = mpiio[direction]["collective_calls"] + mpiio[direction]["independent_calls"]
        collective[direction] = mpiio[direction]["collective_calls"] / calls if calls else None
    effective = report["effective"]
    return {
        "version": SIGNATURE_VERSION,
        "ranks": report["ranks"],
        "top_level": report["level"],
        "levels": levels,
        "collective_share": collective,
        "files": {level: len(effective["files"][level]) for level in ("hdf5", "mpiio")},
        "datasets": {name: {"layout": d.get("layout"), "chunk": d.get("chunk")}
                     for name, d in sorted(effective["datasets"].items())},
        "transfer_modes": {direction: dict(sorted(effective["transfer"][direction]["modes"].items()))
                           for direction in DIRECTIONS},
    }


def relative_error(program: float | None, kernel: float | None) -> float | None:
    """|kernel - program| / |program|; 0 when both are 0, inf when only the program's is 0, None when either is
    missing."""
    if program is None or kernel is None:
        return None
    if program == 0:
        return 0.0 if kernel == 0 else math.inf
    return abs(kernel - program) / abs(program)


def _row(what: str, program: Any, kernel: Any, error: float | None) -> dict[str, Any]:
    return {"what": what, "program": program, "kernel": kernel, "error": error}


def compare(program: Mapping[str, Any], kernel: Mapping[str, Any], scale: float = 1.0) -> list[dict[str, Any]]:
    """Rows ``{what, program, kernel, error}``: the kernel's extensive values (bytes, calls, histogram counts,
    files, transfer modes) multiplied by ``scale`` (the N/K of a reduced replay), relative errors for numbers, 0 or
    1 for a dataset's layout (same or not)."""
    rows = []
    for level in LEVELS:
        p_level, k_level = program["levels"][level], kernel["levels"][level]
        for direction in DIRECTIONS:
            p, k = p_level[direction], k_level[direction]
            if not (p["calls"] or k["calls"]):
                continue
            for key in ("bytes", "calls"):
                rows.append(_row(f"{level} {direction} {key}", p[key], k[key] * scale,
                                 relative_error(p[key], k[key] * scale)))
            for lower in sorted(set(p["histogram"]) | set(k["histogram"])):
                pc, kc = p["histogram"].get(lower, 0), k["histogram"].get(lower, 0) * scale
                rows.append(_row(f"{level} {direction} requests >= {lower} B", pc, kc, relative_error(pc, kc)))
        rows.append(_row(f"{level} files", p_level["files"], k_level["files"] * scale,
                         relative_error(p_level["files"], k_level["files"] * scale)))
    for direction in DIRECTIONS:
        p, k = program["collective_share"][direction], kernel["collective_share"][direction]
        if p is not None or k is not None:
            rows.append(_row(f"mpiio {direction} collective share", p, k,
                             None if p is None or k is None else abs(k - p)))
        modes = sorted(set(program["transfer_modes"][direction]) | set(kernel["transfer_modes"][direction]))
        for mode in modes:
            pc = program["transfer_modes"][direction].get(mode, 0)
            kc = kernel["transfer_modes"][direction].get(mode, 0) * scale
            rows.append(_row(f"hdf5 {direction} transfers {mode}", pc, kc, relative_error(pc, kc)))
    for name in sorted(set(program["datasets"]) | set(kernel["datasets"])):
        p, k = program["datasets"].get(name), kernel["datasets"].get(name)
        rows.append(_row(f"dataset {name}", _layout(p), _layout(k), 0.0 if p == k else 1.0))
    return rows


def _layout(dataset: Mapping[str, Any] | None) -> str:
    if dataset is None:
        return "absent"
    chunk = dataset.get("chunk")
    return f"{dataset['layout']} {'x'.join(map(str, chunk))}" if chunk else str(dataset["layout"])


def _text(value: Any) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return "-" if value is None else str(value)


def render(rows: list[dict[str, Any]]) -> str:
    """The rows as a text table: what, program, kernel, relative error (in %)."""
    table = [("", "program", "kernel", "error")]
    for row in rows:
        error = row["error"]
        shown = "-" if error is None else "inf" if math.isinf(error) else f"{100 * error:.3g}%"
        table.append((row["what"], _text(row["program"]), _text(row["kernel"]), shown))
    widths = [max(len(line[i]) for line in table) for i in range(4)]
    return "\n".join(f"{a:<{widths[0]}}  {b:>{widths[1]}}  {c:>{widths[2]}}  {d:>{widths[3]}}"
                     for a, b, c, d in table)

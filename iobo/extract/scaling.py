"""A reduced kernel's I/O counts scaled back to the program's (``--reduce-loops k``, :mod:`iobo.extract.loops`).

Each process of the kernel writes at exit how many times each gate group was
reached and how many of those it ran (:func:`read_counts`). Two estimates:

- :func:`scale`: reached over run, summed over the groups and the ranks; the
  kernel's counts times it stand for the program's
  (:func:`iobo.replay.signature.compare`'s ``scale``). Exact when all of the
  I/O is in the gated groups and each run of a group does the same I/O; I/O
  outside them (a file opened before the loop, a log written after it) comes
  out that factor too large.
- :func:`extrapolate`: each count is taken as ``U + sum(g_i * runs_i)``
  (``U`` the I/O outside the groups, ``g_i`` one run of group i's). From the
  run with 1 in k and, per group that skipped runs, one more run where that
  group alone makes another number of runs (its first only,
  :data:`FIRST_ONLY`, or when that is as many, all), each ``g_i`` is solved
  and the count taken at the runs reached. Exact for I/O outside the groups
  too, and for groups of different sizes, when each run of a group does the
  same I/O.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FIRST_ONLY = 1 << 40
"""A group's reduction in its own run of :func:`extrapolate`: it runs its first time only (on each rank)."""


def read_counts(directory: str | os.PathLike) -> dict[str, dict[str, int]]:
    """The gate counts the kernel's processes wrote into ``directory``, summed over them: ``{"file.c:LINE":
    {"executed": reached, "kept": run}}`` (empty when none were written)."""
    total: dict[str, dict[str, int]] = {}
    for path in sorted(Path(directory).glob("loops.*.json")):
        for loop in json.loads(path.read_text())["loops"]:
            entry = total.setdefault(loop["where"], {"gate": loop.get("gate"), "executed": 0, "kept": 0})
            entry["executed"] += loop["executed"]
            entry["kept"] += loop["kept"]
    return total


def totals(counts: Mapping[str, Mapping[str, int]]) -> tuple[int, int]:
    """(runs reached, runs made) over every group and rank."""
    return sum(c["executed"] for c in counts.values()), sum(c["kept"] for c in counts.values())


def scale(counts: Mapping[str, Mapping[str, int]]) -> float:
    """Runs reached over runs made (1 when no group was reached)."""
    reached, made = totals(counts)
    return reached / made if made else 1.0


def _extensive(sig: Mapping[str, Any], value) -> dict[str, Any]:
    """``sig`` with every count (bytes, calls, histogram counts, files, transfer modes) replaced by
    ``value(path, count)``."""
    out = json.loads(json.dumps(sig))  # a deep copy (histogram keys become strings: put back below)
    for level, entry in sig["levels"].items():
        out["levels"][level]["files"] = value(("levels", level, "files"), entry["files"])
        for direction in ("write", "read"):
            part = entry[direction]
            target = out["levels"][level][direction]
            for key in ("bytes", "calls"):
                target[key] = value(("levels", level, direction, key), part[key])
            target["histogram"] = {lower: value(("levels", level, direction, "histogram", lower), count)
                                   for lower, count in part["histogram"].items()}
    for direction, modes in sig["transfer_modes"].items():
        out["transfer_modes"][direction] = {mode: value(("transfer_modes", direction, mode), count)
                                            for mode, count in modes.items()}
    return out


def _get(sig: Mapping[str, Any], path: tuple) -> float:
    node: Any = sig
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return 0
        node = node[key]
    return node


def extrapolate(reduced: Mapping[str, Any], counts: Mapping[str, Mapping[str, int]],
                apart: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Mapping[str, int]]]]
                ) -> tuple[dict[str, Any], str]:
    """The program's signature estimated from the kernel's with 1 in k (``reduced``, its gate counts ``counts``)
    and, per gate that skipped runs (``counts``' key), the signature and counts of a run where that gate alone
    made another number of runs (``apart``); and how, in words. A gate's run that reached it another number of
    times, or made as many runs, leaves the reduced run times :func:`scale`."""
    terms = []
    for where, count in counts.items():
        reached, made = count["executed"], count["kept"]
        if reached == made:
            continue
        if where not in apart:
            raise ValueError(f"no run with gate {where} apart")
        other, other_counts = apart[where]
        other_count = other_counts.get(where, {"executed": 0, "kept": 0})
        if other_count["executed"] != reached or other_count["kept"] == made:
            factor = scale(counts)
            return (_extensive(reduced, lambda path, value: value * factor),
                    f"x {factor:.6g} (reached / run: gate {where}'s own run reached it {other_count['executed']} "
                    f"times and ran it {other_count['kept']}, so its I/O is not told from the rest)")
        terms.append((other, (reached - made) / (made - other_count["kept"])))
    if not terms:
        return dict(reduced), "nothing was skipped: the counts as run"

    def estimate(path, value):
        return value + sum((value - _get(other, path)) * slope for other, slope in terms)

    gates = ", ".join(f"{where}: {c['kept']} of {c['executed']}" for where, c in counts.items())
    return (_extensive(reduced, estimate),
            f"extrapolated per gate from runs with another number of its runs ({gates} run; the I/O outside the "
            f"gates counted once)")

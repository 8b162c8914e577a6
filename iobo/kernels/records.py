"""What a kernel prints: JSON lines on rank 0's stdout, one per step and one final result.

Units: bytes, seconds, and MB/s by :func:`iobo.measure.bandwidth_mb_per_s`
(bytes / seconds / 10**6, as IOR and h5bench report).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from time import perf_counter
from typing import Any

from iobo.kernels.timing import RepeatTiming
from iobo.measure import bandwidth_mb_per_s, mixed_objective

PhaseRun = tuple[int, Sequence[RepeatTiming]]
"""A phase as run: (bytes per repeat over all ranks, one timing per repeat)."""


def emit(comm, record: Mapping[str, Any]) -> None:
    """Print ``record`` as one JSON line on rank 0's stdout, flushed."""
    if comm.rank == 0:
        print(json.dumps(record), flush=True)


def step_emitter(comm, repeat: int, step_bytes: int, phase: str | None = None,
                 first_step: int = 0) -> Callable[[int, float], None]:
    """An ``on_step`` for :func:`iobo.kernels.timing.timed_phase` printing ``{"event": "step", ...}`` as each step ends.

    step_bytes: bytes of one step over all ranks; phase (``write`` or
    ``read``), when given, is added to each line; steps are numbered from
    ``first_step``, so that a read phase after a write phase of T steps
    continues at T within the repeat.  Each line also carries ``elapsed_s``:
    rank 0's seconds from this emitter's making (just before the timed
    phase) to the step's end, untimed work between steps included, so what a
    run stopped after a step skips can be told from its step lines.
    """
    started = perf_counter()

    def emit_step(index: int, seconds: float) -> None:
        line = {"event": "step", "step": first_step + index, "repeat": repeat, "bytes": step_bytes,
                "seconds": seconds, "mb_per_s": bandwidth_mb_per_s(step_bytes, seconds),
                "elapsed_s": perf_counter() - started}
        emit(comm, line if phase is None else {**line, "phase": phase})

    return emit_step


def phase_summary(nbytes: int, timings: Sequence[RepeatTiming]) -> dict[str, Any]:
    """Bytes, median seconds and MB/s, per-repeat MB/s, median open and close seconds of one phase."""
    rates = [bandwidth_mb_per_s(nbytes, t.seconds) for t in timings]
    return {
        "bytes": nbytes,
        "seconds": statistics.median(t.seconds for t in timings),
        "mb_per_s": statistics.median(rates),
        "repeats_mb_per_s": rates,
        "open_seconds": statistics.median(t.open_seconds for t in timings),
        "close_seconds": statistics.median(t.close_seconds for t in timings),
    }


def result_record(kernel: str, ranks: int, written: PhaseRun | None, read: PhaseRun | None,
                  **fields: Any) -> dict[str, Any]:
    """The final ``{"event": "result", ...}`` record of a kernel that writes, reads, or both.

    written, read: the phases run (``None`` for a phase not run).
    ``mb_per_s``, what the tuner maximises, is the write bandwidth, the read
    bandwidth, or for both TunIO's objective ``(1 - a) * BW_read + a *
    BW_write`` with ``a`` = share of bytes written, computed per repeat,
    median over repeats. ``bytes`` = bytes moved per repeat; ``seconds`` =
    median of write + read seconds. Each phase's own figures are under
    ``write`` and ``read``; ``fields`` (effective, hints, not_applied, files,
    ...) follow.
    """
    phases_run = {name: phase for name, phase in (("write", written), ("read", read)) if phase is not None}
    repeats = len(next(iter(phases_run.values()))[1])
    rates = {name: [bandwidth_mb_per_s(nbytes, t.seconds) for t in timings]
             for name, (nbytes, timings) in phases_run.items()}
    bytes_written, bytes_read = (written or (0, ()))[0], (read or (0, ()))[0]
    if len(rates) == 2:
        objective = [mixed_objective(r, w, bytes_read, bytes_written) for r, w in zip(rates["read"], rates["write"])]
    else:
        objective = next(iter(rates.values()))
    seconds = [sum(timings[i].seconds for _, timings in phases_run.values()) for i in range(repeats)]
    return {
        "event": "result",
        "kernel": kernel,
        "ranks": ranks,
        "bytes": bytes_written + bytes_read,
        "bytes_written": bytes_written,
        "bytes_read": bytes_read,
        "seconds": statistics.median(seconds),
        "mb_per_s": statistics.median(objective),
        "repeats_mb_per_s": objective,
        "objective": "mixed" if len(rates) == 2 else next(iter(rates)),
        **{name: phase_summary(nbytes, timings) for name, (nbytes, timings) in phases_run.items()},
        **fields,
    }

"""Timing a phase as the I/O literature does: barrier, each rank times its open + steps + close,
then the maximum over ranks (seconds)."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any


class Phase(abc.ABC):
    """One repeat of what a kernel times: open (or create), steps of writes or reads, close.

    :func:`timed_phase` calls, on every rank: ``open()``; for each step
    ``prepare(step)`` (untimed) and ``do_step(handle, step)``; ``probe(handle)``
    (untimed); ``close(handle)``.
    """

    @abc.abstractmethod
    def open(self) -> Any:
        """Open (or create) the file(s); returns the handle the other calls get."""

    def prepare(self, step: int) -> None:
        """Untimed work before ``step`` (the application's compute that makes the step's data); none by default."""

    @abc.abstractmethod
    def do_step(self, handle: Any, step: int) -> None:
        """The writes (or reads) of ``step``."""

    @abc.abstractmethod
    def probe(self, handle: Any) -> tuple[dict[str, Any], dict[str, str]]:
        """(settings in effect, MPI-IO hints in effect), read from the open file(s) before the close."""

    @abc.abstractmethod
    def close(self, handle: Any) -> None:
        """Close the file(s) (and flush them to storage when asked)."""


@dataclass(frozen=True)
class RepeatTiming:
    """Seconds of one timed repeat, each the maximum over ranks.

    open_seconds: file create; step_seconds: each step's writes;
    close_seconds: file close, plus fsync when asked; seconds: the whole
    open + writes + close of the slowest rank.
    """

    open_seconds: float
    step_seconds: list[float]
    close_seconds: float
    seconds: float


def max_over_ranks(comm, values: Sequence[float]) -> list[float]:
    """Element-wise maximum of ``values`` over the ranks of ``comm``."""
    import numpy as np
    from mpi4py import MPI

    local = np.asarray(values, dtype=np.float64)
    result = np.empty_like(local)
    comm.Allreduce(local, result, op=MPI.MAX)
    return result.tolist()


def timed_phase(comm, steps: int, phase: Phase,
                on_step: Callable[[int, float], None] | None = None) -> tuple[RepeatTiming, Any]:
    """Time one repeat of ``phase``: open + ``steps`` x do_step + close; returns the timing and the probe.

    ``comm.Barrier()``, then each rank times its own open, steps and close;
    the maxima over ranks are taken afterwards, outside the timed section.
    ``on_step(step, seconds)``, when given, is called on every rank right
    after each step with that step's time, max over ranks (an allreduce
    outside the timed segments, which also lines the ranks up between steps),
    so a step line can be printed while the job runs and a pruner can stop it.
    """
    comm.Barrier()
    start = perf_counter()
    handle = phase.open()
    open_seconds = perf_counter() - start
    step_seconds = []
    for step in range(steps):
        phase.prepare(step)
        start = perf_counter()
        phase.do_step(handle, step)
        step_seconds.append(perf_counter() - start)
        if on_step is not None:
            on_step(step, max_over_ranks(comm, [step_seconds[-1]])[0])
    probed = phase.probe(handle)
    start = perf_counter()
    phase.close(handle)
    close_seconds = perf_counter() - start
    total = open_seconds + sum(step_seconds) + close_seconds
    maxima = max_over_ranks(comm, [open_seconds, *step_seconds, close_seconds, total])
    return RepeatTiming(maxima[0], maxima[1:-2], maxima[-2], maxima[-1]), probed


def run_untimed(phase: Phase, steps: int) -> None:
    """Run ``phase`` (open, ``steps`` x prepare and do_step, close) untimed: an input written, or data read back."""
    handle = phase.open()
    for step in range(steps):
        phase.prepare(step)
        phase.do_step(handle, step)
    phase.close(handle)

"""Running benchmark tasks and counting what they reached.

- :func:`pool_map`: a task over many inputs, in spawned worker processes
  (each with its own interpreter, so every optimizer gets one core);
- :func:`quiet_worker`: what each task does first (torch on one thread,
  Optuna's log quiet);
- :func:`problem_of`: a problem by its spec (``synthetic:NAME``,
  ``table:PATH``, ``wide:PATH``), built once per process;
- :func:`evaluations_to`, :func:`median_iqr`, :data:`LEVELS`: evaluations
  until a target fraction of the best true value, and how they are printed;
- :func:`commit`, :func:`write_report`: a report's first line names the
  commit; the report goes to stdout and, when asked, to a file;
- :func:`seed_list`, :func:`show_seeds`: seeds given and shown as ranges
  (``10-29,60-99``).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.harness import problems

LEVELS = (0.90, 0.95, 0.99)  # fractions of the best true value a run is scored on


def pool_map(task: Callable[[Any], Any], tasks: Sequence[Any], jobs: int) -> Iterator[Any]:
    """``task`` of each of ``tasks``: in this process in order when ``jobs`` is 1, else in ``jobs``
    spawned processes, results in the order they finish (``task`` must be importable: module level)."""
    if jobs == 1:
        yield from map(task, tasks)
        return
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        yield from pool.imap_unordered(task, tasks)


def quiet_worker(optuna_level: str = "WARNING") -> None:
    """Set up a benchmark task: torch on one thread (one core per run, fair to every optimizer) and
    Optuna logging at ``optuna_level`` (``WARNING``, ``ERROR``)."""
    import optuna
    import torch

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(getattr(optuna.logging, optuna_level))


@functools.cache
def problem_of(spec: str) -> problems.Problem:
    """``synthetic:NAME``, ``table:PATH``, or ``wide:PATH`` (the table plus ``problems.INERT``)."""
    kind, _, name = spec.partition(":")
    if kind == "synthetic":
        return problems.synthetic(name)
    table = problems.load_table(name)
    return problems.widen(table) if kind == "wide" else table


def evaluations_to(truths: Iterable[float], target: float, budget: int) -> int:
    """1-based count of evaluations until one reaches ``target``; ``budget + 1`` if none did."""
    for n, value in enumerate(truths, 1):
        if value >= target:
            return n
    return budget + 1


def median_iqr(values: Sequence[float], budget: int) -> str:
    """``median [q1-q3]`` of evaluation counts, ``>budget`` for counts past the budget."""
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    show = lambda v: f">{budget}" if v > budget else f"{v:.0f}" if v == int(v) else f"{v:.1f}"  # noqa: E731
    return f"{show(med)} [{show(q1)}-{show(q3)}]"


def commit() -> str:
    """The checked-out commit, short, plus ``-dirty`` when tracked files outside ``experiments/results/`` have
    uncommitted changes (the script that wrote a report may then differ from the commit's; an earlier run's
    results being written does not change the script); empty outside a git checkout.  For a report's first
    line."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not head:
        return ""
    changes = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
                              ":(top,exclude)experiments/results"], capture_output=True, text=True)
    return head + ("-dirty" if changes.stdout.strip() else "")


def write_report(lines: Sequence[str], out: str | None = None) -> None:
    """Print the report ``lines``; also write them to the file ``out`` when given."""
    text = "\n".join(lines)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


def seed_list(text: str) -> list[int]:
    """Seeds from ranges and single seeds, ``"10-29,60-99"`` or ``"3,5"``: each once, in the order given."""
    seeds: list[int] = []
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()) or (dash and int(last) < int(first)):
            raise argparse.ArgumentTypeError(f"a seed range is N or N-M with M >= N; got {part.strip()!r} in {text!r}")
        seeds += [s for s in range(int(first), int(last or first) + 1) if s not in seeds]
    return seeds


def show_seeds(seeds: list[int]) -> str:
    """``[10, ..., 29, 60, ..., 99]`` as ``"10-29, 60-99"``."""
    spans, start = [], 0
    for i in range(1, len(seeds) + 1):
        if i == len(seeds) or seeds[i] != seeds[i - 1] + 1:
            spans.append(f"{seeds[start]}-{seeds[i - 1]}" if i - 1 > start else f"{seeds[start]}")
            start = i
    return ", ".join(spans)

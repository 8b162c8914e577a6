"""A progress bar for long tuning runs: trials done and in flight, best bandwidth, and RoTI once a confirmation
shows a gain (:attr:`iobo.report.StudyReport.roti`: never from a lucky single run).

:class:`ProgressBar` is a ``TunerCallback`` drawing a tqdm bar on a terminal.
When its output is not a terminal (a batch job's log, a pipe) it prints
nothing at all: the tuner's own lines are the record there.  On a terminal,
give the tuner ``echo=tqdm.write`` so its lines print above the bar.
"""

from __future__ import annotations

import sys
from typing import IO

from iobo.measure import format_mb_per_s
from iobo.tuner import TunerCallback


class ProgressBar(TunerCallback):
    """tqdm bar over one tuning loop; ``file``: where it draws (default: stdout, at run time)."""

    def __init__(self, file: IO[str] | None = None) -> None:
        self.file = file
        self.bar = None

    def loop_started(self, study, asks: int) -> None:
        out = sys.stdout if self.file is None else self.file
        if not out.isatty():
            return
        from tqdm import tqdm

        self.bar = tqdm(total=asks, desc=study.study_name, unit="trial", file=out, dynamic_ncols=True)

    def trial_finished(self, study, trial, running: int) -> None:
        if self.bar is None:
            return
        from iobo.report import build_report

        report = build_report(study)
        status = [f"{running} in flight"]
        if report.best_value is not None:
            status.append(f"best {format_mb_per_s(report.best_value)} MB/s")
        if report.roti is not None:
            status.append(f"RoTI {format_mb_per_s(report.roti)} MB/s/min")
        self.bar.update(1)
        self.bar.set_postfix_str(", ".join(status))  # redraws now: trials are seconds apart

    def loop_finished(self, study) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def console_watchers() -> dict:
    """``Tuner`` keyword arguments for a person watching: a progress bar, dashboard notes,
    and trial lines printed above the bar (plain prints off a terminal)."""
    from iobo.integrations.dashboard import DashboardAnnotator

    echo = print
    if sys.stdout.isatty():
        from tqdm import tqdm

        echo = tqdm.write
    return {"echo": echo, "callbacks": [ProgressBar(), DashboardAnnotator()]}

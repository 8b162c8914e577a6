"""What a study found: default vs best, speedup, RoTI, trial counts.

Figures come from the stored trials only, so a report can be made at any
time, from any machine that reaches the storage.  When the study holds an
interleaved re-measurement (``Tuner.confirm``), the headline default and best
bandwidths and the speedup are taken from it, not from single lucky runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iobo.measure import Spread, roti
from iobo.tuner import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT, ROLE_SEARCH, best_trial


@dataclass(frozen=True)
class StudyReport:
    """Figures of one study; bandwidths in MB/s, times in minutes."""

    study: str
    kernel: str
    ranks: int
    counts: dict[str, int]
    default: Spread | None
    best_value: float | None
    best_number: int | None
    best_config: dict[str, Any]
    confirm_default: Spread | None
    confirm_best: Spread | None
    tuning_minutes: float
    roti_curve: list[tuple[float, float, float]]  # (minutes, best so far MB/s, RoTI MB/s per min)

    @property
    def speedup(self) -> float | None:
        """Best over default median, from the confirmation runs when present."""
        if self.confirm_default and self.confirm_best:
            return self.confirm_best.median / self.confirm_default.median
        if self.default and self.best_value:
            return self.best_value / self.default.median
        return None

    @property
    def roti(self) -> float | None:
        if not self.roti_curve:
            return None
        return self.roti_curve[-1][2]

    @property
    def peak_roti(self) -> tuple[float, float] | None:
        """(RoTI, minutes at which it peaked)."""
        if not self.roti_curve:
            return None
        minutes, _, value = max(self.roti_curve, key=lambda row: row[2])
        return value, minutes

    def text(self) -> str:
        lines = [f"study {self.study!r}: kernel {self.kernel} on {self.ranks} ranks"]
        lines.append("trials: " + ", ".join(f"{n} {state.lower()}" for state, n in self.counts.items() if n))
        if self.default:
            lines.append(f"default (tuning runs):   {self.default.describe()}")
        if self.best_value is not None:
            lines.append(f"best (single run):       {self.best_value:,.0f} MB/s (trial {self.best_number})")
        if self.confirm_default and self.confirm_best:
            lines.append(f"default, re-measured:    {self.confirm_default.describe()}")
            lines.append(f"best, re-measured:       {self.confirm_best.describe()}")
        if self.speedup is not None:
            source = "re-measured medians" if self.confirm_best else "best run over default median"
            lines.append(f"speedup:                 {self.speedup:.2f}x ({source})")
        if self.roti is not None:
            lines.append(
                f"tuning time:             {self.tuning_minutes:.1f} min; "
                f"RoTI {self.roti:,.1f} MB/s per minute of tuning"
            )
            peak, at = self.peak_roti
            lines.append(f"peak RoTI:               {peak:,.1f} MB/s per minute, at {at:.1f} min")
        if self.best_config:
            lines.append("best configuration (changed from default):")
            lines += [f"  {k} = {v}" for k, v in self.best_config.items()] or ["  (none)"]
        return "\n".join(lines)


def build_report(study) -> StudyReport:
    """Collect the figures of ``study`` (an ``optuna.Study``)."""
    from optuna.trial import TrialState

    from iobo import kernels
    from iobo.config import IOConfig

    trials = study.get_trials(deepcopy=False)
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state.name] = counts.get(t.state.name, 0) + 1

    def values(role: str) -> Spread | None:
        got = tuple(t.value for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get("role") == role)
        return Spread(got) if got else None

    kernel = study.user_attrs.get("kernel", "?")
    best = best_trial(study)
    best_config: dict[str, Any] = {}
    if best is not None:
        space = kernels.get(kernel).space() if kernel in kernels.names() else None
        config = best.user_attrs.get("config", best.params)
        best_config = IOConfig(config, space).changed() if space else dict(config)
    default = values(ROLE_DEFAULT)
    curve = _roti_curve(trials, default.median if default else None)
    return StudyReport(
        study=study.study_name,
        kernel=kernel,
        ranks=study.user_attrs.get("ranks", 0),
        counts=counts,
        default=default,
        best_value=best.value if best else None,
        best_number=best.number if best else None,
        best_config=best_config,
        confirm_default=values(ROLE_CONFIRM_DEFAULT),
        confirm_best=values(ROLE_CONFIRM_BEST),
        tuning_minutes=curve[-1][0] if curve else 0.0,
        roti_curve=curve,
    )


def _roti_curve(trials, default_mb_per_s: float | None) -> list[tuple[float, float, float]]:
    """Best-so-far and RoTI after each tuning trial, over minutes since the first started."""
    from optuna.trial import TrialState

    tuning = [
        t for t in trials
        if t.user_attrs.get("role", ROLE_SEARCH) in (ROLE_DEFAULT, ROLE_SEARCH)
        and t.datetime_start is not None and t.datetime_complete is not None
    ]
    if not tuning or default_mb_per_s is None:
        return []
    start = min(t.datetime_start for t in tuning)
    best = 0.0
    curve = []
    for t in sorted(tuning, key=lambda t: t.datetime_complete):
        if t.state == TrialState.COMPLETE:
            best = max(best, t.value)
        minutes = (t.datetime_complete - start).total_seconds() / 60
        curve.append((minutes, best, roti(best, default_mb_per_s, minutes)))
    return curve

"""When to stop tuning: study-level stop rules in place of a fixed number of trials.

A :class:`StopRule` looks at the :class:`Progress` of a study after each
tuning trial and says whether to stop, like Optuna's ``BasePruner`` does for
one trial.  The rules:

- :class:`FixedBudget`: a fixed number of trials (H5Evolve's generations);
- :class:`NoRecentGain`: TunIO's heuristic, no gain of ``min_gain`` (5%) in
  the last ``patience`` (5) trials;
- :class:`MarginalRoTI`: continue while the next trial is expected to earn
  more per minute than tuning has earned so far.  With ``G(t)`` the MB/s
  gained over the default after ``t`` minutes, ``RoTI(t) = G(t) / t`` rises
  exactly while ``G'(t) > RoTI(t)``; the GP's expected improvement of the
  next trial (MB/s) over its cost (minutes) estimates ``G'``, so stopping when
  it falls to ``RoTI(t)`` is a myopic stop at the peak of RoTI.  ``G`` is the
  GP's noise-aware incumbent over the default, not the luckiest run.
- :class:`ExpectedGainBelow`: stop when the next trial is expected to add
  less than a fraction (2%) of the incumbent's bandwidth: a bound on what is
  left to find, as Optuna's terminator bounds regret.  Aims at the final
  bandwidth rather than at RoTI.
- :class:`RoTIPastPeak`: stop once RoTI has not risen for a few trials: the
  last trials earned no more per minute than tuning has so far, seen in the
  measured curve rather than predicted by the GP, after a minimum of trials.

RoTI peaks early when one knob carries most of the gain (here: file per
process, often found by the first search trials), so the rule that maximises
RoTI stops before the best is found; ``experiments/stopping/bench.py``
measures both sides.  Units: bandwidth in MB/s, tuning time in minutes (as
:func:`iobo.measure.roti`).
"""

from __future__ import annotations

import abc
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from iobo import trials
from iobo.errors import ConfigError
from iobo.measure import roti


@dataclass(frozen=True)
class Progress:
    """A study after its latest tuning trial.

    minutes: tuning minutes after each trial (ascending; the time tuning trials ran, pauses left out:
    :func:`iobo.trials.roti_curve`);
    best_mb_per_s: best bandwidth measured after each trial; default_mb_per_s:
    the system default's median; expected_gain_mb_per_s: the surrogate's
    expected improvement of the next trial over the incumbent (None when not
    computed: rules that need it say so with ``needs_gain``);
    incumbent_mb_per_s: the surrogate's noise-aware estimate of the best
    configuration's bandwidth (its posterior mean; None when not computed).
    """

    minutes: Sequence[float]
    best_mb_per_s: Sequence[float]
    default_mb_per_s: float
    expected_gain_mb_per_s: float | None = None
    incumbent_mb_per_s: float | None = None

    @property
    def trials(self) -> int:
        return len(self.minutes)

    @property
    def roti(self) -> float:
        """RoTI now: MB/s gained over the default per minute of tuning."""
        return roti(self.best_mb_per_s[-1], self.default_mb_per_s, self.minutes[-1]) if self.trials else 0.0

    @property
    def noise_aware_roti(self) -> float:
        """RoTI with the surrogate's incumbent in place of the best single run, when known."""
        if self.incumbent_mb_per_s is None or not self.trials:
            return self.roti
        return roti(self.incumbent_mb_per_s, self.default_mb_per_s, self.minutes[-1])

    def gain(self) -> float:
        """The surrogate's expected gain of the next trial (MB/s); a clear error when not computed."""
        if self.expected_gain_mb_per_s is None:
            raise ConfigError(
                "this stop rule needs Progress.expected_gain_mb_per_s (the surrogate's expected improvement "
                "in MB/s); compute it with iobo.surrogate.Surrogate.expected_gain_mb_per_s"
            )
        return self.expected_gain_mb_per_s

    @property
    def minutes_per_trial(self) -> float:
        """Average cost of a trial so far (minutes): the expected cost of the next one."""
        return self.minutes[-1] / self.trials if self.trials else 0.0


class StopRule(abc.ABC):
    """Decides after each tuning trial whether the study should stop."""

    needs_gain: bool = False  # True: Progress.expected_gain_mb_per_s must be given

    @abc.abstractmethod
    def should_stop(self, progress: Progress) -> bool: ...


def _positive_int(rule: str, name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{rule} {name} must be a positive integer; got {value!r}")
    return value


class FixedBudget(StopRule):
    """Stop after ``trials`` tuning trials."""

    def __init__(self, trials: int) -> None:
        self.trials = _positive_int("FixedBudget", "trials", trials)

    def should_stop(self, progress: Progress) -> bool:
        return progress.trials >= self.trials


class NoRecentGain(StopRule):
    """Stop when the best has not grown by ``min_gain`` (a fraction) over the last ``patience`` trials."""

    def __init__(self, patience: int = 5, min_gain: float = 0.05) -> None:
        self.patience = _positive_int("NoRecentGain", "patience", patience)
        if not min_gain >= 0:
            raise ConfigError(f"NoRecentGain min_gain must be a fraction >= 0 (0.05 = 5%); got {min_gain!r}")
        self.min_gain = min_gain

    def should_stop(self, progress: Progress) -> bool:
        if progress.trials <= self.patience:
            return False
        before = progress.best_mb_per_s[-1 - self.patience]
        return progress.best_mb_per_s[-1] < before * (1 + self.min_gain)


class MarginalRoTI(StopRule):
    """Stop when expected gain of the next trial (MB/s) / its cost (minutes) <= RoTI so far.

    min_trials: trials before the rule may stop (the tuner's default runs
    count; the GP needs a few distinct configurations); patience: while
    nothing beats the default (RoTI 0), the rule goes on until this many
    trials, then stops (tuning has not paid and is not expected to).
    """

    needs_gain = True

    def __init__(self, min_trials: int = 5, patience: int = 12) -> None:
        self.min_trials = _positive_int("MarginalRoTI", "min_trials", min_trials)
        self.patience = _positive_int("MarginalRoTI", "patience", patience)

    def should_stop(self, progress: Progress) -> bool:
        if progress.trials < self.min_trials:
            return False
        gain = progress.gain()
        now = progress.noise_aware_roti
        if now <= 0:
            return progress.trials >= self.patience
        return gain / max(progress.minutes_per_trial, 1e-9) <= now


class ExpectedGainBelow(StopRule):
    """Stop when the next trial's expected gain is below ``fraction`` of the incumbent's bandwidth.

    fraction: e.g. 0.02 (2%); min_trials: trials before the rule may stop.
    The incumbent is the surrogate's (``Progress.incumbent_mb_per_s``), else
    the best run.
    """

    needs_gain = True

    def __init__(self, fraction: float = 0.02, min_trials: int = 6) -> None:
        if not 0 < fraction < 1:
            raise ConfigError(f"ExpectedGainBelow fraction must be in (0, 1), e.g. 0.02 for 2%; got {fraction!r}")
        self.fraction = fraction
        self.min_trials = _positive_int("ExpectedGainBelow", "min_trials", min_trials)

    def should_stop(self, progress: Progress) -> bool:
        if progress.trials < self.min_trials:
            return False
        incumbent = progress.incumbent_mb_per_s or progress.best_mb_per_s[-1]
        return progress.gain() < self.fraction * incumbent


class RoTIPastPeak(StopRule):
    """Stop when RoTI has not risen over the last ``patience`` trials: it has passed its peak.

    RoTI now and ``patience`` trials ago are both taken against the current
    baseline, ``Progress.default_mb_per_s``: the median of the default runs
    so far (with defaults re-measured through the study, the robust
    baseline).  With ``G(t)`` the MB/s gained over the baseline after ``t``
    minutes, ``RoTI(t) = G(t) / t`` falls exactly while ``G'(t) < RoTI(t)``,
    so this is the :class:`MarginalRoTI` test with ``G'`` measured over the
    last trials (MB/s gained per minute they took) instead of predicted by
    the GP: the rule waits for the curve to flatten and needs no surrogate.
    min_trials: trials before the rule may stop (default runs count); while
    nothing beats the baseline (RoTI <= 0) it does not stop: the trial budget
    does.
    """

    def __init__(self, patience: int = 2, min_trials: int = 8) -> None:
        self.patience = _positive_int("RoTIPastPeak", "patience", patience)
        self.min_trials = _positive_int("RoTIPastPeak", "min_trials", min_trials)

    def should_stop(self, progress: Progress) -> bool:
        if progress.trials < self.min_trials or progress.trials <= self.patience:
            return False
        back = -1 - self.patience
        then = roti(progress.best_mb_per_s[back], progress.default_mb_per_s, progress.minutes[back])
        return 0 < progress.roti <= then


def oracle_stop(progress: Progress) -> int:
    """The trial count (1-based) at which stopping maximises RoTI, in hindsight."""
    rotis = [roti(b, progress.default_mb_per_s, m) for m, b in zip(progress.minutes, progress.best_mb_per_s)]
    return 1 + max(range(len(rotis)), key=rotis.__getitem__)


# rules by their command-line name (`iobo tune --stop-rule`); a fixed budget is `--trials`
RULES = {
    "marginal-roti": MarginalRoTI,
    "expected-gain": ExpectedGainBelow,
    "no-gain": NoRecentGain,
    "roti-peak": RoTIPastPeak,
}


def study_progress(study, with_gain: bool = False) -> Progress | None:
    """The :class:`Progress` of a tuner's study (tuning trials by completion time), or None before
    the first default run completed.  with_gain: fit the GP for the expected gain (a second or so)."""
    from iobo.surrogate import Surrogate

    every = study.get_trials(deepcopy=False)
    defaults = trials.values_of(every, trials.ROLE_DEFAULT)
    if not defaults:
        return None
    default = statistics.median(defaults)
    curve = trials.roti_curve(every, default)
    gain = incumbent = None
    if with_gain:
        tuning = trials.tuning_trials(study)
        if len(tuning) >= 2:
            surrogate = Surrogate.from_trials(tuning)
            gain, incumbent = surrogate.expected_gain_mb_per_s(), surrogate.incumbent_mb_per_s
    return Progress([m for m, _, _ in curve], [b for _, b, _ in curve], default, gain, incumbent)

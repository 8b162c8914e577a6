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
import math
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
    configuration's bandwidth (its posterior mean; None when not computed);
    recommended_probability: the surrogate's probability that the
    configuration it would recommend is within :data:`NEAR_BEST` of the best
    of the whole space (:func:`recommendation_probability`); time_gain_fraction:
    the expected fraction of a production run's I/O time the next trial
    saves (:func:`expected_time_saving`); mb_per_run: MB one run moves
    (written + read; None when unknown).
    """

    minutes: Sequence[float]
    best_mb_per_s: Sequence[float]
    default_mb_per_s: float
    expected_gain_mb_per_s: float | None = None
    incumbent_mb_per_s: float | None = None
    recommended_probability: float | None = None
    time_gain_fraction: float | None = None
    mb_per_run: float | None = None

    @property
    def trials(self) -> int:
        return len(self.minutes)

    @property
    def roti(self) -> float:
        """RoTI now: MB/s gained over the default per minute of tuning."""
        return roti(self.best_mb_per_s[-1], self.default_mb_per_s, self.minutes[-1]) if self.trials else 0.0

    @property
    def incumbent_or_best_mb_per_s(self) -> float:
        """The surrogate's incumbent estimate when known, else the best run (MB/s)."""
        return self.incumbent_mb_per_s or self.best_mb_per_s[-1]

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
    finalist_runs: int = 0  # tuning trials the study may spend re-measuring its best few once the rule says stop

    @abc.abstractmethod
    def should_stop(self, progress: Progress) -> bool: ...

    def signal(self, progress: Progress) -> str:
        """What the rule reads in ``progress`` now against where it stops, in words for the user (e.g. why it has
        not stopped: "the GP is 83% sure ...; stops at 90%"); empty when the rule has nothing to add."""
        return ""

    def checking_budget_s(self, progress: Progress) -> float:
        """Seconds the walk-back and the confirmation after the search are worth measuring, by the rule's own
        economics (``math.inf``: the rule sets no limit; :meth:`Tuner.confirm` then keeps its own)."""
        return math.inf


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


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

    def signal(self, progress: Progress) -> str:
        if progress.trials <= self.patience:
            return f"{progress.trials} trial(s), fewer than its patience of {self.patience}"
        before = progress.best_mb_per_s[-1 - self.patience]
        return (f"the best grew {_percent(progress.best_mb_per_s[-1] / before - 1)} over the last {self.patience} "
                f"trials; stops below {_percent(self.min_gain)}")


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

    def signal(self, progress: Progress) -> str:
        if progress.expected_gain_mb_per_s is None:
            return ""
        per_minute = progress.expected_gain_mb_per_s / max(progress.minutes_per_trial, 1e-9)
        return (f"the next trial is expected to earn {per_minute:,.1f} MB/s per minute against a RoTI of "
                f"{progress.noise_aware_roti:,.1f} so far; stops when it earns no more")


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
        return progress.gain() < self.fraction * progress.incumbent_or_best_mb_per_s

    def signal(self, progress: Progress) -> str:
        if progress.expected_gain_mb_per_s is None:
            return ""
        share = progress.expected_gain_mb_per_s / progress.incumbent_or_best_mb_per_s
        return (f"the next trial is expected to add {_percent(share)} of the "
                f"incumbent's bandwidth; stops below {_percent(self.fraction)}")


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

    def signal(self, progress: Progress) -> str:
        if progress.roti <= 0:
            return "no run has beaten the default yet (RoTI 0)"
        return (f"RoTI is {progress.roti:,.1f} MB/s per minute; stops once it has not risen over {self.patience} "
                f"trials")


BASELINE_RUNS = 3  # the tuner's default runs (--default-repeats >= 3): ProductionRuns stops no earlier
NEAR_BEST = 0.85  # ConfidentStop's level: the recommendation within 85% of the best of the space
PROBABILITY_DRAWS = 2000  # joint posterior draws behind recommendation_probability
PROBABILITY_CANDIDATES = 400  # configurations drawn from a larger space for recommendation_probability
SAVING_CALIBRATION = 0.35  # ProductionRuns: share of the GP's expected saving counted (chosen on design seeds)
PRODUCTION_MIN_TRIALS = 5  # ProductionRuns: trials before its GP-based test (the 4th is the first search trial)
FINALIST_RUNS = 10  # ConfidentStop: trials re-measuring the best few once it says stop (chosen on design seeds)


class ConfidentStop(StopRule):
    """Stop once the GP is ``probability`` sure its recommendation is within 85% of the best.

    The probability (``Progress.recommended_probability``,
    :func:`recommendation_probability`) is of the one configuration the study
    would recommend (the GP's incumbent), over joint posterior draws of the
    whole space.  The earlier signal, whether *any* measured configuration is
    within 85% of the best, maximises over every measured configuration in
    each draw and so grows with the number measured whatever the incumbent
    is: on the IOR table it was 0.75 at stops below 85% (issue 31).
    min_trials: trials before the rule may stop (default runs count).
    finalist_runs: once the rule says stop, the study may first spend this
    many more trials re-measuring its best few configurations (top-two
    sampling, :meth:`iobo.samplers.GPSampler.identify_now`; stopping sooner
    when the leader is best in every posterior draw; other samplers stop at
    once): the GP is sure of *a* good configuration before it can tell the
    best few apart.  The defaults were chosen on the design seeds of
    ``experiments/stopping/identified.py``.
    """

    needs_gain = True

    def __init__(self, probability: float = 0.9, min_trials: int = 10, finalist_runs: int = FINALIST_RUNS) -> None:
        if not 0 < probability < 1:
            raise ConfigError(f"ConfidentStop probability must be in (0, 1), e.g. 0.9; got {probability!r}")
        self.probability = probability
        self.min_trials = _positive_int("ConfidentStop", "min_trials", min_trials)
        if isinstance(finalist_runs, bool) or not isinstance(finalist_runs, int) or finalist_runs < 0:
            raise ConfigError(f"ConfidentStop finalist_runs must be a whole number of trials >= 0 (0: stop at once); "
                              f"got {finalist_runs!r}")
        self.finalist_runs = finalist_runs

    def should_stop(self, progress: Progress) -> bool:
        if progress.trials < self.min_trials or progress.recommended_probability is None:
            return False
        return progress.recommended_probability >= self.probability

    def signal(self, progress: Progress) -> str:
        if progress.recommended_probability is None:
            return ""
        return (f"the GP is {_percent(progress.recommended_probability)} sure its recommendation is within "
                f"{_percent(NEAR_BEST)} of the best; stops at {_percent(self.probability)}")


class ProductionRuns(StopRule):
    """Stop when the next trial is expected to save ``runs`` production runs less time than it costs.

    A production run at the recommendation spends its I/O time
    ``mb_per_run / incumbent MB/s`` (the whole trial's time when the MB are
    unknown: an upper bound); the next trial is expected to cut it by the
    fraction ``Progress.time_gain_fraction`` (:func:`expected_time_saving`),
    so over ``runs`` runs it saves ``runs x I/O seconds x fraction``, to set
    against its own cost (the average trial so far).  Before the GP is
    fitted, the bound: no configuration can save more than the whole I/O
    time, so when ``runs x I/O seconds`` is below a trial's cost no trial
    can pay and the rule stops at once (e.g. 10 runs of 0.15 s of I/O
    against a 2.1 s trial), once the baseline's :data:`BASELINE_RUNS` default
    runs are in.  min_trials: trials before the GP-based test applies.
    calibration: the share of the GP's expected saving counted (0 < x),
    :data:`SAVING_CALIBRATION` by default: the GP's saving overstates what
    the next trial saves (measured ``experiments/results/stopping-truth-*``).
    """

    needs_gain = True

    def __init__(self, runs: int, min_trials: int = PRODUCTION_MIN_TRIALS,
                 calibration: float = SAVING_CALIBRATION) -> None:
        self.runs = _positive_int("ProductionRuns", "runs", runs)
        self.min_trials = _positive_int("ProductionRuns", "min_trials", min_trials)
        if isinstance(calibration, bool) or not isinstance(calibration, (int, float)) or not calibration > 0:
            raise ConfigError(f"ProductionRuns calibration must be a number > 0 (the share of the GP's expected "
                              f"saving counted, e.g. {SAVING_CALIBRATION}); got {calibration!r}")
        self.calibration = float(calibration)

    def io_seconds(self, progress: Progress) -> float:
        """I/O seconds of one production run at the recommendation (a whole trial's when the MB are unknown)."""
        if progress.mb_per_run is None:
            return progress.minutes_per_trial * 60
        return progress.mb_per_run / progress.incumbent_or_best_mb_per_s

    def should_stop(self, progress: Progress) -> bool:
        if progress.trials < BASELINE_RUNS:
            return False
        trial_s = progress.minutes_per_trial * 60
        if self.runs * self.io_seconds(progress) < trial_s:
            return True  # even a perfect configuration cannot pay for one more trial
        if progress.trials < self.min_trials or progress.time_gain_fraction is None:
            return False
        return self.counted_saving_s(progress) < trial_s

    def checking_budget_s(self, progress: Progress) -> float:
        """The stake: seconds of I/O ``runs`` production runs spend at the system default (a whole trial's per
        run when the MB or the default's bandwidth are unknown).  No configuration can save them more, so
        checking the recommendation after the search (walk-back, confirmation) is worth at most that."""
        if progress.mb_per_run is None or not progress.default_mb_per_s > 0:
            return self.runs * progress.minutes_per_trial * 60
        return self.runs * progress.mb_per_run / progress.default_mb_per_s

    def counted_saving_s(self, progress: Progress) -> float:
        """Seconds of I/O the next trial is expected to save ``runs`` production runs, as the rule counts them
        (``calibration`` x the GP's expected saving); needs ``progress.time_gain_fraction``."""
        return self.runs * self.io_seconds(progress) * progress.time_gain_fraction * self.calibration

    def signal(self, progress: Progress) -> str:
        if progress.time_gain_fraction is None:
            return ""
        return (f"the next trial is expected to save {self.runs:,} production runs "
                f"{self.counted_saving_s(progress):,.1f} s of I/O "
                f"(counting {self.calibration:g} of the GP's estimate) against its cost of "
                f"{progress.minutes_per_trial * 60:,.1f} s; stops when it saves less")


def recommendation_probability(surrogate, fraction: float = NEAR_BEST, draws: int = PROBABILITY_DRAWS,
                               seed: int = 0, limit: int = PROBABILITY_CANDIDATES) -> float:
    """The surrogate's probability that its incumbent (the measured configuration it would recommend)
    is within ``fraction`` of the best configuration of the space: the share of ``draws`` joint
    posterior draws of log(MB/s) over the space (every configuration, or ``limit`` drawn ones plus the
    measured ones in a larger space) in which the incumbent is >= log(fraction) below the draw's best."""
    import numpy as np

    fit = surrogate.fit
    space = surrogate.candidates(seed, limit)
    rows = np.unique(np.vstack([fit.rows, space]), axis=0)
    here = int(np.flatnonzero(np.all(rows == fit.rows[fit.best], axis=1))[0])
    samples = fit.posterior.joint_draws(surrogate.encoding.slots(rows), draws, seed)  # standardised units
    gap = math.log(fraction) / fit.scale
    return float(np.mean(samples[:, here] >= samples.max(1) + gap))


def expected_time_saving(surrogate, seed: int = 0) -> float:
    """Largest expected fraction of a run's I/O time that measuring one unmeasured configuration saves
    over the incumbent: ``E[(1 - incumbent / X)^+]`` for its bandwidth X (log-normal posterior), the
    expected improvement of the time ``1 / X`` rather than of X."""
    import numpy as np
    from scipy.stats import norm

    unmeasured = surrogate.unmeasured_log_posterior(seed)
    if unmeasured is None:
        return 0.0
    m, v = unmeasured
    s = np.sqrt(np.maximum(v, 1e-18))
    log_b = math.log(surrogate.incumbent_mb_per_s)
    saving = norm.cdf((m - log_b) / s) - np.exp(log_b - m + v / 2) * norm.cdf((m - v - log_b) / s)
    return float(max(saving.max(), 0.0))


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
    "confident": ConfidentStop,
    "production-runs": ProductionRuns,
}
PRODUCTION_RULE = "production-runs"  # the rule `--production-runs N` is for


def make_rule(name: str | None, production_runs=None) -> StopRule | None:
    """The stop rule ``iobo tune --stop-rule NAME [--production-runs N]`` asks for (None: none), checked
    before anything runs.  ``--production-runs N`` alone means ``--stop-rule production-runs``; it is
    refused with another rule, and that rule refused without it.  N: a whole number >= 1 (str or int)."""
    if production_runs is None:
        if name == PRODUCTION_RULE:
            raise ConfigError("--stop-rule production-runs needs --production-runs N: how many production runs "
                              "the tuned configuration will serve (e.g. --production-runs 100)")
        return RULES[name]() if name else None
    if name not in (None, PRODUCTION_RULE):
        raise ConfigError(f"--production-runs is read by --stop-rule {PRODUCTION_RULE} only; got --stop-rule "
                          f"{name}: drop one of them")
    text = str(production_runs).strip()
    if isinstance(production_runs, bool) or not text.isdigit() or int(text) < 1:
        raise ConfigError(f"--production-runs must be a whole number of runs >= 1 (the runs the tuned "
                          f"configuration will serve, e.g. 100); got {production_runs!r}")
    return ProductionRuns(int(text))


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
    gain = incumbent = probability = saving = None
    if with_gain:
        tuning = trials.tuning_trials(study)
        if len(tuning) >= 2:
            surrogate = Surrogate.from_trials(tuning)
            gain, incumbent = surrogate.expected_gain_mb_per_s(), surrogate.incumbent_mb_per_s
            probability, saving = recommendation_probability(surrogate), expected_time_saving(surrogate)
    moved = [t.user_attrs["bytes"] for t in every if trials.is_tuning(t) and t.user_attrs.get("bytes")]
    mb_per_run = statistics.median(moved) / 1e6 if moved else None
    return Progress([m for m, _, _ in curve], [b for _, b, _ in curve], default, gain, incumbent, probability,
                    saving, mb_per_run)

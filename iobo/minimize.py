"""The minimal configuration: which of the best configuration's changes buy its gain.

A tuned configuration usually changes many knobs, most of them by chance
(the sampler had to put them somewhere). :func:`walk_back` goes from the
incumbent towards the system default, a knob (or a group of knobs the GP
rates negligible) at a time: each step measures the configuration with and
without those changes in interleaved pairs (alternating which runs first),
and keeps the changes only when reverting them costs more than the noise:
when the 95% interval of the geometric mean of the pairwise ratios
with / without lies above 1 (a t interval on log ratios: a drift of the
machine cancels within each pair). A test that is undecided (its
interval ends within 10% of 1, or holds 1 around an estimated gain above
5%) gets as many pairs again, up to ``MAX_ROUNDS`` rounds. Each change
kept is then tested once more, with new pairs, on the minimal
configuration itself, and stays only if that test keeps it too: one test
at 95% keeps an inert knob once in twenty (more often on a loaded machine,
whose noise is heavy-tailed), and a knob may pay only beside changes
reverted after it was tested. The re-test replicates a gain already
selected, so its interval is an 80% one (``RETEST_LEVEL``: both tests
keep an inert knob about once in 400 times, while a real gain is not
dropped for want of a second 95% test). Knobs the environment reported as not
applied (striping off Lustre) are reverted first, without measuring: they
cannot matter here.

The result, a :class:`Minimal`, is what ``iobo best`` and ``iobo export``
give by default, with each step's measured contribution, until its
confirmation shows no gain (:func:`recommendation`: then the system default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from iobo.errors import ConfigError
from iobo.measure import Spread, paired_ratio, speedup_interval
from iobo.space import format_value

MINIMAL_ATTR = "minimal"
"""Study attr holding :meth:`Minimal.to_attr` of the latest walk."""
MAX_ROUNDS = 3
"""A test measures ``pairs`` pairs, then as many again while it is undecided, up to this many rounds."""
TEST_LEVEL = 0.95
"""Confidence level of a test's t interval on the log ratios."""
RETEST_LEVEL = 0.80
"""Confidence level of the re-test of a kept change (a one-sided 90% bound above 1: a replication)."""
NEGLIGIBLE_SHARE = 0.05
"""Knobs with less than this share of the GP ablation's importance are first tested (reverted) as one group."""


@dataclass(frozen=True)
class Step:
    """One test: ``knobs`` reverted to their defaults together.

    ratio: geometric mean of the pairwise ratios MB/s with the changes over
    MB/s without (> 1: they help); interval: its t interval at ``level``; kept: True
    when the interval lies above 1 (the changes stay in the minimal
    configuration); with_mb_per_s / without_mb_per_s: the runs, pair by pair;
    retest: the second, independent test of a kept change, on the minimal
    configuration (the change stays only if both keep it).
    """

    knobs: tuple[str, ...]
    ratio: float
    interval: tuple[float, float]
    kept: bool
    with_mb_per_s: tuple[float, ...]
    without_mb_per_s: tuple[float, ...]
    retest: bool = False
    level: float = TEST_LEVEL

    def describe(self) -> str:
        verdict = "kept" if self.kept else ("dropped: slower with them" if self.interval[1] < 1.0
                                            else "dropped: within noise")
        if not self.without_mb_per_s:
            return f"{', '.join(self.knobs)}: every run without them failed ({verdict})"
        low, high = self.interval
        verdict = f"re-test on the minimal configuration: {verdict}" if self.retest else verdict
        return (f"{', '.join(self.knobs)}: {self.ratio:.2f}x with vs without, {self.level:.0%} CI {low:.2f}x - {high:.2f}x "
                f"({len(self.with_mb_per_s)} interleaved pairs; {verdict})")


@dataclass(frozen=True)
class Minimal:
    """The minimal configuration found from trial ``from_trial``'s configuration.

    changes: parameter -> value, what differs from the system default;
    steps: the tests, in order; not_applied: knobs reverted without a test
    because the environment reported them without effect (reason each).
    """

    from_trial: int
    changes: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    not_applied: dict[str, str] = field(default_factory=dict)

    def contribution(self, knob: str) -> Step | None:
        """The last step that tested ``knob`` (its re-test, if it had one), or None."""
        return next((s for s in reversed(self.steps) if knob in s.knobs), None)

    @property
    def expected_speedup(self) -> float:
        """The minimal configuration's speedup over the default as the walk-back measured it: the product of
        each kept change's last with/without ratio (its re-test); 1.0 when nothing was kept."""
        import math

        last = {id(step): step for step in map(self.contribution, self.changes) if step is not None and step.kept}
        return math.prod(step.ratio for step in last.values())

    def describe(self) -> str:
        lines = [f"minimal configuration (from trial {self.from_trial}): "
                 + (", ".join(f"{k}={v}" for k, v in self.changes.items()) or "the system default")]
        lines += [f"  {step.describe()}" for step in self.steps]
        lines += [f"  {k}: not applied here ({reason}); not exported" for k, reason in self.not_applied.items()]
        return "\n".join(lines)

    def to_attr(self) -> dict[str, Any]:
        return {"from_trial": self.from_trial, "changes": dict(self.changes),
                "steps": [asdict(s) for s in self.steps], "not_applied": dict(self.not_applied)}

    @classmethod
    def from_attr(cls, attr: Mapping[str, Any]) -> "Minimal":
        steps = [Step(tuple(s["knobs"]), s["ratio"], tuple(s["interval"]), s["kept"], tuple(s["with_mb_per_s"]),
                      tuple(s["without_mb_per_s"]), s.get("retest", False), s.get("level", TEST_LEVEL))
                 for s in attr["steps"]]
        return cls(attr["from_trial"], dict(attr["changes"]), steps, dict(attr["not_applied"]))


Measure = Callable[[Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]], list[float | None]]
"""Runs (configuration, trial attrs) pairs in order and returns each run's MB/s (None: it failed)."""


def _paired(pairs_done, level: float = TEST_LEVEL) -> tuple[float, tuple[float, float]]:
    """:func:`iobo.measure.paired_ratio` over the pairs where both runs completed (no interval with fewer than 2)."""
    complete = [(w, wo) for w, wo in pairs_done if w is not None and wo is not None]
    return paired_ratio(*zip(*complete), level=level) if len(complete) >= 2 else (1.0, (0.0, float("inf")))


def _undecided(ratio: float, interval: tuple[float, float]) -> bool:
    """More pairs could change the decision: the interval ends near 1, or holds 1 around a material gain (> 5%)."""
    low, high = interval
    return 0.9 < low < 1.1 or 0.9 < high < 1.1 or (low <= 1.0 and ratio > 1.05)


def _measure_pairs(measure: Measure, current, candidate, attrs, pairs: int, first: int = 0):
    """Measure ``pairs`` (with, without) pairs, alternating which arm runs first; [(with MB/s, without MB/s)]."""
    runs = []
    for pair in range(first, first + pairs):
        arms = [(current, {**attrs, "arm": "with", "pair": pair}), (candidate, {**attrs, "arm": "without", "pair": pair})]
        runs += arms if pair % 2 == 0 else arms[::-1]
    values = measure(runs)
    by_pair: dict[int, dict[str, float | None]] = {}
    for value, (_, a) in zip(values, runs):
        by_pair.setdefault(a["pair"], {})[a["arm"]] = value
    return [(by_pair[p].get("with"), by_pair[p].get("without")) for p in sorted(by_pair)]


def revert(space, workload, values: Mapping[str, Any], knobs: Sequence[str]) -> dict[str, Any]:
    """``values`` with ``knobs`` at their defaults; parameters that become inactive dropped, constraints repaired."""
    reverted = dict(values)
    for knob in knobs:
        reverted[knob] = space[knob].default
    active = {p.name: reverted[p.name] for p in space if p.name in reverted and space.is_active(p, reverted)}
    repaired, _ = space.repair(active, workload)
    return repaired


def changed_knobs(space, values: Mapping[str, Any]) -> list[str]:
    """Parameters of ``values`` that differ from the system default, in space order."""
    return [p.name for p in space if p.name in values and values[p.name] != p.default]


def walk_back(space, workload, incumbent: Mapping[str, Any], from_trial: int, measure: Measure,
              importance: Mapping[str, float] | None = None, not_applied: Mapping[str, str] | None = None,
              pairs: int = 3) -> Minimal:
    """Test the incumbent's changes from the default and keep those that matter (see the module docstring).

    importance: parameter -> share (the GP ablation view); knobs under
    ``NEGLIGIBLE_SHARE`` are first tested as one group, the rest one at a
    time, least important first; without it, all changes are tested as one
    group. A group whose reversal costs more than the noise is split in
    halves, tested in turn. not_applied: knobs reverted untested.
    pairs: interleaved (with, without) runs per test (>= 2).
    """
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 2:
        raise ConfigError(f"minimizing needs at least 2 interleaved pairs per test; got pairs={pairs!r}")
    not_applied = {k: v for k, v in (not_applied or {}).items() if k in changed_knobs(space, incumbent)}
    current = revert(space, workload, space.complete(incumbent), list(not_applied))
    changed = changed_knobs(space, current)
    importance = importance or {}
    order = sorted(changed, key=lambda k: (importance.get(k, 1.0), changed.index(k)))
    if importance:
        negligible = [k for k in order if importance.get(k, 1.0) < NEGLIGIBLE_SHARE]
        tests: list[list[str]] = [negligible] if negligible else []
        tests += [[k] for k in order if k not in negligible]
    else:  # no GP ranking yet: all changes at once, halved while they matter (delta debugging)
        tests = [order] if order else []
    steps: list[Step] = []
    while tests:
        knobs = [k for k in tests.pop(0) if k in changed_knobs(space, current)]
        if not knobs:
            continue
        step, candidate = _test(space, workload, measure, current, knobs, len(steps), pairs)
        if step.kept and len(knobs) > 1 and step.without_mb_per_s:
            half = len(knobs) // 2  # the group matters as a whole: test each half (least important first)
            tests = [knobs[:half], knobs[half:]] + tests
            continue
        if not step.kept:
            current = candidate
        steps.append(step)
    # the re-test: each kept change once more, on the minimal configuration, with new pairs; it stays only if
    # this independent test keeps it too (a change kept by one lucky test, or that paid only beside changes
    # since reverted, goes). Smallest measured gain first.
    kept = sorted((s for s in steps if s.kept and s.without_mb_per_s), key=lambda s: s.ratio)
    for earlier in kept:
        knobs = [k for k in earlier.knobs if k in changed_knobs(space, current)]
        if not knobs:
            continue
        step, candidate = _test(space, workload, measure, current, knobs, len(steps), pairs, retest=True)
        if not step.kept:
            current = candidate
        steps.append(step)
    changes = {k: current[k] for k in changed_knobs(space, current)}
    return Minimal(from_trial, changes, steps, not_applied)


def _test(space, workload, measure: Measure, current, knobs, number: int, pairs: int,
          retest: bool = False) -> tuple[Step, dict[str, Any]]:
    """Measure ``current`` with and without ``knobs`` (interleaved pairs, more while undecided); the step and
    the configuration without them."""
    candidate = revert(space, workload, current, knobs)
    attrs = {"minimize_step": number, "minimize_knobs": knobs}
    pairs_done = _measure_pairs(measure, current, candidate, attrs, pairs)
    if not any(w is not None for w, _ in pairs_done):
        raise ConfigError(f"every run of the configuration being minimised failed while testing {knobs}; "
                          f"see the failed trials' fail_reason")
    if not any(wo is not None for _, wo in pairs_done):  # the changes are needed for the run to work at all
        with_values = tuple(w for w, _ in pairs_done if w is not None)
        return Step(tuple(knobs), float("inf"), (float("inf"), float("inf")), True, with_values, (), retest), candidate
    level = RETEST_LEVEL if retest else TEST_LEVEL
    ratio, interval = _paired(pairs_done, level)
    for _ in range(MAX_ROUNDS - 1):
        if not _undecided(ratio, interval):
            break
        pairs_done += _measure_pairs(measure, current, candidate, attrs, pairs, first=len(pairs_done))
        ratio, interval = _paired(pairs_done, level)
    complete = [(w, wo) for w, wo in pairs_done if w is not None and wo is not None]
    with_values, without_values = (tuple(x) for x in zip(*complete)) if complete else ((), ())
    return (Step(tuple(knobs), ratio, interval, interval[0] > 1.0, with_values, without_values, retest, level),
            candidate)


def current_minimal(study, best=None) -> Minimal | None:
    """The minimal configuration stored on the study when it was made from the study's current best trial
    (``best``: :func:`iobo.trials.best_trial`, when already known), else None."""
    from iobo import trials

    best = trials.best_trial(study) if best is None else best
    attr = study.user_attrs.get(MINIMAL_ATTR)
    return Minimal.from_attr(attr) if attr and best is not None and attr["from_trial"] == best.number else None


def same_changes(space, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when configurations ``a`` and ``b`` change the same parameters from the system default to the
    same values (what differs is what is applied; inactive and default-valued parameters do not count)."""
    return {k: a[k] for k in changed_knobs(space, a)} == {k: b[k] for k in changed_knobs(space, b)}


def runs_of(study, space, values: Mapping[str, Any]) -> Spread | None:
    """Every completed run (MB/s) of configuration ``values`` in the study, any role that measures one
    (:data:`iobo.trials.MEASURED_ROLES`: default, search, walk-back, confirmation); None when it never ran."""
    from iobo import trials

    got = tuple(t.value for t in trials.measured_trials(study) if same_changes(space, trials.config_of(t), values))
    return Spread(got) if got else None


@dataclass(frozen=True)
class Confirmation:
    """The interleaved re-measurement (``Tuner.confirm``) of one configuration against the system default.

    changes: what the confirmed configuration changes from the default;
    default / best: the confirmation's runs of each (MB/s); last_trial: the
    number of its last run of the configuration (the latest confirmation
    of a study is the one that counts).
    """

    changes: dict[str, Any]
    default: Spread
    best: Spread
    last_trial: int

    @property
    def speedup(self) -> float:
        """Median of the configuration's runs over the median of the default's."""
        return self.best.median / self.default.median

    @cached_property
    def interval(self) -> tuple[float, float] | None:
        """The speedup's bootstrap 95% interval (:func:`iobo.measure.bootstrap_speedup`, 2000 resamples, seed 0);
        None with fewer than ``INTERVAL_MIN_RUNS`` runs of either (too few for an interval)."""
        return speedup_interval(self.default.values, self.best.values)

    @property
    def shows_gain(self) -> bool | None:
        """True when the interval lies above 1; False when it holds 1 or lies below (no gain); None without one."""
        return None if self.interval is None else self.interval[0] > 1.0

    def describe(self) -> str:
        """``0.93x [0.87-1.10]`` (``0.93x from 3 pairs`` without an interval)."""
        if self.interval is None:
            return f"{self.speedup:.2f}x from {min(self.default.n, self.best.n)} interleaved pair(s)"
        low, high = self.interval
        return f"{self.speedup:.2f}x [{low:.2f}-{high:.2f}]"


def confirmation_of(study, space, values: Mapping[str, Any]) -> Confirmation | None:
    """The study's confirmation of configuration ``values``, or None when it was never confirmed.

    Its runs: the ``confirm-best`` runs of that configuration, and the
    ``confirm-default`` runs interleaved with them (from the one just before
    its first run to its last run; a confirmation alternates default, best).
    """
    from iobo import trials

    done = trials.completed_trials(study, (trials.ROLE_CONFIRM_DEFAULT, trials.ROLE_CONFIRM_BEST))
    best = [t for t in done if trials.role(t) == trials.ROLE_CONFIRM_BEST
            and same_changes(space, trials.config_of(t), values)]
    if not best:
        return None
    first, last = best[0].number, best[-1].number
    default = [t.value for t in done if trials.role(t) == trials.ROLE_CONFIRM_DEFAULT and first - 1 <= t.number <= last]
    if not default:
        return None
    return Confirmation({k: values[k] for k in changed_knobs(space, values)}, Spread(tuple(default)),
                        Spread(tuple(t.value for t in best)), last)


@dataclass(frozen=True)
class Recommendation:
    """What a study recommends: the one home of "the recommendation" (``best``, ``export``, ``run``, the report,
    ``Tuner.best_config``, production mode of ``@iobo.tune``).

    values: the configuration to use (every active parameter); how: a line
    saying how it was chosen; proposed: the configuration the study
    proposes (the minimal one of its best trial, or that trial's whole
    configuration) and confirmation: that configuration's confirmation, if
    any. When the confirmation shows no gain (its interval holds 1 or lies
    below), values is the system default: the proposal was measured and
    rejected.
    """

    values: dict[str, Any]
    how: str
    proposed: dict[str, Any]
    confirmation: Confirmation | None = None

    @property
    def rejected(self) -> bool:
        """True when the proposal's own confirmation showed no gain (so the system default is recommended)."""
        return self.confirmation is not None and self.confirmation.shows_gain is False


def proposed(study, space, workload=None, minimal: bool = True) -> tuple[dict[str, Any], str]:
    """The configuration the study proposes, before any confirmation: (values, a line saying which).

    With ``minimal``, the minimal configuration when the study holds one
    made from its current best trial; otherwise the best trial's
    configuration without the knobs the environment reported as not applied
    (that trial's ``not_applied`` and the study's frozen knobs), which
    ``iobo confirm --no-minimize`` confirms and ``--full`` shows. Raises when
    nothing completed.
    """
    from iobo import trials

    best = trials.best_trial(study)
    if best is None:
        raise ConfigError(f"study {study.study_name!r} has no completed trial yet; run `iobo tune` first")
    minimal_made = current_minimal(study, best)
    if minimal and minimal_made is not None:
        return space.complete(minimal_made.changes), (f"the minimal configuration of trial {best.number} "
                                                      f"({len(minimal_made.changes)} of its changes matter)")
    values = trials.config_of(best)
    dropped = {**best.user_attrs.get("not_applied", {}), **study.user_attrs.get(trials.FROZEN_ATTR, {})}
    dropped = [k for k in dropped if k in changed_knobs(space, values)]
    if workload is None:
        reverted = {**values, **{k: space[k].default for k in dropped}}
        values = space.complete({p.name: reverted[p.name] for p in space
                                 if p.name in reverted and space.is_active(p, reverted)})
    else:
        values = revert(space, workload, values, dropped)
    if minimal_made is not None:
        note = f"trial {best.number}'s whole configuration, not its minimal one"
    else:
        note = f"trial {best.number}'s configuration, not minimized (`iobo minimize` tests which changes matter)"
    if dropped:
        note += f"; not applied here, so left at their defaults: {', '.join(dropped)}"
    return values, note


def recommendation(study, space, workload=None, minimal: bool = True) -> Recommendation:
    """The study's :class:`Recommendation`.

    The proposal (:func:`proposed`) the study confirmed last, of the
    minimal configuration and the best trial's whole one (only the whole
    one when not ``minimal``); the minimal one when neither was confirmed.
    When its confirmation shows no gain, the system default: "keep the
    system default: the confirmation of <changes> measured 0.93x [0.87-1.10]".
    """
    options = [proposed(study, space, workload, minimal)]
    if minimal:
        whole = proposed(study, space, workload, minimal=False)
        if not same_changes(space, whole[0], options[0][0]):
            options.append(whole)
    confirmed = [(c, values, how) for values, how in options if (c := confirmation_of(study, space, values))]
    if confirmed:
        confirmation, values, how = max(confirmed, key=lambda item: item[0].last_trial)
    else:
        (values, how), confirmation = options[0], None
    if confirmation is not None and confirmation.shows_gain is False and changed_knobs(space, values):
        changes = ", ".join(f"{k}={format_value(v, space[k].unit)}" for k, v in confirmation.changes.items())
        how = (f"keep the system default: the confirmation of {changes} measured {confirmation.describe()}, "
               f"no gain (proposed: {how})")
        return Recommendation(space.default(), how, values, confirmation)
    return Recommendation(values, how, values, confirmation)


def recommended(study, space, workload=None, minimal: bool = True) -> tuple[dict[str, Any], str]:
    """The configuration to use in production and how it was chosen: (values, a line saying which); see
    :func:`recommendation`. Raises when nothing completed."""
    chosen = recommendation(study, space, workload, minimal)
    return chosen.values, chosen.how

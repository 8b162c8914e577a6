"""The minimal configuration: which of the best configuration's changes buy its gain.

A tuned configuration usually changes many knobs, most of them by chance
(the sampler had to put them somewhere). :func:`walk_back` goes from the
incumbent towards the system default, a knob (or a group of knobs the GP
rates negligible) at a time: each step measures the configuration with and
without those changes in interleaved pairs (alternating which runs first),
and keeps the changes only when reverting them costs more than the noise:
when the 95% interval of the geometric mean of the pairwise ratios
with / without lies above 1 (a t interval on log ratios: a drift of the
machine cancels within each pair). Each test ends with one of four
verdicts (:attr:`Step.verdict`): **matters** (the interval lies above 1:
kept), **slower** (it lies below 1: reverted), **no effect** (it lies
inside ``NO_EFFECT_BAND``, 0.95x-1.05x: reverted) and **undecided** (it
holds 1 and reaches outside the band: the test cannot tell a gain from no
effect). An undecided test gets ``pairs`` more pairs at a time, up to
``MAX_TEST_PAIRS`` pairs in all and ``MAX_TEST_SECONDS`` of extra
measuring, and while the whole walk-back has run for less than its budget
(``WALK_BACK_BUDGET_S``; once it is spent, every test still runs its first
``pairs`` pairs, but none measures more). When the walk-back is told how
many pairs the confirmation after it runs (``confirm_pairs``: ``iobo tune
--via-kernel`` confirms the kernel's recommendation on the program in a fixed
number of pairs), an undecided test also stops once its interval's upper end
lies below :func:`iobo.measure.confirmable_speedup` of those pairs at the
test's own noise: whatever the change gains is then too small for that
confirmation to show (on its own: several such changes together could add
up to more; and the noise is the kernel's, so a program quieter than its
kernel could confirm a little less). Still undecided, the change is
reverted (the walk errs towards the default: it was not *shown* to help),
and the minimal configuration lists it with the pairs that would settle it
(:meth:`Minimal.undecided`,
:meth:`Step.pairs_to_settle`), so that a report does not present "keep the
system default" as "nothing can help". Each change kept is then tested
once more, with new pairs, on the minimal configuration itself, and stays
only if that test keeps it too: one test
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
from iobo.measure import (Spread, confirmable_speedup, paired_ratio, planned_pairs, pooled_noise_sd_log,
                          speedup_interval)
from iobo.space import format_value

MINIMAL_ATTR = "minimal"
"""Study attr holding :meth:`Minimal.to_attr` of the latest walk."""
NO_EFFECT_BAND = (0.95, 1.05)
"""With/without ratios a change may have and still count as no effect: a test whose interval lies inside this band
shows that the change moves the bandwidth by less than 5% either way. Below 5% a gain is not worth a changed
setting: on the quietest target here (tmpfs, 6% run-to-run CV, /work/shared/MEASURED.md) a confirmation would need
``planned_pairs(0.06, 1.05, ...)`` = 38 interleaved pairs to show it, beyond what ``iobo confirm`` runs."""
MAX_TEST_PAIRS = 20
"""An undecided test measures more pairs, ``pairs`` at a time, up to this many in all (40 runs: about 80 s at the
2 s a run of the demo's kernel). At 20 pairs a test settles a 1.59x gain with the noise of the loaded demo of
issue 31 (0.63 in log ratio: 15 pairs planned), and an inert knob on a quiet tmpfs (6% CV a run, 0.085 in log ratio)
fits inside ``NO_EFFECT_BAND`` about half the time."""
MAX_TEST_SECONDS = 300.0
"""Wall-clock seconds a test may spend on extra pairs (beyond its first ``pairs``): no new round starts after them,
so a slow program (a minute a run) is not measured for 40 minutes per knob; the verdict says which limit stopped it."""
WALK_BACK_BUDGET_S = 900.0
"""Wall-clock seconds from the start of a walk-back after which no undecided test measures more pairs: the tests
(and re-tests) from then on run their first ``pairs`` pairs only, so that no change is kept or reverted without a
measurement, and an undecided one is reverted and listed with the pairs that would settle it. The per-test caps
alone let a walk of k tests take k times ``MAX_TEST_SECONDS`` and more (a round started is finished): the direct
CaNS walk-back (experiments/results/kernels-cans.txt: 7.8 s a run, longer at load 3-8) ran 112 runs and was still
measuring undecided changes when it was stopped after 57 min. 900 s is three tests' ``MAX_TEST_SECONDS``; at the
demo kernel's 2 s a run it holds 225 pairs, eleven tests at the ``MAX_TEST_PAIRS`` cap, so it binds on slow
programs and loaded machines, not on the demo. ``iobo tune --walk-back-budget SECONDS`` sets it."""
SETTLE_AT_MOST = 10_000
"""Upper clamp of :meth:`Step.pairs_to_settle` (a ratio of exactly 1 with noise never settles as a gain)."""
TEST_LEVEL = 0.95
"""Confidence level of a test's t interval on the log ratios."""
RETEST_LEVEL = 0.80
"""Confidence level of the re-test of a kept change (a one-sided 90% bound above 1: a replication)."""
NEGLIGIBLE_SHARE = 0.05
"""Knobs with less than this share of the GP ablation's importance are first tested (reverted) as one group."""


MATTERS, NO_EFFECT, SLOWER, UNDECIDED = "matters", "no effect", "slower", "undecided"
"""The verdicts of a test (:attr:`Step.verdict`)."""
GAIN = "gain"
"""A confirmation's verdict when its interval lies above 1 (:attr:`Confirmation.verdict`)."""


def inside_no_effect_band(interval: tuple[float, float]) -> bool:
    """True when the ratio's interval ``(low, high)`` lies inside ``NO_EFFECT_BAND``: shown to be no effect."""
    return NO_EFFECT_BAND[0] <= interval[0] and interval[1] <= NO_EFFECT_BAND[1]


def pairs_to_settle(mean_log: float, noise_sd_log: float, level: float = TEST_LEVEL) -> int:
    """Interleaved pairs in all that would likely settle a ratio measured at ``exp(mean_log)``: the fewer of those
    whose ``level`` interval would exclude 1 (a gain, or a loss) and those whose interval would fit inside
    ``NO_EFFECT_BAND``, each with 80% power (:func:`iobo.measure.planned_pairs`, whose ``noise_sd_log`` is the
    standard deviation of ``log(MB/s)`` between runs of one configuration), at most ``SETTLE_AT_MOST``."""
    import math

    plans = []
    if mean_log != 0.0:  # an interval that excludes 1 on the side the ratio lies
        plans.append(planned_pairs(noise_sd_log, math.exp(abs(mean_log)), 2, SETTLE_AT_MOST, level))
    inside = min(math.log(NO_EFFECT_BAND[1]) - mean_log, mean_log - math.log(NO_EFFECT_BAND[0]))
    if inside > 0.0:  # an interval that fits inside the band around the ratio measured
        plans.append(planned_pairs(noise_sd_log, math.exp(inside), 2, SETTLE_AT_MOST, level))
    return min(plans, default=SETTLE_AT_MOST)


def settle_text(needed: int | None, done: int) -> str:
    """``about 6 more pairs would settle it`` for a test or confirmation of ``done`` pairs that needs ``needed``
    in all (:func:`pairs_to_settle`; None: too few pairs to tell)."""
    if needed is None or needed >= SETTLE_AT_MOST:
        return f"more than {SETTLE_AT_MOST - done} more pairs would be needed to settle it"
    return f"about {max(needed - done, 1)} more pairs would settle it"


@dataclass(frozen=True)
class Step:
    """One test: ``knobs`` reverted to their defaults together.

    ratio: geometric mean of the pairwise ratios MB/s with the changes over
    MB/s without (> 1: they help); interval: its t interval at ``level``; kept: True
    when the interval lies above 1 (the changes stay in the minimal
    configuration); with_mb_per_s / without_mb_per_s: the runs, pair by pair;
    retest: the second, independent test of a kept change, on the minimal
    configuration (the change stays only if both keep it); stopped: why an
    undecided test measured no more pairs ("" when it was decided).
    """

    knobs: tuple[str, ...]
    ratio: float
    interval: tuple[float, float]
    kept: bool
    with_mb_per_s: tuple[float, ...]
    without_mb_per_s: tuple[float, ...]
    retest: bool = False
    level: float = TEST_LEVEL
    stopped: str = ""

    @property
    def verdict(self) -> str:
        """``MATTERS`` (kept: the interval lies above 1), ``SLOWER`` (it lies below 1), ``NO_EFFECT`` (it lies
        inside ``NO_EFFECT_BAND``) or ``UNDECIDED`` (it holds 1 and reaches outside the band)."""
        if self.kept:
            return MATTERS
        if self.interval[1] < 1.0:
            return SLOWER
        return NO_EFFECT if inside_no_effect_band(self.interval) else UNDECIDED

    def pairs_to_settle(self) -> int | None:
        """Interleaved pairs in all that would likely settle this test (:func:`pairs_to_settle`); None without 2
        complete pairs. ``planned_pairs`` plans a ratio of two medians of n runs, whose log varies as
        ``pi s^2 / n``; the mean log ratio of n pairs varies as ``sd^2 / n``: the same plan with
        ``s = sd / sqrt(pi)``, sd the standard deviation of the pairs' log ratios."""
        import math
        import statistics

        logs = self.log_ratios()
        if len(logs) < 2:
            return None
        return pairs_to_settle(statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(math.pi), self.level)

    def log_ratios(self) -> list[float]:
        """``log(with / without)`` of each pair, in order."""
        import math

        return [math.log(w / wo) for w, wo in zip(self.with_mb_per_s, self.without_mb_per_s)]

    def run_noise_sd_log(self) -> float:
        """The standard deviation of ``log(MB/s)`` between runs of one configuration implied by the pairs: the
        standard deviation of their log ratios over sqrt(2) (each ratio is of two runs); 0.0 under 2 pairs."""
        import math
        import statistics

        logs = self.log_ratios()
        return statistics.stdev(logs) / math.sqrt(2) if len(logs) >= 2 else 0.0

    def settle_text(self) -> str:
        """``about 6 more pairs would settle it`` (from :meth:`pairs_to_settle`)."""
        return settle_text(self.pairs_to_settle(), len(self.with_mb_per_s))

    def describe(self) -> str:
        verdict = {MATTERS: "kept: it matters", SLOWER: "dropped: slower with them",
                   NO_EFFECT: f"dropped: no effect (interval inside {NO_EFFECT_BAND[0]:.2f}x-{NO_EFFECT_BAND[1]:.2f}x)",
                   UNDECIDED: "undecided: reverted, not shown to help"}[self.verdict]
        if not self.without_mb_per_s:
            return f"{', '.join(self.knobs)}: every run without them failed ({verdict})"
        low, high = self.interval
        if self.verdict == UNDECIDED:
            verdict += (f"; {self.stopped}" if self.stopped else "") + f"; {self.settle_text()}"
        verdict = f"re-test on the minimal configuration: {verdict}" if self.retest else verdict
        return (f"{', '.join(self.knobs)}: {self.ratio:.2f}x with vs without, {self.level:.0%} CI {low:.2f}x - {high:.2f}x "
                f"({len(self.with_mb_per_s)} interleaved pairs; {verdict})")


@dataclass(frozen=True)
class Minimal:
    """The minimal configuration found from trial ``from_trial``'s configuration.

    changes: parameter -> value, what differs from the system default;
    steps: the tests, in order; not_applied: knobs reverted without a test
    because the environment reported them without effect (reason each);
    budget_s: the walk-back's budget in seconds (``WALK_BACK_BUDGET_S``;
    None for a walk stored before it had one); ended_by_budget: True when
    the budget was spent while a test was undecided, so that test, and any
    later one left undecided by its first pairs, measured no more.
    """

    from_trial: int
    changes: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    not_applied: dict[str, str] = field(default_factory=dict)
    budget_s: float | None = None
    ended_by_budget: bool = False

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

    def undecided(self) -> list[Step]:
        """The tests that left changes reverted undecided: each reverted knob's last test (:meth:`contribution`)
        when its verdict is ``UNDECIDED``, in walk order, once each."""
        tested = {k for step in self.steps for k in step.knobs if k not in self.changes}
        last = {id(step): step for step in map(self.contribution, tested) if step.verdict == UNDECIDED}
        return [step for step in self.steps if id(step) in last]

    def undecided_text(self, values: Mapping[str, Any] | None = None) -> str:
        """The undecided changes, each with its test and the pairs that would settle it, ``; ``-separated:
        ``files=per_process: 1.59x, 95% CI 0.98x-2.59x after 9 pairs, about 6 more pairs would settle it``.
        values: the configuration walked back from (knob -> value), to name the values; "" when none."""
        def knobs(step: Step) -> str:
            return ", ".join(f"{k}={values[k]}" if values and k in values else k for k in step.knobs)

        return "; ".join(f"{knobs(s)}: {s.ratio:.2f}x, {s.level:.0%} CI {s.interval[0]:.2f}x-{s.interval[1]:.2f}x "
                         f"after {len(s.with_mb_per_s)} pairs, {s.settle_text()}" for s in self.undecided())

    def undecided_knobs(self) -> str:
        """The undecided tests' knobs, ``a+b`` for knobs tested as one group, ``, ``-separated ("" when none)."""
        return ", ".join("+".join(s.knobs) for s in self.undecided())

    def budget_text(self) -> str:
        """``the walk-back's budget of 900 s was spent, so undecided tests measured no more pairs`` when the budget
        ended the measuring of an undecided test (:attr:`ended_by_budget`), else ""."""
        if not self.ended_by_budget:
            return ""
        return f"the walk-back's budget of {self.budget_s:g} s was spent, so undecided tests measured no more pairs"

    def conclusion(self) -> str:
        """What the walk-back shows in one line: the changes that matter, or when none does, that the system
        default is kept because no change was *shown* to help, naming the undecided ones (and saying when the
        walk-back's budget ended their measuring)."""
        undecided = self.undecided_knobs()
        budget = f" ({self.budget_text()})" if self.budget_text() and undecided else ""
        if self.changes:
            kept = f"{len(self.changes)} change(s) shown to matter: {', '.join(self.changes)}"
            return kept + (f"; undecided, reverted: {undecided}{budget}" if undecided else "")
        if undecided:
            return (f"the system default is kept because no change was shown to help; undecided (more pairs could "
                    f"show a gain): {undecided}{budget}")
        if not self.steps:
            return "no change to test: the configuration walked back from is the system default"
        return "no change matters: each was shown to have no effect or to slow the run"

    def describe(self) -> str:
        lines = [f"minimal configuration (from trial {self.from_trial}): "
                 + (", ".join(f"{k}={v}" for k, v in self.changes.items()) or "the system default")]
        lines += [f"  {step.describe()}" for step in self.steps]
        if self.undecided():
            lines.append(f"  undecided: {self.undecided_text()}")
        if self.budget_text():
            lines.append(f"  {self.budget_text()}")
        lines += [f"  {k}: not applied here ({reason}); not exported" for k, reason in self.not_applied.items()]
        return "\n".join(lines)

    def to_attr(self) -> dict[str, Any]:
        return {"from_trial": self.from_trial, "changes": dict(self.changes),
                "steps": [asdict(s) for s in self.steps], "not_applied": dict(self.not_applied),
                "budget_s": self.budget_s, "ended_by_budget": self.ended_by_budget}

    @classmethod
    def from_attr(cls, attr: Mapping[str, Any]) -> "Minimal":
        steps = [Step(tuple(s["knobs"]), s["ratio"], tuple(s["interval"]), s["kept"], tuple(s["with_mb_per_s"]),
                      tuple(s["without_mb_per_s"]), s.get("retest", False), s.get("level", TEST_LEVEL),
                      s.get("stopped", ""))
                 for s in attr["steps"]]
        return cls(attr["from_trial"], dict(attr["changes"]), steps, dict(attr["not_applied"]),
                   attr.get("budget_s"), attr.get("ended_by_budget", False))


Measure = Callable[[Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]], list[float | None]]
"""Runs (configuration, trial attrs) pairs in order and returns each run's MB/s (None: it failed)."""


def _paired(pairs_done, level: float = TEST_LEVEL) -> tuple[float, tuple[float, float]]:
    """:func:`iobo.measure.paired_ratio` over the pairs where both runs completed (no interval with fewer than 2)."""
    complete = [(w, wo) for w, wo in pairs_done if w is not None and wo is not None]
    return paired_ratio(*zip(*complete), level=level) if len(complete) >= 2 else (1.0, (0.0, float("inf")))


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


def check_walk_back_budget(seconds, name: str = "budget_s") -> float:
    """``seconds`` as a walk-back budget (:data:`WALK_BACK_BUDGET_S`); :class:`ConfigError` naming ``name``
    unless it is a number of seconds >= 0 (``inf``: no budget beyond each test's own)."""
    import math

    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or math.isnan(seconds) or seconds < 0:
        raise ConfigError(f"{name} must be a number of seconds >= 0 (how long the walk-back may measure before "
                          f"undecided tests get no more pairs; 0: each test runs its first pairs only; inf: only "
                          f"each test's {MAX_TEST_SECONDS:.0f} s); got {seconds!r}")
    return float(seconds)


class _Budget:
    """The walk-back's budget: spent ``seconds`` after it was made; ``ended`` once it stopped an undecided test."""

    def __init__(self, seconds: float) -> None:
        import time

        self.seconds, self.ended = seconds, False
        self._deadline = time.monotonic() + seconds

    def spent(self) -> bool:
        import time

        return time.monotonic() >= self._deadline


def walk_back(space, workload, incumbent: Mapping[str, Any], from_trial: int, measure: Measure,
              importance: Mapping[str, float] | None = None, not_applied: Mapping[str, str] | None = None,
              pairs: int = 3, extra_seconds: float = MAX_TEST_SECONDS,
              budget_s: float = WALK_BACK_BUDGET_S, confirm_pairs: int | None = None) -> Minimal:
    """Test the incumbent's changes from the default and keep those that matter (see the module docstring).

    importance: parameter -> share (the GP ablation view); knobs under
    ``NEGLIGIBLE_SHARE`` are first tested as one group, the rest one at a
    time, least important first; without it, all changes are tested as one
    group. A group whose reversal costs more than the noise is split in
    halves, tested in turn. not_applied: knobs reverted untested.
    pairs: interleaved (with, without) runs per test (>= 2), and per extra
    round of an undecided test; extra_seconds: the wall-clock seconds each
    test may spend on such extra rounds (``MAX_TEST_SECONDS``); budget_s:
    the wall-clock seconds from now after which no test starts an extra
    round (``WALK_BACK_BUDGET_S``; the walk then ends in about its tests'
    first rounds: one round in flight and each later test's first ``pairs``);
    confirm_pairs: the interleaved pairs of the confirmation that follows,
    when fixed (None: no test stops for it; see the module docstring).
    """
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 2:
        raise ConfigError(f"minimizing needs at least 2 interleaved pairs per test; got pairs={pairs!r}")
    if confirm_pairs is not None and (isinstance(confirm_pairs, bool) or not isinstance(confirm_pairs, int)
                                      or confirm_pairs < 1):
        raise ConfigError(f"confirm_pairs must be the confirmation's number of interleaved pairs (>= 1) or None; "
                          f"got {confirm_pairs!r}")
    budget = _Budget(check_walk_back_budget(budget_s))
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
        step, candidate = _test(space, workload, measure, current, knobs, len(steps), pairs, extra_seconds, budget,
                                confirm_pairs)
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
        step, candidate = _test(space, workload, measure, current, knobs, len(steps), pairs, extra_seconds, budget,
                                confirm_pairs, retest=True)
        if not step.kept:
            current = candidate
        steps.append(step)
    changes = {k: current[k] for k in changed_knobs(space, current)}
    return Minimal(from_trial, changes, steps, not_applied, budget.seconds, budget.ended)


def _test(space, workload, measure: Measure, current, knobs, number: int, pairs: int, extra_seconds: float,
          budget: _Budget, confirm_pairs: int | None = None, retest: bool = False) -> tuple[Step, dict[str, Any]]:
    """Measure ``current`` with and without ``knobs`` (interleaved pairs, more while undecided, neither the
    test's ``extra_seconds`` nor the walk-back's ``budget`` is spent and a gain ``confirm_pairs`` could show is
    not ruled out: see the module docstring); the step and the configuration without them."""
    import time

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
    started = time.monotonic()
    step = _step(knobs, pairs_done, level, retest)
    while step.verdict == UNDECIDED:
        if confirm_pairs is not None:
            confirmable = confirmable_speedup(step.run_noise_sd_log(), confirm_pairs)
            if step.interval[1] < confirmable:
                return _step(knobs, pairs_done, level, retest, f"measuring stopped: a gain of at most "
                             f"{step.interval[1]:.2f}x is below the {confirmable:.2f}x a confirmation of "
                             f"{confirm_pairs} pairs could show at this test's noise"), candidate
        more = min(pairs, max(MAX_TEST_PAIRS, pairs) - len(pairs_done))
        if more <= 0:
            return _step(knobs, pairs_done, level, retest, f"measuring stopped at the cap of {MAX_TEST_PAIRS} "
                                                            f"pairs per test"), candidate
        if budget.spent():
            budget.ended = True
            return _step(knobs, pairs_done, level, retest, f"measuring stopped: the walk-back's budget of "
                                                            f"{budget.seconds:g} s was spent"), candidate
        if time.monotonic() - started >= extra_seconds:
            return _step(knobs, pairs_done, level, retest, f"measuring stopped: its {extra_seconds:.0f} s for "
                                                            f"extra pairs were spent"), candidate
        pairs_done += _measure_pairs(measure, current, candidate, attrs, more, first=len(pairs_done))
        step = _step(knobs, pairs_done, level, retest)
    return step, candidate


def _step(knobs, pairs_done, level: float, retest: bool, stopped: str = "") -> Step:
    """The :class:`Step` of the pairs measured so far (the pairs where both runs completed)."""
    ratio, interval = _paired(pairs_done, level)
    complete = [(w, wo) for w, wo in pairs_done if w is not None and wo is not None]
    with_values, without_values = (tuple(x) for x in zip(*complete)) if complete else ((), ())
    return Step(tuple(knobs), ratio, interval, interval[0] > 1.0, with_values, without_values, retest, level, stopped)


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
        """True when the interval lies above 1 (:attr:`verdict` ``GAIN``); False when it holds 1 or lies below;
        None without one."""
        return None if self.verdict is None else self.verdict == GAIN

    @property
    def pairs(self) -> int:
        """Complete interleaved pairs: the fewer of the two sides' runs."""
        return min(self.default.n, self.best.n)

    @property
    def verdict(self) -> str | None:
        """``GAIN`` (the interval lies above 1), ``SLOWER`` (below 1), ``NO_EFFECT`` (inside ``NO_EFFECT_BAND``:
        shown to move the bandwidth by less than 5%) or ``UNDECIDED`` (it holds 1 and reaches outside the band:
        more pairs could still show a gain); None without an interval."""
        return None if self.interval is None else confirmation_verdict(self.interval)

    def verdict_text(self) -> str:
        """What the confirmation shows, in words: ``a gain``, ``slower than the system default``, ``no effect
        (interval inside 0.95x-1.05x)``, ``undecided after 5 pairs: about 9 more pairs would settle it``, or
        ``too few pairs for an interval``."""
        return confirmation_verdict_text(self.interval, self.default.values, self.best.values)

    def describe(self) -> str:
        """``0.93x [0.87-1.10]`` (``0.93x from 3 pairs`` without an interval)."""
        if self.interval is None:
            return f"{self.speedup:.2f}x from {self.pairs} interleaved pair(s)"
        low, high = self.interval
        return f"{self.speedup:.2f}x [{low:.2f}-{high:.2f}]"


def confirmation_verdict(interval: tuple[float, float]) -> str:
    """A confirmation's verdict from its speedup interval (see :attr:`Confirmation.verdict`)."""
    if interval[0] > 1.0:
        return GAIN
    if interval[1] < 1.0:
        return SLOWER
    return NO_EFFECT if inside_no_effect_band(interval) else UNDECIDED


def confirmation_verdict_text(interval: tuple[float, float] | None, default_mb_per_s: Sequence[float],
                              best_mb_per_s: Sequence[float]) -> str:
    """:meth:`Confirmation.verdict_text` of a confirmation's runs (MB/s) and its speedup ``interval`` (None:
    none). An undecided one says how many more pairs would settle it: :func:`pairs_to_settle` at its ratio of
    medians and the run-to-run noise pooled over its two sides."""
    import math
    import statistics

    if interval is None:
        return "too few pairs for an interval"
    verdict = confirmation_verdict(interval)
    if verdict == UNDECIDED:
        pairs = min(len(default_mb_per_s), len(best_mb_per_s))
        needed = pairs_to_settle(math.log(statistics.median(best_mb_per_s) / statistics.median(default_mb_per_s)),
                                 pooled_noise_sd_log(default_mb_per_s, best_mb_per_s))
        return f"undecided after {pairs} pairs, not shown to help: {settle_text(needed, pairs)}"
    return {GAIN: "a gain", SLOWER: "slower than the system default",
            NO_EFFECT: f"no effect (interval inside {NO_EFFECT_BAND[0]:.2f}x-{NO_EFFECT_BAND[1]:.2f}x)"}[verdict]


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
    any. When the confirmation does not show a gain (its interval holds 1
    or lies below), values is the system default, and ``how`` says whether
    the proposal was shown slower, shown to have no effect or left
    undecided (:meth:`Confirmation.verdict_text`).
    """

    values: dict[str, Any]
    how: str
    proposed: dict[str, Any]
    confirmation: Confirmation | None = None

    @property
    def rejected(self) -> bool:
        """True when the proposal's own confirmation did not show a gain (so the system default is recommended);
        :attr:`Confirmation.verdict` says whether it was slower, no effect or undecided."""
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
        how = f"the minimal configuration of trial {best.number} ({len(minimal_made.changes)} of its changes matter)"
        if minimal_made.undecided():  # the default is kept (or changes reverted) for want of evidence, not of effect
            how += (f"; {'undecided, reverted' if minimal_made.changes else 'no change was shown to help; undecided'}: "
                    f"{minimal_made.undecided_text(trials.config_of(best))}")
        return space.complete(minimal_made.changes), how
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
    When its confirmation does not show a gain, the system default: "keep the
    system default: the confirmation of <changes> measured 0.93x [0.87-1.10],
    no effect (...)" (or slower, or undecided with the pairs that would settle it)."""
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
               f"{confirmation.verdict_text()} (proposed: {how})")
        return Recommendation(space.default(), how, values, confirmation)
    return Recommendation(values, how, values, confirmation)


def recommended(study, space, workload=None, minimal: bool = True) -> tuple[dict[str, Any], str]:
    """The configuration to use in production and how it was chosen: (values, a line saying which); see
    :func:`recommendation`. Raises when nothing completed."""
    chosen = recommendation(study, space, workload, minimal)
    return chosen.values, chosen.how

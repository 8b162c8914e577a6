"""The minimal configuration: which of the best configuration's changes buy its gain.

A tuned configuration usually changes many knobs, most of them by chance
(the sampler had to put them somewhere). :func:`walk_back` goes from the
incumbent towards the system default, a knob (or a group of knobs the GP
rates negligible) at a time: each step measures the configuration with and
without those changes in interleaved pairs, and keeps the changes only when
reverting them costs more than the noise, i.e. when the 95% bootstrap
interval of median(with) / median(without) lies above 1. Knobs the
environment reported as not applied (striping off Lustre) are reverted
first, without measuring: they cannot matter here.

The result, a :class:`Minimal`, is what ``iobo best`` and ``iobo export``
give by default, with each step's measured contribution.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from iobo.errors import ConfigError
from iobo.measure import bootstrap_speedup, Spread

MINIMAL_ATTR = "minimal"
"""Study attr holding :meth:`Minimal.to_attr` of the latest walk."""
NEGLIGIBLE_SHARE = 0.05
"""Knobs with less than this share of the GP ablation's importance are first tested (reverted) as one group."""


@dataclass(frozen=True)
class Step:
    """One test: ``knobs`` reverted to their defaults together.

    ratio: median MB/s with the changes over median MB/s without (> 1: they
    help); interval: its 95% bootstrap interval; kept: True when the interval
    lies above 1 (the changes stay in the minimal configuration);
    with_mb_per_s / without_mb_per_s: the interleaved runs.
    """

    knobs: tuple[str, ...]
    ratio: float
    interval: tuple[float, float]
    kept: bool
    with_mb_per_s: tuple[float, ...]
    without_mb_per_s: tuple[float, ...]

    def describe(self) -> str:
        verdict = "kept" if self.kept else "dropped: within noise"
        low, high = self.interval
        return (f"{', '.join(self.knobs)}: {self.ratio:.2f}x with vs without, 95% CI {low:.2f}x - {high:.2f}x "
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
        """The step that tested ``knob``, or None."""
        return next((s for s in self.steps if knob in s.knobs), None)

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
                      tuple(s["without_mb_per_s"])) for s in attr["steps"]]
        return cls(attr["from_trial"], dict(attr["changes"]), steps, dict(attr["not_applied"]))


Measure = Callable[[Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]], list[float | None]]
"""Runs (configuration, trial attrs) pairs in order and returns each run's MB/s (None: it failed)."""


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
    time, least important first. not_applied: knobs reverted untested.
    pairs: interleaved (with, without) runs per test (>= 2).
    """
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 2:
        raise ConfigError(f"minimizing needs at least 2 interleaved pairs per test; got pairs={pairs!r}")
    not_applied = {k: v for k, v in (not_applied or {}).items() if k in changed_knobs(space, incumbent)}
    current = revert(space, workload, space.complete(incumbent), list(not_applied))
    changed = changed_knobs(space, current)
    importance = importance or {}
    order = sorted(changed, key=lambda k: (importance.get(k, 1.0), changed.index(k)))
    negligible = [k for k in order if importance and importance.get(k, 1.0) < NEGLIGIBLE_SHARE]
    tests: list[list[str]] = [negligible] if len(negligible) >= 2 else []
    tests += [[k] for k in order if not (len(negligible) >= 2 and k in negligible)]
    steps: list[Step] = []
    while tests:
        knobs = [k for k in tests.pop(0) if k in changed_knobs(space, current)]
        if not knobs:
            continue
        candidate = revert(space, workload, current, knobs)
        runs = []
        for pair in range(pairs):
            attrs = {"minimize_step": len(steps), "minimize_knobs": knobs}
            runs += [(current, {**attrs, "arm": "with"}), (candidate, {**attrs, "arm": "without"})]
        values = measure(runs)
        with_values = tuple(v for v, (_, a) in zip(values, runs) if a["arm"] == "with" and v is not None)
        without_values = tuple(v for v, (_, a) in zip(values, runs) if a["arm"] == "without" and v is not None)
        if not with_values:
            raise ConfigError(f"every run of the configuration being minimised failed while testing {knobs}; "
                              f"see the failed trials' fail_reason")
        if not without_values:  # the changes are needed for the run to work at all
            steps.append(Step(tuple(knobs), float("inf"), (float("inf"), float("inf")), True, with_values, ()))
            continue
        ratio = Spread(with_values).median / Spread(without_values).median
        interval = bootstrap_speedup(without_values, with_values)
        kept = interval[0] > 1.0
        if not kept:
            current = candidate
        elif len(knobs) > 1:  # the group matters as a whole: test its knobs one at a time
            tests = [[k] for k in knobs] + tests
            continue
        steps.append(Step(tuple(knobs), ratio, interval, kept, with_values, without_values))
    changes = {k: current[k] for k in changed_knobs(space, current)}
    return Minimal(from_trial, changes, steps, not_applied)


def recommended(study, space, workload=None) -> tuple[dict[str, Any], str]:
    """The configuration to use in production and how it was chosen: (values, a line saying which).

    The minimal configuration when the study holds one made from its current
    best trial; otherwise the best trial's configuration without the knobs
    the environment reported as not applied (that trial's ``not_applied``
    and the study's frozen knobs). Raises when nothing completed.
    """
    from iobo import trials

    best = trials.best_trial(study)
    if best is None:
        raise ConfigError(f"study {study.study_name!r} has no completed trial yet; run `iobo tune` first")
    attr = study.user_attrs.get(MINIMAL_ATTR)
    if attr and attr["from_trial"] == best.number:
        minimal = Minimal.from_attr(attr)
        return space.complete(minimal.changes), (f"the minimal configuration of trial {best.number} "
                                                 f"({len(minimal.changes)} of its changes matter)")
    values = trials.config_of(best)
    dropped = {**best.user_attrs.get("not_applied", {}), **study.user_attrs.get(trials.FROZEN_ATTR, {})}
    dropped = [k for k in dropped if k in changed_knobs(space, values)]
    if workload is None:
        reverted = {**values, **{k: space[k].default for k in dropped}}
        values = space.complete({p.name: reverted[p.name] for p in space
                                 if p.name in reverted and space.is_active(p, reverted)})
    else:
        values = revert(space, workload, values, dropped)
    note = f"trial {best.number}'s configuration, not minimized (`iobo minimize` tests which changes matter)"
    if dropped:
        note += f"; not applied here, so left at their defaults: {', '.join(dropped)}"
    return values, note

"""``ImpactFirstSampler``: tune the few parameters that matter most first, then widen (TunIO's impact-first tuning).

Each trial the sampler chooses is in one of two phases, recorded as the
trial's user attrs ``impact_phase``, ``active_params`` (the parameters the
base sampler chose in that trial) and ``held_params`` (the others' values):

- ``screening``: until ``screening_trials`` distinct configurations have
  completed, the base sampler has the whole space (iobo's
  :class:`~iobo.samplers.GPSampler`: its start-up Latin hypercube, a
  space-filling screening design);
- ``impact-first``: in stages.  A stage ranks the parameters, makes the
  ``initial_active`` highest active (the first stage) or adds the
  ``widen_by`` highest-ranked inactive ones (later stages), and holds the
  others at the incumbent's values.  The base sampler then chooses the
  active parameters (on that subspace: it models every trial's bandwidth
  against the active parameters only).  A stage ends when ``patience``
  completed trials in a row have not beaten the best measured bandwidth,
  until every parameter is active.  The active set never shrinks.

With ``prior_ranking`` (e.g. :func:`iobo.importance.impact_order` of the
rankings that earlier studies of the same workload saved in the same
storage, as :func:`iobo.tuner.impact_first_sampler` does) screening is
skipped: impact-first from the first trial.

The ranking, made at each stage, is the GP surrogate's ablation from the
system default to the incumbent (fitted to every completed trial;
:meth:`iobo.surrogate.Surrogate.ablation_gains`): what each parameter's
move away from its default gains, so a parameter that matters but is
already at its best value by default takes no active slot; while the
incumbent is the default itself, the GP's main effects
(:meth:`~iobo.surrogate.Surrogate.main_effects`).  With a prior ranking the
two are averaged (:func:`iobo.importance.consensus`).  PED-ANOVA compares
the top 10% of the trials, so it needs 20 or more, longer than a screening.

Held values, per parameter: the incumbent's (the measured configuration with
the best GP posterior mean; before the GP is fitted, the best measured
run), else that of the best measured run that has the parameter (a
``chunk_size`` when the incumbent is contiguous), else the system
default's (:func:`iobo.importance.default_config`); a parameter no trial has had yet
is left to the base sampler.  A conditional parameter joins the active set
with its parent (``chunk_size`` brings ``layout``); one whose parent is held
at another value is simply not asked.  Parameters of every distribution
(categorical, int, float) are ranked and held alike; one seen with two
different distributions is left to the base sampler.  A stage also ends when
its active parameters have no configuration left that no trial has measured
(the base sampler would have to repeat one).  Minimised objectives are
handled as their negation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from iobo import _compat
from iobo.errors import ConfigError
from iobo._gp.encoding import infer_conditions
from iobo.importance import MIN_GP_TRIALS, ablation_view, consensus, normalised
from iobo.trials import default_config
from iobo.samplers._checks import check_int
from iobo.samplers._gp import GPSampler
from iobo.surrogate import TrialData, common_distributions, configuration_key, contains, is_usable

if TYPE_CHECKING:
    from optuna.study import Study

    from iobo.surrogate import Surrogate

PHASE_ATTR, ACTIVE_ATTR, HELD_ATTR = "impact_phase", "active_params", "held_params"
SCREENING, IMPACT_FIRST = "screening", "impact-first"


def _prior_view(prior: Sequence[str] | Mapping[str, float] | None) -> dict[str, float] | None:
    """A prior ranking as importances summing to 1: a dict as given, an ordered list by rank (n, n-1, ..., 1)."""
    if prior is None:
        return None
    fix = ("pass parameter names most important first (e.g. iobo.importance.impact_order of stored rankings) "
           "or a dict name -> importance >= 0, or None to screen first")
    if isinstance(prior, Mapping):
        ok = all(isinstance(n, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                 and math.isfinite(v) and v >= 0 for n, v in prior.items())
        view = {n: float(v) for n, v in prior.items()} if ok else {}
    else:
        names = list(prior) if not isinstance(prior, str) else []
        ok = all(isinstance(n, str) for n in names) and len(set(names)) == len(names)
        view = {n: float(len(names) - i) for i, n in enumerate(names)} if ok else {}
    if not view:
        raise ConfigError(f"ImpactFirstSampler prior_ranking must be a non-empty ranking of distinct names; "
                          f"got {prior!r}; {fix}")
    return normalised(view)


@dataclass(frozen=True)
class _Plan:
    """One trial's decision: active is None while screening (the base sampler has the whole space)."""

    key: tuple[str, int]
    active: frozenset[str] | None
    held: Mapping[str, Any]


class ImpactFirstSampler(BaseSampler):
    """Impact-first tuning of one objective (bandwidth in MB/s, maximised, in iobo's tuner).

    base: the sampler choosing the active parameters (default: iobo's
    ``GPSampler`` whose start-up design is the screening); seed: the one seed
    of the default base sampler and of the ranking's candidate sample
    (``None``: drawn once now); screening_trials: distinct completed
    configurations before the first ranking (the default runs count once);
    initial_active: parameters active after screening; patience: completed
    trials without a new best bandwidth before the active set widens;
    widen_by: parameters added at each widening; prior_ranking: parameter
    names most important first, or ``name -> importance``, from earlier
    studies of a similar workload; when given, no screening.
    """

    def __init__(
        self,
        base: BaseSampler | None = None,
        *,
        seed: int | None = None,
        screening_trials: int = 10,
        initial_active: int = 3,
        patience: int = 5,
        widen_by: int = 1,
        prior_ranking: Sequence[str] | Mapping[str, float] | None = None,
    ) -> None:
        name = "ImpactFirstSampler"
        if seed is not None:
            check_int(name, "seed", seed, 0, "pass a non-negative integer or None")
        self._seed = int(seed) if seed is not None else int(np.random.SeedSequence().generate_state(1)[0])
        self._screening = check_int(name, "screening_trials", screening_trials, MIN_GP_TRIALS,
                                    f"the GP ranking needs {MIN_GP_TRIALS} distinct configurations; e.g. 10")
        self._initial = check_int(name, "initial_active", initial_active, 1, "e.g. 3")
        self._patience = check_int(name, "patience", patience, 1, "e.g. 5")
        self._widen_by = check_int(name, "widen_by", widen_by, 1, "e.g. 1")
        self._prior = _prior_view(prior_ranking)
        if base is not None and not isinstance(base, BaseSampler):
            raise ConfigError(f"ImpactFirstSampler base must be an Optuna sampler; got {base!r}; "
                              "pass e.g. iobo.samplers.GPSampler(seed=0), or None for that default")
        if base is None:  # with a prior, the GP's own short start-up, over the active parameters only
            base = GPSampler(seed=self._seed, **({"n_startup_trials": self._screening} if self._prior is None else {}))
        self._base = base
        self._plan: _Plan | None = None

    # -- Optuna's sampler interface --------------------------------------------------
    def reseed_rng(self) -> None:
        self._base.reseed_rng()

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._base.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None) -> None:
        self._base.after_trial(study, trial, state, values)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        space = self._base.infer_relative_search_space(study, trial)
        active = self._plan_of(study, trial).active
        return space if active is None else {n: d for n, d in space.items() if n in active}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self._base.sample_relative(study, trial, search_space)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        plan = self._plan_of(study, trial)
        held = plan.held.get(param_name)
        if (
            plan.active is not None
            and param_name not in plan.active
            and param_name in plan.held
            and contains(param_distribution, held)
        ):
            return held
        return self._base.sample_independent(study, trial, param_name, param_distribution)

    # -- the plan of a trial ------------------------------------------------------------
    def _plan_of(self, study: Study, trial: FrozenTrial) -> _Plan:
        """This trial's plan, made (and recorded on the trial) on the first call."""
        key = (study.study_name, trial.number)
        if self._plan is None or self._plan.key != key:
            self._plan = plan = self._make_plan(study, trial)
            set_attr = _compat.set_frozen_trial_attr
            set_attr(study, trial, PHASE_ATTR, SCREENING if plan.active is None else IMPACT_FIRST)
            set_attr(study, trial, ACTIVE_ATTR, sorted(_names(study) if plan.active is None else plan.active))
            if plan.active is not None:
                set_attr(study, trial, HELD_ATTR, dict(plan.held))
        return self._plan

    def _make_plan(self, study: Study, trial: FrozenTrial) -> _Plan:
        if len(study.directions) != 1:
            raise ConfigError(
                f"ImpactFirstSampler tunes one objective; study {study.study_name!r} has directions "
                f"{[d.name for d in study.directions]}; use a single objective (bandwidth in MB/s)"
            )
        key = (study.study_name, trial.number)
        every = study.get_trials(deepcopy=False)
        trials = [t for t in every if t.number != trial.number]
        sign = -1.0 if study.direction == StudyDirection.MINIMIZE else 1.0
        complete = sorted((t for t in trials if is_usable(t, log=False)), key=lambda t: -sign * t.value)  # best first
        distinct = len({configuration_key(t.params) for t in complete})
        if self._prior is None and distinct < self._screening:
            return _Plan(key, None, {})

        distributions = common_distributions(every)
        names = list(distributions)
        previous = next((t for t in reversed(trials) if t.user_attrs.get(PHASE_ATTR) == IMPACT_FIRST), None)
        if previous is not None:
            active = set(previous.user_attrs[ACTIVE_ATTR])
            if active >= set(names) or not (self._stalled(complete, active, sign)
                                            or self._exhausted(trials, distributions, active)):
                return _Plan(key, frozenset(active), previous.user_attrs[HELD_ATTR])

        # a new stage: rank, widen, hold the other parameters at the incumbent's values
        surrogate = None
        if distinct >= self._screening:
            from iobo.surrogate import Surrogate

            surrogate = Surrogate.from_trials(complete, minimize=sign < 0)
        active = set(previous.user_attrs[ACTIVE_ATTR]) if previous is not None else set()
        joining = self._widen_by if previous is not None else self._initial
        default = default_config(every)
        conditions = infer_conditions(names, [t.params for t in complete])

        def with_parents(chosen: set[str]) -> set[str]:
            while not {conditions[n][0] for n in chosen if n in conditions} <= chosen:
                chosen = chosen | {conditions[n][0] for n in chosen if n in conditions}
            return chosen

        ranked = [n for n in self._ranking(names, surrogate, default) if n not in active]
        active = with_parents(active | set(ranked[:joining]))
        for name in ranked[joining:]:  # widen further while the active parameters have nothing left to measure
            if name not in active and self._exhausted(trials, distributions, active):
                active = with_parents(active | {name})

        held = surrogate.incumbent if surrogate is not None else {}
        for t in complete:  # best measured first
            for name, value in t.params.items():
                held.setdefault(name, value)
        for name, value in (default or {}).items():
            held.setdefault(name, value)
        return _Plan(key, frozenset(active), {n: v for n, v in held.items() if n not in active})

    def _ranking(self, names: list[str], surrogate: Surrogate | None, default: dict | None) -> list[str]:
        """Parameters, most important first: the mean of the prior's importances and the GP's view
        (when fitted): its ablation gains from the system default to the incumbent, or its main effects
        while the incumbent is the default; the study's parameters neither ranks come last, in name order."""
        views = {"prior": self._prior} if self._prior is not None else {}
        if surrogate is not None:
            ablation = ablation_view(surrogate, default)
            if ablation is not None:
                views["gp-ablation"] = ablation
            else:
                views["gp-sensitivity"] = normalised(surrogate.main_effects(self._seed))
        ranked = consensus(views)
        return ranked + sorted(set(names) - set(ranked))

    def _stalled(self, complete: list[FrozenTrial], active: set[str], sign: float) -> bool:
        """Whether the last ``patience`` completed trials with this active set brought no new best
        (sign: +1 maximising, -1 minimising)."""
        mine = sorted((t for t in complete if t.user_attrs.get(PHASE_ATTR) == IMPACT_FIRST
                       and set(t.user_attrs.get(ACTIVE_ATTR, ())) == active), key=lambda t: t.number)
        if len(mine) < self._patience:
            return False
        best = max((sign * t.value for t in complete if t.number < mine[0].number), default=-math.inf)
        since = 0
        for t in mine:
            since = 0 if sign * t.value > best else since + 1
            best = max(best, sign * t.value)
        return since >= self._patience

    @staticmethod
    def _exhausted(trials: list[FrozenTrial], distributions: Mapping[str, BaseDistribution], active: set[str]) -> bool:
        """Whether every configuration of the active parameters has been measured, is being measured
        or failed (in some trial, whatever the held values): the base sampler could only repeat one."""
        data = TrialData.from_trials(trials, {n: d for n, d in distributions.items() if n in active})
        taken = {tuple(r) for part in (data.rows, data.pending, data.failed) for r in part.tolist()}
        return len(taken) >= data.encoding.size()


def _names(study: Study) -> list[str]:
    """Every parameter of the study (with one distribution), in name order."""
    return list(common_distributions(study.get_trials(deepcopy=False)))


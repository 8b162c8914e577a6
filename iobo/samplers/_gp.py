"""``GPSampler``: the Optuna adapter over :mod:`iobo._gp`.

A general Optuna sampler (one objective, maximised or minimised) whose every
parameter is an input of the GP; :class:`iobo.surrogate.TrialData` turns the
study's trials into the GP's data:

- the relative search space is every parameter any trial has suggested,
  of any distribution: categorical, int and float (plain, log, step), in
  any mix (a union, so define-by-run conditional parameters take part;
  which parameter depends on which values is inferred from the completed
  trials; a parameter whose absence no one parent's values explain is
  modelled as unconditional, and a configuration measured without it is
  not proposed again with any value of it).  Int and float ranges are
  searched on a grid of at most
  :data:`iobo.surrogate.GRID_LEVELS` values (every value of a smaller
  range) and the values trials took; size parameters that act through
  their ratio (``cb_buffer_size`` and ``striping_unit``...) also enter the
  GP as that ratio;
- one decision about what is not modelled: a parameter seen with two
  different distributions (its range or choices changed during the study)
  is left out of the GP and drawn at random (seeded), with a warning the
  first time;
- COMPLETE trials are the data, modelled as ``log(value)`` while every
  value is positive (``log_values``), negated when minimising; FAIL and
  PRUNED trials (and values the model cannot take) are left out of the
  model and never proposed again; RUNNING trials are pending points, at
  what the sampler proposed for them (recorded in the trial's system attr
  ``iobo:proposal`` before the next proposal is made: ``n_jobs > 1``
  threads get distinct configurations);
- until ``n_startup_trials`` distinct configurations have completed, the
  user's ``initial_params`` and then a Latin hypercube are suggested (a
  hypercube point already measured is replaced by the same point of the
  next hypercube); enqueued trials (the tuner's default runs) come first
  as Optuna runs them.  A parameter the GP has not seen yet (a new one, or
  one the model expected to be inactive) is drawn at random, seeded by the
  sampler seed, the trial and the parameter's name.

torch, gpytorch and the GP modules are imported on first use only; while
the GP works, BLAS and OpenMP run single-threaded (threadpoolctl): for
matrices of a few hundred rows their threads cost more than they give,
several times more on a loaded 2-core machine.
"""

from __future__ import annotations

import threading
import warnings
import zlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from iobo import _compat
from iobo.errors import ConfigError
from iobo._gp.design import latin_index
from iobo._gp.optim import Excluded
from iobo.samplers._checks import check_int
from iobo.samplers._prior_mean import PriorMean, WeightedPrior
from iobo.space import SIZE_RATIOS
from iobo.surrogate import PROPOSAL_ATTR, Surrogate, TrialData, configuration_key, contains, grid, is_usable
from iobo.surrogate import FOLLOWS_ATTR, PRIOR_WEIGHT_ATTR, SLICE_ATTR

REFIT_GROWTH = 1.1  # re-optimise the GP hyperparameters when the data grew by 10%
STARTUP_BLOCKS = 20  # hypercubes tried for a start-up point that was not measured yet

if TYPE_CHECKING:
    from optuna.study import Study


class GPSampler(BaseSampler):
    """Bayesian optimisation with a Gaussian process over every parameter of an Optuna study.

    seed: the one seed of every random choice (``None``: drawn once now);
    n_startup_trials: distinct completed configurations before the GP takes
    over (the default runs count once); initial_params: configurations to try
    first, an expert's guesses (``name -> value``; missing names are filled
    from the Latin hypercube); max_repeats: the few most promising
    configurations may be re-measured until measured this many times, when
    the noise-aware acquisition prefers that to a new configuration (1, the
    default: never; benchmarks with CV 20-40% found new configurations the
    better use of a run, and the tuner re-measures its final pick anyway);
    incumbent_runs: the configuration with the best posterior mean is
    re-measured, before anything new is proposed, until measured this many
    times (1: never): a lucky single run then cannot stay the incumbent, and
    the runs it takes let the GP tell noise from signal (see
    :func:`iobo._gp.propose.propose`);
    max_enumerate: spaces of at most this many configurations
    have their acquisition maximised exactly, larger ones by local search;
    ratios: ``(first, second)`` parameter pairs that act through their
    ratio, each modelled as one more GP input ``log2(first / second)``
    (default :data:`iobo.space.SIZE_RATIOS`; ``()`` for none; pairs whose
    parameters are not both in the study, or not positive numbers, are
    left out); log_values: model ``log(value)`` (True: non-positive values
    count as failed runs), the values themselves (False), or ``log`` while
    every completed value is positive (None, the default); prior_mean: a
    model of the objective to start from (an object with ``predict(params:
    Sequence[dict]) -> np.ndarray``: ``n`` configurations in, their
    predicted ``log(value)`` up to a constant out; e.g. a warm start's
    :class:`iobo.transfer.TransferModel`): the GP models what it leaves
    unexplained, weighted at each fit by how well it predicts the study's
    own runs (:mod:`iobo.samplers._prior_mean`; the weight is recorded on
    each trial the GP proposes, system attr ``PRIOR_WEIGHT_ATTR``);
    explore_every: every this many runs (default 3; 0: never), while the
    space holds more than 100 configurations per run, the proposal holds one
    parameter at the value measured least often so far, the sizes that act
    through a ratio to it (``ratios``) at the matching size, and lets the
    acquisition choose the rest (see :mod:`iobo._gp.propose`): a value that
    pays only where its neighbours lose (4 MiB chunks on 4 MiB stripes)
    looks bad to a smooth model and is otherwise never measured.  A slice
    run that measured well above its prediction is followed: the next
    proposal tries its held values in the incumbent's context.  What a
    slice held and predicted is recorded on its trial (system attr
    ``SLICE_ATTR``), and the trial that follows it names it
    (``FOLLOWS_ATTR``), so a resumed study follows each slice once.
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        n_startup_trials: int = 5,
        initial_params: Sequence[Mapping[str, Any]] = (),
        max_repeats: int = 1,
        incumbent_runs: int = 1,
        max_enumerate: int = 100_000,
        ratios: Sequence[tuple[str, str]] = SIZE_RATIOS,
        log_values: bool | None = None,
        prior_mean: PriorMean | None = None,
        explore_every: int = 3,
        identify_from: int = 0,
    ) -> None:
        name = "GPSampler"
        if seed is not None:
            check_int(name, "seed", seed, 0, "pass a non-negative integer or None")
        self._seed = int(seed) if seed is not None else int(np.random.SeedSequence().generate_state(1)[0])
        self._n_startup = check_int(name, "n_startup_trials", n_startup_trials, 1, "use 1 to start modelling at once")
        self._max_repeats = check_int(name, "max_repeats", max_repeats, 1, "use 1 to never re-measure")
        self._incumbent_runs = check_int(name, "incumbent_runs", incumbent_runs, 1, "use 1 to never re-measure it")
        self._max_enumerate = check_int(name, "max_enumerate", max_enumerate, 1, "e.g. 100000")
        self._explore_every = check_int(name, "explore_every", explore_every, 0, "use 0 to never explore a slice")
        self._identify_from = check_int(name, "identify_from", identify_from, 0, "use 0 to never stop searching")
        self._finalists = False  # identify_now: re-measure the best few from now on, however sparse the space
        if log_values not in (None, True, False):
            raise ConfigError(f"GPSampler log_values must be True, False or None; got {log_values!r}; "
                              "None models log(value) while every value is positive")
        self._log = log_values
        if isinstance(initial_params, Mapping) or not all(isinstance(p, Mapping) for p in initial_params):
            raise ConfigError(
                f"GPSampler initial_params must be a sequence of {{name: value}} dicts; got {initial_params!r}; "
                "wrap a single configuration in a list"
            )
        self._initial = [dict(p) for p in initial_params]
        if isinstance(ratios, (str, Mapping)) or not all(
            isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(n, str) for n in pair) for pair in ratios
        ):
            raise ConfigError(
                f"GPSampler ratios must be a sequence of (first, second) parameter-name pairs; got {ratios!r}; "
                "e.g. [('cb_buffer_size', 'striping_unit')], or () for none"
            )
        self._ratios = tuple(tuple(pair) for pair in ratios)
        self._prior = WeightedPrior(prior_mean) if prior_mean is not None else None  # the prior mean and its weight
        self._warm: dict[tuple, tuple[np.ndarray, int]] = {}  # encoding -> (hyperparameters, runs they were fitted on)
        self._seen: dict[str, tuple[int, dict, set]] = {}  # study -> (finished trials read, space, conflicting)
        self._startup_block: dict[tuple[str, int], int] = {}  # (study, trial number) -> hypercube of its start-up point
        self._warned: set[str] = set()  # parameters the warning about changed distributions was given for
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_lock"]  # a lock does not pickle; a copy gets its own
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- Optuna's sampler interface --------------------------------------------------
    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        self._check_direction(study)
        return self._search_space(study)

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        fixed = trial.system_attrs.get("fixed_params", {})
        if not search_space or all(name in fixed for name in search_space):
            return {}
        with self._lock:  # one proposal at a time, each recorded before the next reads the pending trials
            if self._prior is not None:  # the prior mean's weight in this proposal's fit (None: no fit)
                self._prior.weight = None
            config = self._propose(study, trial, search_space)
            _compat.set_trial_system_attr(study, trial, PROPOSAL_ATTR, config)
            if self._prior is not None and self._prior.weight is not None:
                _compat.set_trial_system_attr(study, trial, PRIOR_WEIGHT_ATTR, self._prior.weight)
        return config

    def _propose(self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if self._in_startup(study):
            return self._startup_config(study, trial, search_space)
        from threadpoolctl import threadpool_limits

        from iobo._gp.propose import propose

        data = self._data(study, search_space, exclude=trial.number)
        if len(data.targets) < 2:  # e.g. every start-up run failed: nothing to model yet
            return self._startup_config(study, trial, search_space)
        with threadpool_limits(1):  # BLAS/OpenMP threads only slow down these small problems
            fitted = self._fit(data, remember=True).fit
            rng = np.random.default_rng([self._seed, trial.number])
            followed, follow = self._surprising_slice(study, data)
            proposal = propose(data.encoding, fitted, rng, data.pending, data.failed, self._max_repeats,
                               self._max_enumerate, self._incumbent_runs, self._explore_every, follow,
                               self._identify_from, self._finalists)
        if follow:
            _compat.set_trial_system_attr(study, trial, FOLLOWS_ATTR, followed)
        if proposal.held:
            held = {data.encoding.params[i].name: data.encoding.params[i].choices[k] for i, k in proposal.held}
            _compat.set_trial_system_attr(study, trial, SLICE_ATTR,
                                          {"held": held, "mean": proposal.mean, "sd": proposal.sd})
        return data.encoding.to_config(proposal.row)

    @staticmethod
    def _surprising_slice(study: Study, data: TrialData) -> tuple[int | None, tuple[tuple[int, int], ...]]:
        """The latest slice trial (system attr ``SLICE_ATTR``) and its held ``(position, choice)`` pairs,
        when it completed :func:`~iobo._gp.propose.surprising` ly well and no later trial followed it
        (system attr ``FOLLOWS_ATTR``); else ``(None, ())``.  Kept in the study, so a resumed or
        parallel study follows the same slice once."""
        from iobo._gp.propose import surprising

        trials = study.get_trials(deepcopy=False)
        numbers = [t.number for t in trials if SLICE_ATTR in t.system_attrs]
        if not numbers or any(t.system_attrs.get(FOLLOWS_ATTR) == numbers[-1] for t in trials):
            return None, ()
        where = [i for i, t in enumerate(data.usable) if t.number == numbers[-1]]
        if not where:  # still running, failed, or a value the model cannot take
            return None, ()
        record = next(t for t in trials if t.number == numbers[-1]).system_attrs[SLICE_ATTR]
        if not surprising(float(data.targets[where[0]]), record["mean"], record["sd"]):
            return None, ()
        encoding, held = data.encoding, []
        for name, value in record["held"].items():
            if name not in encoding.names:
                return None, ()
            param = encoding.params[encoding.names.index(name)]
            if (type(value), value) not in param.keys:
                return None, ()
            held.append((encoding.names.index(name), param.index(value)))
        return numbers[-1], tuple(held)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        if param_name not in self._conflicting(study) and self._in_startup(study):
            j = self._startup_index(study, trial)
            block = self._startup_block.get((study.study_name, trial.number), 0)
            return self._startup_value(param_name, param_distribution, j, block)
        stream = [self._seed, trial.number, zlib.crc32(param_name.encode())]
        random = RandomSampler(seed=int(np.random.default_rng(stream).integers(2**31)))
        return random.sample_independent(study, trial, param_name, param_distribution)

    # -- the start-up design ---------------------------------------------------------
    def _startup_value(self, name: str, distribution: BaseDistribution, j: int, block: int) -> Any:
        """Parameter ``name`` of start-up point ``j``: the user's initial value, else the
        Latin hypercube's over the distribution's grid, taken ``block`` hypercubes further on
        (to avoid a measured point)."""
        if block == 0 and j < len(self._initial) and name in self._initial[j]:
            value = self._initial[j][name]
            if contains(distribution, value):
                return value
        choices = grid(distribution)
        return choices[latin_index(self._seed, name, len(choices), j + block * self._n_startup, self._n_startup)]

    def _startup_config(self, study: Study, trial: FrozenTrial, search_space: Mapping[str, BaseDistribution]):
        """Start-up point of the parameters seen so far, not one measured, pending or failed already
        (the default runs, an earlier point): the same point of a later hypercube instead.  The
        user's initial points are taken as given."""
        j = self._startup_index(study, trial)
        data = self._data(study, search_space, exclude=trial.number)
        taken = Excluded([tuple(r) for part in (data.rows, data.pending, data.failed) for r in part.tolist()])
        for block in range(STARTUP_BLOCKS):
            config = {name: self._startup_value(name, d, j, block) for name, d in search_space.items()}
            if j < len(self._initial) or tuple(data.row(config).tolist()) not in taken:
                break
        self._startup_block[(study.study_name, trial.number)] = block
        return config

    # -- the incumbent --------------------------------------------------------------
    def incumbent(self, study: Study) -> tuple[dict[str, Any], float]:
        """The measured configuration with the best posterior mean, and that mean.

        Noise-aware: a configuration measured several times, or whose
        neighbours agree, beats one lucky run.  Returns ``(params, value)``
        with value in the objective's unit (MB/s): ``exp`` of the posterior
        mean of ``log(value)``, i.e. a geometric-mean estimate.
        """
        self._check_direction(study)
        data = self._data(study, self._search_space(study))
        if not len(data.targets):
            raise ConfigError(
                "GPSampler.incumbent needs at least one COMPLETE trial with a value it can model; "
                f"study {study.study_name!r} has none; run trials first"
            )
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            surrogate = self._fit(data, remember=False)
        return self._params_of(data, surrogate.fit.rows[surrogate.fit.best]), surrogate.incumbent_mb_per_s

    # -- telling the best few apart before a stop --------------------------------------
    def identify_now(self) -> None:
        """From the next proposal on, re-measure the leader or the challenger among the best measured
        configurations (top-two sampling, :func:`iobo._gp.propose.top_two`) instead of searching, however few
        runs the space has seen: what a study does once its stop rule said stop (:class:`iobo.tuner.Tuner`)."""
        self._finalists = True

    def finalists_undecided(self, study: Study) -> bool:
        """Whether a re-measurement would still help tell the best measured configurations apart: the leader
        among the ``IDENTIFY_CANDIDATES`` best posterior means is not the best in every joint posterior draw
        (:func:`iobo._gp.propose.top_two` would propose a run).  False before the GP can be fitted (fewer than
        two completed runs it can model)."""
        self._check_direction(study)
        data = self._data(study, self._search_space(study))
        if len(data.targets) < 2:
            return False
        from threadpoolctl import threadpool_limits

        from iobo._gp.propose import top_two

        with threadpool_limits(1):
            fitted = self._fit(data, remember=False).fit
            rng = np.random.default_rng([self._seed, len(study.get_trials(deepcopy=False)), 2])
            no_pending = np.zeros((0, len(data.encoding.params)), dtype=np.int64)
            return top_two(data.encoding, fitted, rng, no_pending) is not None

    # -- helpers --------------------------------------------------------------------
    @staticmethod
    def _check_direction(study: Study) -> None:
        if len(study.directions) != 1:
            raise ConfigError(
                f"GPSampler optimises one objective; study {study.study_name!r} has {len(study.directions)}; "
                "use a single-objective study (e.g. bandwidth in MB/s)"
            )

    def _in_startup(self, study: Study) -> bool:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        distinct = {configuration_key(t.params) for t in trials if is_usable(t, log=bool(self._log))}
        return len(distinct) < self._n_startup

    @staticmethod
    def _startup_index(study: Study, trial: FrozenTrial) -> int:
        """How many earlier trials the sampler chose (enqueued ones excluded)."""
        return sum(
            1
            for t in study.get_trials(deepcopy=False)
            if t.number < trial.number and "fixed_params" not in t.system_attrs
        )

    def _search_space(self, study: Study) -> dict[str, BaseDistribution]:
        """Every parameter seen, in name order, but those seen with two different distributions
        (left to independent sampling, with a warning the first time).

        Finished trials never change, so what the leading run of them says is
        kept per study and only later trials are read again.
        """
        trials = study.get_trials(deepcopy=False)
        done, space, conflicting = self._seen.get(study.study_name, (0, {}, set()))
        if done > len(trials):  # another study of the same name
            done, space, conflicting = 0, {}, set()
        space, conflicting = dict(space), set(conflicting)

        def add(t: FrozenTrial) -> None:
            for name, dist in t.distributions.items():
                if space.setdefault(name, dist) is not dist and space[name] != dist:
                    conflicting.add(name)

        while done < len(trials) and trials[done].state.is_finished():
            add(trials[done])
            done += 1
        self._seen[study.study_name] = (done, dict(space), set(conflicting))
        for t in trials[done:]:
            add(t)
        for name in sorted(conflicting - self._warned):
            self._warned.add(name)
            warnings.warn(
                f"GPSampler models a parameter with one distribution; {name!r} was suggested with two "
                f"(e.g. {space[name]}), so it is left out of the GP and drawn at random from now on; "
                "keep a parameter's range and choices the same for the whole study",
                stacklevel=2,
            )
        return {name: space[name] for name in sorted(space) if name not in conflicting}

    def _conflicting(self, study: Study) -> set[str]:
        """Parameters seen with two different distributions (as of the last :meth:`_search_space`)."""
        return self._seen.get(study.study_name, (0, {}, set()))[2]

    def _data(self, study: Study, search_space: Mapping[str, BaseDistribution], exclude: int = -1) -> TrialData:
        """The study's trials (but trial number ``exclude``) in the GP's terms over ``search_space``."""
        trials = [t for t in study.get_trials(deepcopy=False) if t.number != exclude]
        minimize = study.direction == StudyDirection.MINIMIZE
        return TrialData.from_trials(trials, search_space, minimize, self._ratios, self._log)

    def _fit(self, data: TrialData, remember: bool) -> Surrogate:
        """The GP on ``data``; hyperparameters re-optimised once the data grew by
        ``REFIT_GROWTH`` since they last were (every trial early on, every 10th at
        100 trials), otherwise kept and the GP only conditioned on the new runs."""
        encoding = data.encoding
        key = (tuple((p.name, len(p.choices)) for p in encoding.params), encoding.ratio_names, data.log)
        theta, fitted_at = self._warm.get(key, (None, 0))
        n = len(data.targets)
        optimise = n >= REFIT_GROWTH * fitted_at
        fit = lambda d: Surrogate.from_data(d, theta, optimise=optimise)  # noqa: E731
        surrogate = self._prior.fit(data, fit) if self._prior is not None else fit(data)  # with the prior mean
        if remember and (optimise or theta is None):
            self._warm = {key: (surrogate.fit.posterior.theta, n)}
        return surrogate

    @staticmethod
    def _params_of(data: TrialData, row: np.ndarray) -> dict[str, Any]:
        """The full parameters of the latest trial measuring ``row`` (so parameters left out come too)."""
        for t in reversed(data.usable):
            if np.array_equal(data.row(t.params), row):
                return dict(t.params)
        return data.encoding.to_config(row)

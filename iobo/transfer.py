"""Warm start: a new study starts from earlier studies of the same kernel in other contexts.

The earlier studies in the storage that tuned the same kernel in another
context (other ranks, sizes or file system, :mod:`iobo.context`) give:

- data: every completed tuning trial, as its speedup over its own study's
  baseline (bandwidth / median of the study's default runs), so that a
  faster machine or scale does not look like a better configuration;
- one GP (:class:`iobo.surrogate.Surrogate`, the sampler's model) over the
  configuration *and* the context (``CONTEXT_FEATURES``: ranks, bytes per
  call, file system), fitted to ``log(speedup)`` of all those trials
  (:func:`fit_transfer`, a :class:`TransferModel`);
- candidates: the GP's own optimum at the new context (its posterior mean
  maximised over every combination of the values the earlier studies
  measured, :meth:`TransferModel.optimum`), and each earlier study's best
  measured configurations, all ranked by the GP's predicted speedup at the
  new study's context.

Earlier studies are related (:func:`related_studies`) when they tuned the
same kernel, or, for a program (``iobo tune --command``), the same command
template with the same objective; the contexts (ranks, access size, file
system) then tell them apart as the GP's inputs.

``iobo tune`` (warm start on by default when such studies exist;
``Tuner(warm_start=True)``) queues the best-ranked candidates right after
the default runs (before the rules' trials), each with origin
``transfer:<study>#<trial>`` (the optimum: ``transfer:optimum``) and the predicted speedup in the trial attr
``predicted_speedup``, so the report can set the prediction against the
measurement. After that the GP sampler decides with the model as its prior
mean for the whole study (``GPSampler(prior_mean=...)``), weighted at each
fit by how well it predicts the new study's own runs
(:mod:`iobo.samplers._prior_mean`): a wrong transfer loses its weight
within a few runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iobo import trials
from iobo.context import CONTEXT_ATTR, Context, study_context
from iobo.errors import ConfigError, SpaceError
from iobo.space import Space, Workload

CONTEXT_FEATURES = ("ranks", "access_bytes", "fs_type")
"""Context fields the GP takes as inputs: what is known before the new study's first run."""
FEATURE_PREFIX = "context."
TOP_PER_STUDY = 10
"""Candidates: the best this many measured configurations (other than the default) of each earlier study, ranked
at the new context by the GP (which also discounts a lucky single run)."""
MIN_TRIALS = 2
"""Completed tuning trials an earlier study needs to take part."""
ENUMERATE_AT_MOST = 4096
"""The optimum's search tries every combination of the measured values when there are at most this many, else
climbs one parameter at a time from the best measured configurations (:data:`CLIMB_STARTS` of them)."""
CLIMB_STARTS = 8
OPTIMUM_ORIGIN = "transfer:optimum"


@dataclass(frozen=True)
class Transferred:
    """A configuration from an earlier study, with the GP's prediction for the new context.

    values: the whole configuration; source, trial: the earlier study and
    its trial that measured it (the GP's optimum, measured by no study:
    source ``"optimum"``, trial None); measured_speedup: its bandwidth over
    that study's baseline (None for the optimum); predicted_speedup: the GP's
    posterior mean speedup at the new context (``exp`` of the mean of
    ``log(speedup)``); basis: what the GP was fitted to, in words.
    """

    values: dict[str, Any]
    source: str
    trial: int | None
    measured_speedup: float | None
    predicted_speedup: float
    basis: str

    @property
    def origin(self) -> str:
        return OPTIMUM_ORIGIN if self.trial is None else f"transfer:{self.source}#{self.trial}"

    @property
    def reason(self) -> str:
        if self.trial is None:
            return (f"the transfer GP's optimum here, measured by no earlier study; predicted "
                    f"{self.predicted_speedup:.2f}x by {self.basis}")
        return (f"{self.measured_speedup:.2f}x over the default in study {self.source!r} (trial {self.trial}); "
                f"predicted {self.predicted_speedup:.2f}x here by {self.basis}")

    def trial_attrs(self) -> dict[str, Any]:
        """The user attrs of the search trial that measures it."""
        return {"role": trials.ROLE_SEARCH, trials.ORIGIN_ATTR: self.origin, "origin_reason": self.reason,
                "predicted_speedup": self.predicted_speedup}


def related_studies(storage, subject: "str | Context", exclude: str | None = None) -> list:
    """Studies in ``storage`` of the same subject (``exclude`` left out), with at least ``MIN_TRIALS`` completed
    tuning trials and a baseline.

    subject: a kernel's name, or a new study's :class:`~iobo.context.Context`: its kernel, else its command
    (a study of a program is related to the studies of the same command template and objective, whatever
    their ranks, nodes or file system: the context tells those apart)."""
    import optuna

    from iobo.storage import open_storage

    if isinstance(subject, str):
        subject = Context(ranks=1, kernel=subject)
    storage = open_storage(storage)
    found = []
    for summary in optuna.get_all_study_summaries(storage):
        if summary.study_name == exclude or not _same_subject(summary.user_attrs, subject):
            continue
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        done = trials.tuning_trials(study)
        if len(done) >= MIN_TRIALS and trials.baseline(done) is not None:
            found.append(study)
    return found


def _same_subject(attrs: Mapping[str, Any], subject: Context) -> bool:
    """Whether a study with these attrs tuned ``subject``'s kernel, or its command (same template, same
    objective when the subject's study records one)."""
    if subject.kernel is not None:
        return attrs.get("kernel") == subject.kernel
    if subject.command is None:
        return False
    command = attrs.get("command") or {}
    stored = (attrs.get(CONTEXT_ATTR) or {}).get("command") or command.get("template")
    return stored is not None and " ".join(str(stored).split()) == " ".join(subject.command.split())


@dataclass(frozen=True)
class TransferModel:
    """The contextual GP over earlier studies' trials, read at one new context.

    surrogate: the GP (inputs: the configuration and the context features;
    output: ``log(speedup)`` over each study's baseline); space: the new
    study's space; here: the new context's feature values; candidates: each
    earlier study's best configurations as ``(study, trial, configuration,
    speedup)``; contexts: the earlier studies' contexts by name; basis: what
    the GP was fitted to, in words; measured_values: for each parameter the
    earlier trials varied, the values they measured (in the space's order):
    where :meth:`optimum` looks.

    Also the prior mean of :class:`iobo.samplers.GPSampler` (``prior_mean``):
    :meth:`predict` gives the transferred ``log(speedup)`` of the new study's
    configurations.
    """

    surrogate: Any
    space: Space
    here: dict[str, Any]
    candidates: tuple
    contexts: dict[str, Context]
    basis: str
    measured_values: dict[str, tuple] = None  # type: ignore[assignment]

    def predict(self, params: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Predicted ``log(speedup)`` over the default at the new context (``n``) of ``n`` configurations
        (parameters not in the space are ignored, missing ones are at their defaults; a configuration
        the space does not allow gets the prediction of the default)."""
        rows = []
        for values in params:
            try:
                config = self.space.complete({k: v for k, v in values.items() if k in self.space})
            except SpaceError:
                config = self.space.default()
            rows.append(self.surrogate.encoding.to_row({**config, **self.here}))
        if not rows:
            return np.zeros(0)
        mean, _ = self.surrogate.log_posterior(np.array(rows))
        return np.asarray(mean, dtype=float)

    def describe(self) -> str:
        """One line naming the earlier studies and their contexts."""
        studies = "; ".join(f"{name} ({context.describe()})" for name, context in self.contexts.items())
        n = len(self.contexts)
        return f"warm start from {n} earlier stud{'y' if n == 1 else 'ies'}: {studies}"

    def optimum(self, workload: Workload, frozen: Mapping[str, str] = ()) -> Transferred | None:
        """The configuration with the highest predicted speedup here among every combination of the values the
        earlier studies measured (the other parameters and ``frozen`` ones at their defaults, each repaired to
        ``workload``): every combination when there are at most :data:`ENUMERATE_AT_MOST`, else the best of a
        climb, one parameter at a time, from each of the :data:`CLIMB_STARTS` best measured configurations.
        None when no parameter was varied or the optimum is the system default."""
        default = self.space.default()
        pinned = {k: default[k] for k in frozen or () if k in default}
        free = {k: v for k, v in (self.measured_values or {}).items() if k not in pinned}
        if not free:
            return None
        size = math.prod(len(v) for v in free.values())
        if size <= ENUMERATE_AT_MOST:
            found = [c for combo in itertools.product(*free.values())
                     if (c := self._settle(dict(zip(free, combo)), workload, pinned)) is not None]
            best, best_log = self._best_of(found)
        else:
            starts = [c for *_, config, _ in self.candidates[:CLIMB_STARTS]
                      if (c := self._settle({k: config[k] for k in free if k in config}, workload, pinned))]
            best, best_log = None, -math.inf
            for start in starts or [self._settle({}, workload, pinned)]:
                found, found_log = self._climb(start, free, workload, pinned)
                if found is not None and found_log > best_log:
                    best, best_log = found, found_log
        if best is None or best == default:
            return None
        return Transferred(best, "optimum", None, None, float(math.exp(best_log)), self.basis)

    def _settle(self, changes: Mapping[str, Any], workload: Workload, pinned: Mapping[str, Any]
                ) -> dict[str, Any] | None:
        """``changes`` over the defaults, ``pinned`` kept, repaired to ``workload``; None when not allowed."""
        try:
            values = self.space.complete({**changes, **pinned})
            values, _ = self.space.repair(values, workload)
        except SpaceError:
            return None
        return values

    def _best_of(self, configs: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, float]:
        """The configuration of ``configs`` with the highest predicted ``log(speedup)``, and that."""
        if not configs:
            return None, -math.inf
        predicted = self.predict(configs)
        i = int(np.argmax(predicted))
        return configs[i], float(predicted[i])

    def _climb(self, start: dict[str, Any], free: Mapping[str, tuple], workload: Workload,
               pinned: Mapping[str, Any]) -> tuple[dict[str, Any] | None, float]:
        """Hill-climb from ``start``: set each parameter of ``free`` to its best value in turn, until a sweep
        changes nothing."""
        current, current_log = self._best_of([start])
        for _ in range(len(free) + 1):
            moved = False
            for name, values in free.items():
                tried = [c for v in values if (c := self._settle({**current, name: v}, workload, pinned))]
                found, found_log = self._best_of(tried)
                if found is not None and found_log > current_log + 1e-12:
                    current, current_log, moved = found, found_log, True
            if not moved:
                break
        return current, current_log

    def propose(self, workload: Workload, n: int = 3, frozen: Mapping[str, str] = ()) -> list[Transferred]:
        """The ``n`` candidates predicted best here, best first; see :func:`propose`."""
        default = self.space.default()
        seen, ranked = set(), []
        for name, number, config, speedup in self.candidates:  # a repeat: its best study
            values, _ = self.space.repair({**config, **{k: default[k] for k in frozen or () if k in default}},
                                          workload)
            key = tuple(sorted((k, repr(v)) for k, v in values.items()))
            if values == default or key in seen:
                continue
            seen.add(key)
            predicted = float(math.exp(self.predict([values])[0]))
            ranked.append(Transferred(values, name, number, speedup, predicted, self.basis))
        best = self.optimum(workload, frozen)
        if best is not None and tuple(sorted((k, repr(v)) for k, v in best.values.items())) not in seen:
            ranked.append(best)  # measured by no earlier study (else that study's trial stands for it)
        ranked.sort(key=lambda t: -t.predicted_speedup)
        return ranked[:n]


def fit_transfer(studies: Sequence, context: Context, space: Space) -> TransferModel:
    """Fit the contextual GP to every completed tuning trial of ``studies``, read at ``context``.

    Raises ``ConfigError`` when the studies hold fewer than 2 usable trials.
    """
    from iobo.surrogate import Surrogate

    contexts = {s.study_name: study_context(s) for s in studies}
    runs: list[tuple[str, int, dict[str, Any], float]] = []  # (study, trial, configuration, speedup)
    best_of: list[tuple[str, int, dict[str, Any], float]] = []
    for study in studies:
        done = trials.tuning_trials(study)
        base = trials.baseline(done).median
        mine = [(study.study_name, t.number, config, t.value / base) for t in done
                if (config := _config(t, space)) is not None]
        runs += mine
        changed = [run for run in mine if run[2] != space.default()]
        best_of += sorted(changed, key=lambda run: -run[3])[:TOP_PER_STUDY]
    if len(runs) < 2:
        raise ConfigError(f"warm start needs at least 2 completed trials in earlier studies; found {len(runs)}: "
                          f"tune this kernel in another context first, or leave out --warm-start")
    features = _features([*contexts.values(), context])
    choices = {**{p.name: p.values for p in space}, **features}
    inputs = [{**config, **_feature_values(contexts[name], features)} for name, _, config, _ in runs]
    surrogate = Surrogate.from_runs(choices, inputs, [speedup for *_, speedup in runs])
    basis = (f"a GP over {len(runs)} trials of {len(studies)} earlier stud{'y' if len(studies) == 1 else 'ies'} with "
             f"{', '.join(f.removeprefix(FEATURE_PREFIX) for f in features) or 'no context'} as inputs")
    measured = {p.name: tuple(v for v in p.values if any(p.name in config and _same(v, config[p.name]) for _, _, config, _ in runs))
                for p in space}
    return TransferModel(surrogate, space, _feature_values(context, features),
                         tuple(sorted(best_of, key=lambda run: -run[3])), contexts, basis,
                         {name: values for name, values in measured.items() if len(values) > 1})


def propose(studies: Sequence, context: Context, space: Space, workload: Workload, n: int = 3,
            frozen: Mapping[str, str] = ()) -> list[Transferred]:
    """The ``n`` configurations of ``studies`` the contextual GP predicts best at ``context``, best first.

    Configurations get ``frozen`` knobs (``{name: why}``, e.g. striping off
    Lustre) at their defaults and are repaired to ``workload`` (e.g.
    ``cb_nodes`` within the ranks); those that become the system default are
    left out. Raises ``ConfigError`` when the studies hold fewer than 2
    usable trials.
    """
    return fit_transfer(studies, context, space).propose(workload, n, frozen)


def _config(trial, space: Space) -> dict[str, Any] | None:
    """The trial's configuration in ``space``: its parameters there, the rest at their defaults; None when a
    value is not allowed in ``space`` (a study over another space of the kernel)."""
    ran = trials.config_of(trial)
    try:
        return space.complete({k: v for k, v in ran.items() if k in space})
    except SpaceError:
        return None


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _features(contexts: Sequence[Context]) -> dict[str, tuple]:
    """``{context.<field>: sorted distinct values}`` of the features that vary over ``contexts``."""
    features = {}
    for name in CONTEXT_FEATURES:
        values = {getattr(c, name) for c in contexts}
        if len(values) > 1:
            features[FEATURE_PREFIX + name] = tuple(sorted(values, key=lambda v: (v is not None, v or 0)))
    return features


def _feature_values(context: Context, features: Mapping[str, tuple]) -> dict[str, Any]:
    return {name: getattr(context, name.removeprefix(FEATURE_PREFIX)) for name in features}


def warm_start(storage, context: Context, space: Space, exclude: str | None = None) -> TransferModel | None:
    """The transfer model of the studies of ``context``'s kernel or command in ``storage`` (``exclude`` left
    out) at ``context``; None when none can take part (no related study, or fewer than 2 of their trials fit
    ``space``): the study starts cold."""
    earlier = related_studies(storage, context, exclude=exclude) if context.kernel or context.command else []
    if not earlier:
        return None
    try:
        return fit_transfer(earlier, context, space)
    except ConfigError:  # their trials are of another space of the kernel
        return None


def enqueue_transfer(study, model: TransferModel, workload: Workload, frozen: Mapping[str, str],
                     n: int = 3) -> tuple[list[Transferred], list[str]]:
    """Queue ``model``'s ``n`` best-predicted configurations as the study's next search trials (after its
    default runs); once per study. Returns (queued now, notes)."""
    chosen = model.propose(workload, n, frozen)
    have = {t.user_attrs.get(trials.ORIGIN_ATTR) for t in study.get_trials(deepcopy=False)}
    fresh = [t for t in chosen if t.origin not in have]
    trials.enqueue_first(study, [(t.values, t.trial_attrs()) for t in fresh])
    return fresh, [f"warm start: {t.origin} already in the study" for t in chosen if t.origin in have]

"""The tuning loop: an Optuna study whose trials are kernel runs.

``Tuner.run()`` opens (or resumes) the study, measures the system default
first (``default_repeats`` trials, the baseline), then asks the sampler for
configurations, keeping up to ``max_in_flight`` trials running on a runner (Parsl apps
by default, :mod:`iobo.runners`),
and tells Optuna each bandwidth (MB/s, maximised) or FAIL with the stderr
tail.  Ctrl-C or SIGTERM marks the running trials FAIL and keeps every
finished one; running ``tune`` again on the same study resumes it and marks
trials left RUNNING by a killed tuner as FAIL.

``Tuner.confirm()`` re-measures the default and the best configuration,
interleaved, so the speedup is not one lucky run.
"""

from __future__ import annotations

import contextlib
import functools
import math
import signal
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from iobo import _compat, kernels, launch, trials, watchdog
from iobo.errors import ConfigError, Interrupted, JobEnded, KernelError, KernelPruned, WorkerLost
from iobo.interrupts import interrupts_deferred
from iobo.config import IOConfig
from iobo.context import hosts_ran_on, kernel_context, note_outcome, record_context
from iobo.launch import KernelJob, MPILauncher, MpiexecLauncher
from iobo.measure import format_mb_per_s
from iobo.minimize import MAX_TEST_PAIRS, MAX_TEST_SECONDS, WALK_BACK_BUDGET_S, check_walk_back_budget
from iobo.runners import Runner
from iobo.space import Space
from iobo.storage import DEFAULT_STORAGE
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT, ROLE_SEARCH, UNOWNED_AFTER_S, state

WARMUP_RUNS = 3  # at most this many unrecorded default runs before anything is measured
WARMUP_AGREEMENT = 0.25  # ... stopping when two in a row are within 25% of each other
CONFIRM_AT_MOST = 4  # a confirmation runs at most this many times the pairs asked for
CONFIRM_EXTRA_SECONDS = 300.0
"""Wall-clock seconds an undecided confirmation may spend on more pairs (beyond its planned ones): no new round
starts after them (the walk-back's per-test ``MAX_TEST_SECONDS``, :mod:`iobo.minimize`)."""
LEASE_POLL_S = 2.0  # a tuner waiting for another's walk-back or confirmation looks again after this many seconds


class TunerCallback:
    """Hooks into the loop (progress display, dashboard notes...); override what you need.

    ``trial`` is the finished ``FrozenTrial`` (COMPLETE or FAIL); ``running``
    the number of trials still in flight. A loop is one batch of trials (the
    search, or one test of the walk-back, or the confirmation's pairs);
    ``finished`` comes once the outermost ``with tuner:`` block that ran
    trials ends (:meth:`Tuner.run`, :meth:`Tuner.confirm`, or a caller's own
    block around both), also when it ends by an exception.
    """

    def loop_started(self, study, asks: int) -> None: ...

    def trial_finished(self, study, trial, running: int) -> None: ...

    def loop_finished(self, study) -> None: ...

    def finished(self, study) -> None: ...


def _one_runner(method):
    """``method`` runs all its trials on one runner, as within ``with tuner:`` (one Parsl start, not one per
    batch of trials)."""

    @functools.wraps(method)
    def on_one_runner(self, *args, **kwargs):
        with self:
            return method(self, *args, **kwargs)

    return on_one_runner


@dataclass
class Tuner:
    """Tune one kernel's I/O configuration.

    kernel: registered kernel name, or a spec (a ``KernelSpec``, or a
    :class:`iobo.kernels.command.CommandSpec`: any program, run under the
    preload shim); ranks: MPI ranks per trial; trials: total
    finished trials the study should hold (default runs included; a resumed
    study continues to this count); storage: an Optuna storage URL,
    ``journal:///abs/path.log`` or a storage object (see :mod:`iobo.storage`); study:
    the study name; workdir: directory on the file system under test where
    trials write; kernel_options: options of the kernel (e.g. particles);
    space: search space (default: the kernel's); sampler: an Optuna sampler
    (default: iobo's GP sampler); max_in_flight: trials running at
    once; default_repeats: runs of the system default (>= 3); timeout_s: per
    trial limit in seconds; runner: where trials run (an
    :class:`iobo.runners.Runner`; default: Parsl apps, on the loaded
    DataFlowKernel or on ``parsl_config``, a Parsl Config loaded when none
    is); echo: where progress lines go (None: silent);
    callbacks: :class:`TunerCallback` hooks; pruner: ``"median"`` or
    ``"wilcoxon"`` to stop trials whose steps are slower than the others'
    (:mod:`iobo.pruning`; needs a storage URL the workers reach); stop_rule:
    an :class:`iobo.stopping.StopRule` that may end the study before
    ``trials`` (e.g. ``MarginalRoTI()``); warmup: run the system default once,
    unrecorded, before anything is measured (the first runs after start-up
    are cold: page cache, MPI start-up); default_every: queue one more
    default run after every this many search trials (0: never), so the
    baseline is measured through the study and its drift is known;
    warm_start: start from the earlier studies of the kernel in ``storage``
    (:mod:`iobo.transfer`; other ranks, sizes or file systems): the
    configurations their contextual GP predicts best here run right after
    the default runs, and the GP sampler made when ``sampler`` is None takes
    that GP as its prior mean, weighted by how well it predicts this
    study's runs; without such studies the study starts cold. nodes: the
    compute nodes each trial spans (default: the launcher's ``nodes``, else
    unknown); once a run reports the hosts its ranks ran on, that count is
    the workload's (the space's node rules, e.g. ``cb_nodes`` within what
    ``cb_config_list`` allows, follow the hosts the trials really span);
    walk_back_budget_s: the seconds the walk-back (:meth:`minimize`) may
    measure before its undecided tests get no more pairs
    (:data:`iobo.minimize.WALK_BACK_BUDGET_S`; >= 0).
    """

    kernel: str | kernels.JobSpec = "vpic"
    ranks: int = 2
    trials: int = 30
    storage: str = DEFAULT_STORAGE
    study: str | None = None
    workdir: str = "iobo-work"
    kernel_options: Mapping[str, Any] = field(default_factory=dict)
    space: Space | None = None
    sampler: Any = None
    seed: int = 0
    max_in_flight: int = 1
    default_repeats: int = 3
    timeout_s: float = 600.0
    launcher: MPILauncher = field(default_factory=MpiexecLauncher)
    parsl_config: Any = None
    runner: Runner | None = None
    echo: Callable[[str], None] | None = print
    callbacks: Sequence[TunerCallback] = ()
    pruner: str | None = None
    stop_rule: Any = None
    warmup: bool = True
    default_every: int = 10
    characterization: Mapping[str, Any] | None = None
    warm_start: bool = False
    nodes: int | None = None
    walk_back_budget_s: float = WALK_BACK_BUDGET_S

    def __post_init__(self) -> None:
        checks = [
            (isinstance(self.ranks, int) and self.ranks >= 1, f"ranks must be a positive integer; got {self.ranks!r}"),
            (isinstance(self.trials, int) and self.trials >= 1, f"trials must be a positive integer; got {self.trials!r}"),
            (isinstance(self.max_in_flight, int) and self.max_in_flight >= 1,
             f"max_in_flight must be a positive integer; got {self.max_in_flight!r}"),
            (isinstance(self.default_repeats, int) and self.default_repeats >= 3,
             f"default_repeats must be >= 3 (the baseline needs a spread); got {self.default_repeats!r}"),
            (self.timeout_s > 0, f"timeout_s must be positive seconds; got {self.timeout_s!r}"),
            (isinstance(self.default_every, int) and self.default_every >= 0,
             f"default_every must be an integer >= 0 (0: no interleaved default runs); got {self.default_every!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        self.walk_back_budget_s = check_walk_back_budget(self.walk_back_budget_s, "walk_back_budget_s")
        if self.pruner is not None:
            from iobo.pruning import make_pruner

            make_pruner(self.pruner)
            if not isinstance(self.storage, str):
                raise ConfigError(
                    f"pruner={self.pruner!r} needs the storage as a URL the workers can open; got {self.storage!r}: "
                    "pass e.g. sqlite:///abs/path/iobo.db or journal:///abs/path/study.log"
                )
        spec = self._spec = kernels.get(self.kernel)
        if self.pruner is not None and spec.kind != "kernel":
            raise ConfigError(f"pruner={self.pruner!r} needs per-step bandwidths, which a {spec.kind} does not "
                              f"print: tune it without a pruner")
        self.kernel_options = spec.resolve_options(self.kernel_options)
        self.space = self.space or spec.space()
        nodes = self.nodes if self.nodes is not None else getattr(self.launcher, "nodes", None)
        self.workload = replace(spec.workload(self.ranks, self.kernel_options), nodes=nodes)
        self.study = self.study or f"{spec.name}-{self.ranks}ranks"
        if self.trials < self.default_repeats + 1:
            raise ConfigError(
                f"trials={self.trials} leaves no search trial after {self.default_repeats} default runs; "
                f"allowed: trials >= {self.default_repeats + 1}"
            )
        # the default must itself be valid for this workload (e.g. chunk vs dataset)
        IOConfig.from_values(self.space.default(), self.space, self.workload)
        spec.check()
        self.launcher.check(self.ranks)
        launch.prepare_workdir(self.workdir)
        self._warmed_up = False
        self._transfer: Any = None  # the warm start's TransferModel (None: none found)
        self._transfer_looked = False
        self.warmup_mb_per_s: list[float] = []  # the unrecorded warm-up runs of this tuner
        self._token = uuid.uuid4().hex  # this tuner, in the study's phase lease (several may share a process)
        self._made_unix = time.time()  # conclusions other tuners reach after this are reported, not redone
        self._holding = 0  # depth of _concluding blocks holding the lease (confirm runs minimize inside)
        self._holds = 0  # depth of `with tuner:` blocks: the runner is kept until the outermost one ends
        self._kept: tuple[Runner, contextlib.ExitStack] | None = None  # the runner, and what stops it
        self._study_in_use = None  # the study a loop of the current `with tuner:` block ran trials of

    # -- public API ------------------------------------------------------------
    def __enter__(self) -> "Tuner":
        """``with tuner:`` runs every trial of the block on one runner (one Parsl executor, one watchdog), started
        at the first trial and stopped when the outermost such block ends, instead of one per batch of trials
        (the walk-back's, the confirmation's). :meth:`confirm` and :meth:`minimize` hold one themselves; a
        command that also tunes (``iobo tune``) holds one around both. A runner passed in is entered and left once
        per block (a DataFlowKernel the caller loaded stays loaded)."""
        self._holds += 1
        return self

    def __exit__(self, *exc) -> None:
        self._holds -= 1
        if not self._holds:
            self._stop_runner(*exc)
            study, self._study_in_use = self._study_in_use, None
            if study is not None:
                self._notify("finished", study)

    def run(self):
        """Tune until the study holds ``trials`` finished trials; returns the study."""
        study = self.open_study()
        stored = record_context(study, replace(kernel_context(self.kernel, self.ranks, self.kernel_options,
                                                              self.characterization), nodes=self.workload.nodes or 1))
        if stored.fs_type is not None:  # a resumed study: its first completed run measured the hosts too
            self._learn_nodes(stored.nodes)
        self._fail_stale(study)
        self.enqueue_defaults(study)
        self.enqueue_warm_start(study)
        finished = trials.count_finished(study)
        self._say(f"study {self.study!r} in {self.storage}: {finished} finished trial(s), target {self.trials}")
        if self.stop_rule is not None and study.user_attrs.get(trials.STOP_SAID_ATTR) is not None:
            self._identify_finalists(study)  # resumed after the stop rule said stop: go on re-measuring
        self._rule_stopped, self._rule_progress = False, None
        self._loop(study, target=self.trials, stop_rule=self.stop_rule, interleave=True)
        self._say_rule_never_stopped(study)
        self._record_incumbent(study)
        return study

    def _say_rule_never_stopped(self, study) -> None:
        """When the study reached its trial target and the stop rule never said stop, say so with the rule's last
        reading (``StopRule.signal``), so a user sees how far it was from stopping and why the budget ended it."""
        progress = self._rule_progress
        if self.stop_rule is None or self._rule_stopped or progress is None:
            return
        if trials.count_finished(study) < self.trials:
            return  # ended otherwise (the default never ran): said where it ended
        signal = self.stop_rule.signal(progress)
        self._say(f"stop rule {type(self.stop_rule).__name__} did not say stop within {progress.trials} tuning "
                  f"trial(s): the trial target ended the study" + (f" ({signal})" if signal else ""))

    @staticmethod
    def _record_incumbent(study) -> None:
        """Record the sampler's pick (:func:`trials.record_incumbent`) when it has one (the GP: ``incumbent``)."""
        incumbent = getattr(study.sampler, "incumbent", None)
        if incumbent is not None and trials.completed_trials(study, (trials.ROLE_SEARCH,)):
            trials.record_incumbent(study, *incumbent(study))

    @_one_runner
    def confirm(self, repeats: int = 5, minimize: bool = True, pairs: int = 3):
        """Re-measure the default and the recommended configuration, interleaved, at least ``repeats`` times each.

        With ``minimize`` (and no minimal configuration made from the current
        best trial yet), :meth:`minimize` runs first (``pairs`` per test), so
        what is confirmed is what ``iobo export`` gives. When the minimal
        configuration holds a gain, the number of pairs is planned before any
        is run (:func:`iobo.measure.planned_pairs`, at least
        ``INTERVAL_MIN_RUNS``, up to ``CONFIRM_AT_MOST`` times ``repeats``):
        enough for the 95% interval to exclude 1 with 80%
        power at the gain the walk-back measured, given the noise of the
        study's default runs. A confirmation whose interval is then
        undecided (it holds 1 and reaches outside ``NO_EFFECT_BAND``) runs
        ``repeats`` more pairs at a time, up to the plan's ``at_most`` and
        ``CONFIRM_EXTRA_SECONDS`` (:meth:`_settle_undecided`); one still
        undecided is reported as undecided, with the pairs that would
        settle it, not as no gain. The plan is the study attr
        ``confirm_plan``. Nothing runs when the recommended configuration is
        the system default. A stop rule with a stake (``--production-runs N``:
        :meth:`iobo.stopping.StopRule.checking_budget_s`) bounds what the
        walk-back and the confirmation measure (:func:`checking_plan`): below
        the first ``repeats`` pairs nothing runs. Returns the study.

        The phases after the search run once per study: several tuners of
        one study take turns through a lease stored on it (:meth:`_concluding`),
        and one that waited while another confirmed the current best trial
        reports that conclusion instead of measuring its own.
        """
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ConfigError(f"repeats must be a positive integer; got {repeats!r}")
        study = self.open_study()
        if trials.best_trial(study) is None:
            raise ConfigError(f"study {self.study!r} has no completed trial to confirm; run `iobo tune` first")
        with self._concluding(study, "confirm"):
            best = trials.best_trial(study)  # after the search trials of other tuners it waited for
            done = trials.concluded_elsewhere(study, "confirm", best.number, self._token, self._made_unix)
            if done:
                self._say_concluded(study, best, done, "walk-back and confirmation")
                return study
            self._confirm(study, best, repeats, minimize, pairs)
            trials.record_concluded(study, "confirm", best.number, self._token)
        return study

    def _confirm(self, study, best, repeats: int, minimize: bool, pairs: int) -> None:
        """:meth:`confirm`'s runs, by the holder of the study's phase lease."""
        from iobo.minimize import changed_knobs, current_minimal, proposed

        started = time.monotonic()
        default = self.space.default()
        changes = len(changed_knobs(self.space, trials.config_of(best)))  # what the walk-back would test
        budget_s, trial_s = self._checking_budget_s(study)
        walk_back = minimize and current_minimal(study, best) is None  # not yet walked back
        checks = checking_plan(budget_s if changes else math.inf, trial_s, repeats, pairs,
                               changes if walk_back else 0, self.walk_back_budget_s)  # no changes: said below
        if checks["why"]:
            self._say(f"stop rule {type(self.stop_rule).__name__}: {checks['why']}")
        if not checks["confirm"]:
            study.set_user_attr(trials.CONFIRM_PLAN_ATTR, {"pairs": 0, "why": checks["why"]})
            return
        if walk_back and not checks["walk_back"]:
            minimize = False  # the stake cannot pay the walk-back: the whole configuration is confirmed
        elif walk_back:
            self.minimize(pairs, budget_s=checks["walk_back_budget_s"])
        values, source = proposed(study, self.space, self.workload, minimal=minimize)  # --no-minimize: the whole one
        minimal = current_minimal(study, best)
        if IOConfig(values, self.space).is_default():
            plan = {"pairs": 0, "why": "the recommended configuration is the system default: nothing to re-measure"}
            study.set_user_attr(trials.CONFIRM_PLAN_ATTR, plan)
            if minimize and minimal is not None and minimal.undecided():  # kept for want of evidence, not of effect
                budget = f" ({minimal.budget_text()})" if minimal.budget_text() else ""
                self._say(f"the minimal configuration of trial {best.number} is the system default: no speedup to "
                          f"confirm, keep the default: no change was shown to help; undecided: "
                          f"{minimal.undecided_text(trials.config_of(best))}{budget}")
            else:
                self._say(f"{source} is the system default: no speedup to confirm, keep the default")
            return
        plan = confirm_plan(study, minimal.expected_speedup if minimal else 1.0, repeats)
        if budget_s < math.inf:  # the pairs the rest of the stake pays for, the first `repeats` always
            plan = within_pairs(plan, max(repeats, int((budget_s - (time.monotonic() - started)) // (2 * trial_s))))
        study.set_user_attr(trials.CONFIRM_PLAN_ATTR, plan)
        self._say(f"re-measuring the default and {source}, {plan['pairs']} times each, interleaved ({plan['why']})")
        self.measure(study, _pairs_of(default, values, plan["pairs"]))
        self._settle_undecided(study, default, values, plan, repeats)

    def _settle_undecided(self, study, default, values, plan: dict[str, Any], repeats: int) -> None:
        """While the confirmation of ``values`` is undecided (its interval holds 1 and reaches outside
        ``NO_EFFECT_BAND``), measure ``repeats`` more interleaved pairs at a time, up to the plan's ``at_most``
        pairs and ``CONFIRM_EXTRA_SECONDS`` of extra measuring; the plan attr then says how many more were run
        and, still undecided, what stopped them.

        Looking again after each round makes a 95% interval exclude 1 a little more often than once in twenty
        when nothing changes (experiments/results/confirm-extension.txt measures how much more)."""
        from iobo.minimize import confirmation_of

        started, extended = time.monotonic(), 0
        while True:
            confirmation = confirmation_of(study, self.space, values)
            more, stopped = confirmation_round(confirmation, plan["pairs"] + extended, plan["at_most"], repeats,
                                               time.monotonic() - started)
            if not more:
                break
            self._say(f"the confirmation is undecided ({confirmation.describe()} after {plan['pairs'] + extended} "
                      f"pairs): {more} more pairs (at most {plan['at_most']}, {CONFIRM_EXTRA_SECONDS:g} s more)")
            self.measure(study, _pairs_of(default, values, more))
            extended += more
        if extended or stopped:
            plan = {**plan, "planned": plan["pairs"], "pairs": plan["pairs"] + extended, "extended": extended,
                    "stopped": stopped,
                    "why": plan["why"] + f"; undecided after {plan['pairs']}: {extended} more"
                           + (f", still undecided at {stopped}" if stopped else "")}
            study.set_user_attr(trials.CONFIRM_PLAN_ATTR, plan)
        if confirmation is not None and confirmation.verdict is not None:
            self._say(f"confirmation: {confirmation.describe()} after {confirmation.pairs} pairs, "
                      f"{confirmation.verdict_text()}")

    def _checking_budget_s(self, study) -> tuple[float, float]:
        """(seconds the stop rule lets the walk-back and the confirmation measure, ``math.inf`` without a limit;
        seconds a run costs, the study's average tuning trial)."""
        from iobo.stopping import study_progress

        progress = study_progress(study) if self.stop_rule is not None else None
        if progress is None or not progress.trials:
            return math.inf, 0.0
        return self.stop_rule.checking_budget_s(progress), progress.minutes_per_trial * 60

    @_one_runner
    def minimize(self, pairs: int = 3, confirm_pairs: int | None = None, budget_s: float | None = None):
        """Find which of the best trial's changes matter (:func:`iobo.minimize.walk_back`, ``pairs`` per test;
        ``confirm_pairs``: the pairs of a fixed confirmation that follows, elsewhere; ``budget_s``: its budget in
        seconds, default the tuner's ``walk_back_budget_s``); stores and returns the
        :class:`iobo.minimize.Minimal` (study attr ``minimal``).

        Once per study: when another tuner of the study holds its phase lease
        (:meth:`_concluding`), this one waits, and when that tuner stored the
        walk-back of the current best trial meanwhile, returns it (and says so)
        instead of walking back again."""
        from iobo.minimize import current_minimal

        study = self.open_study()
        if trials.best_trial(study) is None:
            raise ConfigError(f"study {self.study!r} has no completed trial to minimize; run `iobo tune` first")
        with self._concluding(study, "minimize"):
            best = trials.best_trial(study)
            done = trials.concluded_elsewhere(study, "minimize", best.number, self._token, self._made_unix)
            minimal = current_minimal(study, best) if done else None
            if minimal is not None:
                self._say_concluded(study, best, done, "walk-back")
                return minimal
            minimal = self._minimize(study, best, pairs, confirm_pairs,
                                     self.walk_back_budget_s if budget_s is None else budget_s)
            trials.record_concluded(study, "minimize", best.number, self._token)
        return minimal

    def _minimize(self, study, best, pairs: int, confirm_pairs: int | None, budget_s: float):
        """:meth:`minimize`'s walk-back, by the holder of the study's phase lease."""
        from iobo.importance import ablation_shares
        from iobo.minimize import MINIMAL_ATTR, walk_back

        not_applied = {**best.user_attrs.get("not_applied", {}), **study.user_attrs.get(trials.FROZEN_ATTR, {})}
        importance = ablation_shares(study)
        self._say(f"minimizing trial {best.number}'s configuration: which of its changes matter ({pairs} "
                  f"interleaved pairs per test; an undecided test gets {pairs} more at a time, up to "
                  f"{max(MAX_TEST_PAIRS, pairs)} pairs and {MAX_TEST_SECONDS:g} s of extra pairs, while the "
                  f"walk-back's budget of {budget_s:g} s lasts"
                  + (f", and while it could still show a gain a confirmation of {confirm_pairs} pairs can show"
                     if confirm_pairs else "") + ")")

        def measure(runs):
            return [t.value for t in self.measure(study, [(v, {"role": trials.ROLE_MINIMIZE, **a}) for v, a in runs])]

        minimal = walk_back(self.space, self.workload, trials.config_of(best), best.number, measure,
                            importance, not_applied, pairs, budget_s=budget_s,
                            confirm_pairs=confirm_pairs)
        study.set_user_attr(MINIMAL_ATTR, minimal.to_attr())
        self._say(minimal.describe())
        return minimal

    def measure(self, study, runs):
        """Run ``runs`` ((configuration, trial attrs) pairs, attrs with a ``role``) in this order as trials of
        ``study``; returns their ``FrozenTrial`` s (value None when a run failed)."""
        first = len(study.get_trials(deepcopy=False))
        roles = {a.get("role") for _, a in runs}
        for values, attrs in runs:
            study.enqueue_trial(dict(values), user_attrs=dict(attrs))

        def mine():
            return [t for t in study.get_trials(deepcopy=False)[first:] if t.user_attrs.get("role") in roles]

        asks = len(runs)
        for _ in range(len(runs) + 1):  # an ask takes the oldest queued trial, which may be another tuner's
            self._loop(study, asks=asks)
            asks = sum(t.state == state("WAITING") for t in mine())
            if not asks:
                break
        return mine()[:len(runs)]

    def best_config(self) -> IOConfig:
        """The recommended configuration (:func:`iobo.minimize.recommendation`: the minimal one when made, else the
        best trial's without knobs that did not apply; the system default once its confirmation showed no gain);
        raises when no trial completed."""
        best = trials.best_trial(self.open_study())
        if best is None:
            raise ConfigError(f"study {self.study!r} has no completed trial yet; run Tuner.run() first")
        from iobo.minimize import recommended

        return IOConfig(recommended(self.open_study(), self.space, self.workload)[0], self.space)

    def open_study(self):
        """Create or load the study; a loaded one must have been made for the same workload."""
        from iobo.samplers.registry import make_sampler

        made_for = self._spec.identity(self.ranks, self.kernel_options)
        sampler = self.sampler or make_sampler("gp", self.seed, prior_mean=self.transfer_model(),
                                               trials=self.trials)  # its last runs tell the best apart
        return trials.open_study(self.storage, self.study, sampler,
                                 made_for, self.space.names,
                                 {trials.SPACE_ATTR: self.space.to_records(), **self._spec.description()})

    # -- the loop --------------------------------------------------------------
    def _runner(self) -> Runner:
        """The runner trials go to: the one given, else Parsl apps (on ``parsl_config`` if no DFK is loaded)."""
        if self.runner is not None:
            return self.runner
        from iobo.runners.parsl import ParslRunner

        return ParslRunner(self.parsl_config, self.max_in_flight, str(Path(self.workdir) / "runinfo"))

    def _kept_runner(self) -> Runner:
        """The runner of the current ``with tuner:`` block, started at the first call with the watchdog
        (:func:`iobo.watchdog.guard`) and with SIGTERM raised as an interrupt until :meth:`_stop_runner`."""
        if self._kept is None:
            with contextlib.ExitStack() as stack:
                stack.enter_context(_sigterm_as_interrupt())
                guarded = stack.enter_context(watchdog.guard())
                runner = stack.enter_context(self._runner())
                guarded.end_on_exit = not runner.borrowed  # a pipeline's own Parsl workers outlive the run
                self._kept = runner, stack.pop_all()
        return self._kept[0]

    def _stop_runner(self, *exc) -> None:
        """Stop the kept runner (``exc``: the exception its block ends with, as ``__exit__`` gets it), then the
        watchdog, which ends what the runner left; says where the runner kept its logs."""
        kept, self._kept = self._kept, None
        if kept is None:
            return
        runner, stack = kept
        stack.__exit__(*(exc or (None, None, None)))
        if runner.kept_logs:
            self._say(f"the logs of the runner ({type(runner).__name__}) of this run are kept in {runner.kept_logs}")

    def _loop(self, study, asks: int | None = None, target: int | None = None, stop_rule=None,
              interleave: bool = False) -> None:
        """Run trials until ``asks`` were asked here, or until the study's tuning trials reach ``target``.

        With ``target``, the study is re-counted before each ask (and the
        trial asked checked against it), so that several tuners sharing the
        study stop at exactly ``target`` between them (:meth:`_start`).
        interleave: queue a default run after every ``default_every`` search trials.
        """
        running: dict[Future, Any] = {}
        self._asked: int | None = None  # number of the trial being started, for the interrupt handler
        asking = True
        if target is not None and trials.count_asked(study) >= target:
            return  # other tuners asked the last trials: no runner to start
        self._study_in_use = study
        self._notify("loop_started", study, asks if target is None else max(0, target - trials.count_asked(study)))
        cut_short: list = []  # trials this process failed because the loop ended early
        try:
            with self:  # the runner is kept to the end of the outermost `with tuner:` block
                runner = self._kept_runner()
                try:
                    remaining = asks if target is None else target - trials.count_asked(study)
                    if self.warmup and not self._warmed_up and remaining > 0:
                        self._warm_up(runner, study)
                    while asking or running:
                        while asking and len(running) < self.max_in_flight:
                            if asks is not None:
                                asks -= 1
                                asking = asks > 0
                            if interleave and (target is None or trials.count_asked(study) < target):
                                self._queue_interleaved_default(study)
                            started = self._start(study, target)
                            if started is None:
                                asking = False
                                break
                            trial, job = started
                            running[runner.submit(job)] = trial
                        if not running:
                            break
                        done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                        for future in done:
                            trial = running.pop(future)
                            self._finish(study, trial, future)
                            self._notify("trial_finished", study, study.get_trials(deepcopy=False)[trial.number],
                                         len(running))
                        if asking and stop_rule is not None and self._should_stop(study, stop_rule):
                            asking = False
                        if asking and target is not None and self._default_never_ran(study):
                            asking = False
                except BaseException as exc:
                    cut_short = self._fail_mine(study, exc)
                    self._stop_runner(type(exc), exc, exc.__traceback__)  # their jobs stop with it
                    raise
                finally:
                    self._notify("loop_finished", study)
        finally:
            for trial in cut_short:  # the runner has stopped their jobs by now: their files can go
                self._remove_run_dirs(trial)

    def _fail_mine(self, study, exc: BaseException) -> list:
        """Tell FAIL every RUNNING trial this process asked; returns them.

        Parsl futures cannot be cancelled; the executor's shutdown stops the
        workers, and each MPI job dies with its worker (launch._die_with_parent).
        The interrupt (or error) may land anywhere, also between ask() and
        submit or between a result and its tell: the storage says which
        trials are still RUNNING.
        """
        if isinstance(exc, KeyboardInterrupt):
            reason, what = "interrupted: the tuner was stopped while this trial ran", "interrupted"
        else:
            reason = f"the tuner stopped on an error while this trial ran: {type(exc).__name__}: {exc}"[:2000]
            what = f"stopped by {type(exc).__name__}"
        try:
            mine = [t for t in study.get_trials(deepcopy=False, states=(state("RUNNING"),))
                    if t.user_attrs.get("owner") == trials.owner() or t.number == self._asked]
            for trial in mine:
                trials.tell_failed(study, trial, reason)
                self._notify("trial_finished", study, study.get_trials(deepcopy=False)[trial.number], 0)
        except Exception as failed:  # the storage itself may be what failed: keep the first error
            self._say(f"{what}: could not mark the running trials FAIL ({type(failed).__name__}: {failed}); "
                      f"the next run on this study marks them stale")
            return []
        self._say(f"{what}: {len(mine)} running trial(s) marked FAIL; finished trials kept")
        return mine

    def _remove_run_dirs(self, trial) -> None:
        """Remove what a trial that did not finish left in its workdir (its run directory)."""
        attrs = trial.user_attrs
        if "run_tag" in attrs and "workdir" in attrs:
            launch.remove_run_dirs(attrs["workdir"], attrs["run_tag"])

    def _warm_up(self, runner, study) -> None:
        """Unrecorded runs of the system default until two in a row agree within ``WARMUP_AGREEMENT`` (at most
        ``WARMUP_RUNS``): what a cold start costs (page cache, MPI-IO set-up) is not measured as the default.
        The first one tells the file system, so the knobs it cannot apply are frozen before the first trial."""
        self._warmed_up = True
        seen = self.warmup_mb_per_s
        for _ in range(WARMUP_RUNS):
            try:
                outcome = runner.submit(self._job(self.space.default(), "warmup")).result()
            except JobEnded as exc:
                self._say(f"warm-up run (not recorded) failed: {exc.reason}")
                return
            seen.append(outcome["mb_per_s"])
            self._freeze_environment_limits(study, outcome["result"], default=True)
            if len(seen) >= 2 and abs(seen[-1] / seen[-2] - 1) <= WARMUP_AGREEMENT:
                break
        self._say("warm-up (not recorded): " + ", ".join(format_mb_per_s(v) for v in seen) + " MB/s")

    def _queue_interleaved_default(self, study) -> None:
        """Queue a default run when ``default_every`` search trials came after the last default run."""
        if not self.default_every:
            return
        since = 0
        for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
            role = trials.role(t)
            since = 0 if role == ROLE_DEFAULT else since + (role == ROLE_SEARCH)
        if since >= self.default_every:
            study.enqueue_trial(self.space.default(), user_attrs={"role": ROLE_DEFAULT})

    def _default_never_ran(self, study) -> bool:
        """True (and says why) when every one of at least ``default_repeats`` default runs failed and none
        completed: without a baseline nothing can be concluded, and a program that cannot run its default
        (a wrong command, rank count or path) fails every other configuration the same way. Runs lost to the
        machinery (``trials.LOST_ATTR``: a lost worker, a dead tuner) are not counted."""
        defaults = [t for t in study.get_trials(deepcopy=False) if trials.role(t) == ROLE_DEFAULT]
        finished = [t for t in defaults if t.state in (state("COMPLETE"), state("FAIL"))
                    and not t.user_attrs.get(trials.LOST_ATTR)]  # a lost run is no verdict on the default
        if len(finished) < self.default_repeats or any(t.state == state("COMPLETE") for t in finished):
            return False
        reason = finished[-1].user_attrs.get("fail_reason", "no reason recorded")
        self._say(f"the system default failed in all {len(finished)} of its runs, so there is no baseline: the "
                  f"search stops here (resume once the command runs); last reason: {reason}")
        return True

    def _should_stop(self, study, stop_rule) -> bool:
        """Whether ``stop_rule`` ends the study now.  When it first says stop and the sampler can still tell its
        best few configurations apart (:meth:`_identify_finalists`), the study re-measures them first, for at most
        the rule's ``finalist_runs`` more tuning trials (the count where the rule said stop is study attr
        :data:`iobo.trials.STOP_SAID_ATTR`, so a resumed study goes on from it)."""
        from iobo.stopping import study_progress

        said = study.user_attrs.get(trials.STOP_SAID_ATTR)
        if said is not None:
            progress = study_progress(study)
            done = progress.trials - said if progress is not None else 0
            if done < stop_rule.finalist_runs and self._identify_finalists(study):
                return False
            why = "the most allowed" if done >= stop_rule.finalist_runs else "the leader is best in every posterior draw"
            self._say(f"stop rule {type(stop_rule).__name__}: stopping after {done} trial(s) re-measuring the best "
                      f"few configurations ({why})")
            self._rule_stopped = True
            return True
        progress = study_progress(study, with_gain=stop_rule.needs_gain)
        if progress is None or (stop_rule.needs_gain and progress.expected_gain_mb_per_s is None):
            return False  # too few completed trials to judge yet (e.g. most failed): go on
        self._rule_progress = progress
        if not stop_rule.should_stop(progress):
            return False
        where = (f"after {progress.trials} tuning trial(s), {progress.minutes[-1]:.1f} min, RoTI "
                 f"{format_mb_per_s(progress.roti)} MB/s per minute")
        if stop_rule.finalist_runs and self._identify_finalists(study):
            study.set_user_attr(trials.STOP_SAID_ATTR, progress.trials)
            self._say(f"stop rule {type(stop_rule).__name__} says stop {where}; first re-measuring the best few "
                      f"configurations (at most {stop_rule.finalist_runs} trials)")
            return False
        self._say(f"stop rule {type(stop_rule).__name__}: stopping {where}")
        self._rule_stopped = True
        return True

    @staticmethod
    def _identify_finalists(study) -> bool:
        """Turn the sampler to re-measuring its best few configurations (``GPSampler.identify_now``) while that still
        tells them apart (``GPSampler.finalists_undecided``); False (nothing changed) for other samplers."""
        sampler = study.sampler
        if not hasattr(sampler, "identify_now") or not sampler.finalists_undecided(study):
            return False
        sampler.identify_now()
        return True

    def _notify(self, hook: str, *args) -> None:
        """Call ``hook`` on every callback; a failing callback is reported, never stops tuning."""
        for callback in self.callbacks:
            try:
                getattr(callback, hook)(*args)
            except Exception as exc:
                self._say(f"warning: {type(callback).__name__}.{hook} failed: {type(exc).__name__}: {exc}")

    def _start(self, study, target: int | None = None):
        """Ask the next trial and build its job; None when the study already holds ``target`` tuning trials.

        Other tuners may share the study: it is counted before the ask, and
        a trial whose number comes after the target's last one (another
        tuner asked in between) is told FAIL as surplus, unrun.
        """
        from iobo.pruning import StepReporter

        if target is not None:
            self._fail_stale(study)  # a dead tuner's RUNNING trials count (as they will once told FAIL)
            if trials.count_asked(study) >= target:
                return None
        with interrupts_deferred():  # ask() stores the RUNNING trial before it returns (SQLite may wait on its lock)
            trial = trials.ask_owned(study)
            self._asked = trial.number  # known to the interrupt handler before any other attr is written
        if target is not None and trials.is_tuning(trial) and trials.count_asked(study, before=trial.number) >= target:
            trials.tell_surplus(study, trial, target)
            self._say(f"trial {trial.number} not run: other tuners on this study already asked its {target} trials")
            return None
        frozen = study.user_attrs.get(trials.FROZEN_ATTR, {})
        values = trials.record_suggestion(trial, self.space, self.workload, frozen)
        tag = f"{trial.number}-{uuid.uuid4().hex[:6]}"  # names its run directory: removed if the trial is cut short
        trial.set_user_attr("workdir", str(Path(self.workdir).resolve()))
        trial.set_user_attr("run_tag", tag)
        # every trial reports its steps (the pruner's median needs the default runs'); only search trials are pruned
        reporter = StepReporter(self.storage, self.study, _compat.trial_id(trial), self.pruner,
                                prune=trial.user_attrs["role"] == ROLE_SEARCH) if self.pruner else None
        return trial, self._job(values, tag, reporter)

    def _job(self, values, tag: str, on_step=None) -> KernelJob:
        return KernelJob(
            kernel=self._spec, values=values, ranks=self.ranks, workdir=self.workdir,
            options=self.kernel_options, launcher=self.launcher, timeout_s=self.timeout_s, tag=tag, on_step=on_step,
        )

    def _finish(self, study, trial, future: Future) -> None:
        role = trials.role(trial)
        try:
            outcome = future.result()
        except KernelPruned as exc:
            trial.set_user_attr("pruned_reason", exc.reason)
            study.tell(trial, state=state("PRUNED"))
            self._say(f"trial {trial.number:3d} [{role}] PRUNED: {exc.reason}")
            return
        except KernelError as exc:
            trial.set_user_attr("fail_reason", exc.reason)
            trial.set_user_attr("stderr_tail", exc.stderr_tail[-4000:])
            trial.set_user_attr("stdout_tail", exc.stdout_tail[-4000:])
            trial.set_user_attr("returncode", exc.returncode)
            if isinstance(exc, WorkerLost):
                trial.set_user_attr(trials.LOST_ATTR, True)
            study.tell(trial, state=state("FAIL"))
            self._say(f"trial {trial.number:3d} [{role}] FAILED: {exc.reason}")
            if isinstance(exc, WorkerLost):  # its run never got to remove its directory
                self._remove_run_dirs(trial)
                if role == ROLE_DEFAULT:  # it measured nothing: the baseline still needs its run
                    study.enqueue_trial(self.space.default(), user_attrs={"role": ROLE_DEFAULT})
            return
        except Exception as exc:  # executor/worker failure: keep the study going
            trial.set_user_attr("fail_reason", f"{type(exc).__name__}: {exc}"[:2000])
            study.tell(trial, state=state("FAIL"))
            self._say(f"trial {trial.number:3d} [{role}] FAILED: {type(exc).__name__}: {exc}")
            return
        for key, value in trials.outcome_attrs(outcome).items():
            trial.set_user_attr(key, value)
        study.tell(trial, outcome["mb_per_s"])
        self._freeze_environment_limits(study, outcome["result"], default=role == ROLE_DEFAULT)
        note_outcome(study, trials.outcome_attrs(outcome))
        self._learn_nodes(hosts_ran_on(trials.outcome_attrs(outcome)))
        best = trials.best_trial(study)  # None in a study of re-measurements only (iobo tune --via-kernel's)
        changed = IOConfig(trial.user_attrs["config"], self.space).changed()
        self._say(
            f"trial {trial.number:3d} [{role}] {format_mb_per_s(outcome['mb_per_s']):>9} MB/s   "
            + (f"best {format_mb_per_s(best.value):>9} MB/s (trial {best.number})   " if best else "")
            + f"{_short(changed) or 'system default'}"
        )

    def _learn_nodes(self, measured: int | None) -> None:
        """Make the workload's node count the ``measured`` number of hosts a run's ranks ran on (None: the run did
        not say), saying so when it differs from the count the tuner was given."""
        if not measured or measured == self.workload.nodes:
            return
        if self.workload.nodes is not None:
            self._say(f"the runs' ranks ran on {measured} host(s), not the {self.workload.nodes} node(s) given: "
                      f"the search follows the {measured} host(s)")
        self.workload = replace(self.workload, nodes=measured)

    def _freeze_environment_limits(self, study, result: Mapping[str, Any], default: bool) -> None:
        """Freeze (study attr ``frozen``) the knobs no configuration can make take effect: on this file system
        and MPI-IO (striping off Lustre, ROMIO's hints under Open MPI's OMPIO: :func:`iobo.stack.environment_limits`),
        and, from a run of the default before the search (``default``: the run was one), for this program: those
        the shim saw no call to act on
        (:func:`iobo.stack.inert_knobs`: the read hints of a program that never reads...). A later run that
        makes such a call (a knob of the program changed what it does) thaws them."""
        from iobo.stack import INERT_REASONS, environment_limits, inert_knobs

        known = study.user_attrs.get(trials.FROZEN_ATTR, {})
        limits = environment_limits(self.space, result["fs_type"], result.get("mpi_io"), result.get("ompi_io", "")) \
            if result.get("fs_type") else {}
        inert = inert_knobs(self.space, result["io"]) if result.get("io") else None
        searching = any(trials.role(t) == ROLE_SEARCH and t.state != state("WAITING")
                        for t in study.get_trials(deepcopy=False))
        new = {**(inert if default and inert and not searching else {}), **limits}
        new = {k: v for k, v in new.items() if k not in known}
        thawed = [k for k, reason in known.items()
                  if inert is not None and reason in INERT_REASONS.values() and k not in inert and k not in limits]
        if not new and not thawed:
            return
        study.set_user_attr(trials.FROZEN_ATTR, {**{k: v for k, v in known.items() if k not in thawed}, **new})
        by_reason: dict[str, list[str]] = {}
        for knob, reason in new.items():
            by_reason.setdefault(reason, []).append(knob)
        for reason, knobs in by_reason.items():
            self._say(f"frozen at their defaults: {', '.join(knobs)} ({reason})")
        if thawed:
            self._say(f"no longer frozen: {', '.join(thawed)} (a run made the calls they act on)")

    # -- the phases after the search, once per study ------------------------------
    @contextlib.contextmanager
    def _concluding(self, study, phase: str):
        """Hold the study's phase lease (:func:`iobo.trials.claim_phase_lease`) for the block: one tuner at a time
        runs the walk-back and the confirmation.

        Waits, saying for what, while another live tuner holds it, or while
        other tuners' search trials still run (their results may change the
        best trial). A holder that died (killed: its process is gone, or on
        another host nothing of it started or finished for ``timeout_s`` +
        ``UNOWNED_AFTER_S``) leaves a stale lease, taken over. Re-entrant.
        """
        if self._holding:
            self._holding += 1
            try:
                yield
            finally:
                self._holding -= 1
            return
        quiet_s = self.timeout_s + UNOWNED_AFTER_S
        said = None
        while True:
            self._fail_stale(study)
            lease, alive = trials.phase_lease(study, quiet_s)
            running = [t for t in study.get_trials(deepcopy=False, states=(state("RUNNING"),)) if trials.is_tuning(t)
                       and t.user_attrs.get("owner") != trials.owner()
                       and time.time() - t.user_attrs.get("started_unix", time.time()) < quiet_s]
            if lease and alive and lease["token"] != self._token:
                why = (f"waiting for tuner {lease['owner']}, which runs the {lease['phase']} phase of study "
                       f"{self.study!r}: its conclusion is reported here")
            elif running:
                why = f"waiting for {len(running)} search trial(s) of other tuners to finish before the {phase}"
            else:
                if lease and not alive and lease["token"] != self._token:
                    self._say(f"tuner {lease['owner']} left the {lease['phase']} phase unfinished (it is gone): "
                              f"taking over")
                if trials.claim_phase_lease(study, self._token, phase):
                    break
                continue
            if why != said:
                self._say(why)
                said = why
            time.sleep(LEASE_POLL_S)
        self._holding = 1
        try:
            yield
        finally:
            self._holding = 0
            trials.release_phase_lease(study, self._token)

    def _say_concluded(self, study, best, done, what: str) -> None:
        """Say that another tuner ran ``what`` for the current best trial, and what it concluded."""
        from iobo.minimize import current_minimal

        self._say(f"the {what} of trial {best.number} ran in another tuner ({done['owner']}) while this one worked; "
                  f"its conclusion:")
        minimal = current_minimal(study, best)
        if minimal is not None:
            self._say(minimal.describe())
        plan = study.user_attrs.get(trials.CONFIRM_PLAN_ATTR)
        if what != "walk-back" and plan:
            self._say(f"confirmation: {plan['pairs']} interleaved pairs ({plan['why']})")

    # -- resume ----------------------------------------------------------------
    def _fail_stale(self, study) -> None:
        """Mark FAIL the trials a killed tuner left RUNNING (:func:`iobo.trials.fail_stale`), and remove their
        files."""
        for trial in trials.fail_stale(study):
            self._remove_run_dirs(trial)
            self._say(f"trial {trial.number} was left RUNNING by a dead tuner "
                      f"({trial.user_attrs.get('owner') or 'unknown'}): marked FAIL")

    def transfer_model(self):
        """The warm start's :class:`iobo.transfer.TransferModel` (looked for once; saying which studies it
        learnt from), or None: no ``warm_start``, or no earlier study of the kernel in the storage."""
        if not self._transfer_looked:
            from iobo.stack import filesystem_type
            from iobo.transfer import warm_start

            self._transfer_looked = True
            if self.warm_start:
                context = replace(kernel_context(self.kernel, self.ranks, self.kernel_options),
                                  fs_type=filesystem_type(Path(self.workdir)))
                self._transfer = warm_start(self.storage, context, self.space, exclude=self.study)
                if self._transfer is not None:
                    self._say(self._transfer.describe())
        return self._transfer

    def enqueue_warm_start(self, study) -> list:
        """Queue the warm start's configurations (:meth:`transfer_model`) after the default runs, once per
        study; returns the :class:`iobo.transfer.Transferred` queued now."""
        model = self.transfer_model()
        if model is None:
            return []
        from iobo.stack import environment_limits, filesystem_type
        from iobo.transfer import enqueue_transfer

        frozen = environment_limits(self.space, filesystem_type(Path(self.workdir)))
        queued, _ = enqueue_transfer(study, model, self.workload, frozen)
        for proposed in queued:
            self._say(f"queued {proposed.origin}: {proposed.reason}")
        return queued

    def enqueue_defaults(self, study) -> None:
        """Queue system-default runs until the study has ``default_repeats`` of them (also used by
        :func:`iobo.integrations.ray.run`, which drives the same study through Ray Tune)."""
        trials.enqueue_defaults(study, self.space.default(), self.default_repeats)

    def _say(self, line: str) -> None:
        if self.echo:
            self.echo(line)


def confirm_plan(study, expected_speedup: float, repeats: int) -> dict[str, Any]:
    """How many interleaved pairs :meth:`Tuner.confirm` runs, and why: ``{"pairs", "at_most", "noise_sd_log",
    "default_runs", "expected_speedup", "why"}`` (``at_most``: the pairs in all an undecided confirmation may grow
    to, ``CONFIRM_AT_MOST`` times ``repeats`` and at least ``INTERVAL_MIN_RUNS``). The noise is the standard
    deviation of ``log(MB/s)`` over the study's default runs (:func:`iobo.trials.baseline`; none with fewer
    than 3)."""
    import statistics

    from iobo.measure import INTERVAL_MIN_RUNS, planned_pairs

    base = trials.baseline(study.get_trials(deepcopy=False))
    runs = [v for v in (base.runs.values if base else ()) if v > 0]
    sd = statistics.stdev(math.log(v) for v in runs) if len(runs) >= 3 else 0.0
    at_most = max(CONFIRM_AT_MOST * repeats, INTERVAL_MIN_RUNS)
    if expected_speedup <= 1.0 or not sd:
        pairs = repeats
        why = "as asked" if expected_speedup <= 1.0 else "as asked: fewer than 3 default runs to plan from"
    else:  # a planned confirmation is one whose interval can exclude 1: INTERVAL_MIN_RUNS pairs at least
        at_least = max(repeats, INTERVAL_MIN_RUNS)
        pairs = planned_pairs(sd, expected_speedup, at_least, at_most)
        why = (f"planned: {expected_speedup:.2f}x measured by the walk-back, noise {sd:.2f} in log MB/s over "
               f"{len(runs)} default runs; at least {at_least}, at most {at_most}")
    return {"pairs": pairs, "at_most": at_most, "noise_sd_log": sd, "default_runs": len(runs),
            "expected_speedup": expected_speedup, "why": why}


def checking_plan(budget_s: float, trial_s: float, repeats: int, pairs: int, changes: int,
                  walk_back_budget_s: float) -> dict[str, Any]:
    """What the walk-back and the confirmation after the search may measure within ``budget_s`` seconds (the stop
    rule's :meth:`iobo.stopping.StopRule.checking_budget_s`; ``math.inf``: no limit) at ``trial_s`` seconds a run:
    ``{"confirm", "walk_back", "walk_back_budget_s", "why"}`` (``why`` empty without a limit).  The confirmation's
    first ``repeats`` pairs come first, or nothing is re-measured; the walk-back runs only when the rest also pays
    its first ``pairs`` pairs for each of the best configuration's ``changes`` from the default (0: no walk-back
    to run), and its budget (``walk_back_budget_s``) is cut to that rest."""
    if budget_s == math.inf:
        return {"confirm": True, "walk_back": True, "walk_back_budget_s": walk_back_budget_s, "why": ""}
    stake = f"the stake, {budget_s:,.1f} s of the production runs' I/O at the default,"
    confirm_s = 2 * repeats * trial_s
    if budget_s < confirm_s:
        return {"confirm": False, "walk_back": False, "walk_back_budget_s": 0.0,
                "why": f"{stake} is below the cost of the confirmation's first {repeats} pairs ({confirm_s:,.1f} s "
                       f"at {trial_s:,.1f} s a run): nothing re-measured, so no speedup is claimed (`iobo confirm` "
                       f"re-measures anyway)"}
    rest_s = budget_s - confirm_s
    walk_s = 2 * pairs * changes * trial_s
    if rest_s < walk_s:
        return {"confirm": True, "walk_back": False, "walk_back_budget_s": 0.0,
                "why": f"{stake} less the confirmation's first {repeats} pairs leaves {rest_s:,.1f} s, below the "
                       f"walk-back's first {pairs} pairs for each of {changes} change(s) ({walk_s:,.1f} s): the whole "
                       f"configuration is confirmed, without testing which changes matter"}
    budget = min(walk_back_budget_s, float(int(rest_s)))  # whole seconds
    bounds = f"the walk-back's budget to {budget:,.1f} s and " if changes else ""
    return {"confirm": True, "walk_back": bool(changes), "walk_back_budget_s": budget,
            "why": f"{stake} bounds {bounds}the confirmation's pairs to what it pays for"}


def within_pairs(plan: dict[str, Any], affordable: int) -> dict[str, Any]:
    """``plan`` (:func:`confirm_plan`) with its pairs and ``at_most`` cut to ``affordable`` pairs, its ``why``
    saying so when that cut anything."""
    if plan["pairs"] <= affordable and plan["at_most"] <= affordable:
        return plan
    return {**plan, "pairs": min(plan["pairs"], affordable), "at_most": min(plan["at_most"], affordable),
            "why": plan["why"] + f"; at most {affordable} pairs, what the stake pays for"}


def confirmation_round(confirmation, done: int, at_most: int, repeats: int, extra_s: float) -> tuple[int, str]:
    """How many more interleaved pairs an undecided confirmation runs next, and what stopped it: ``(pairs, "")``
    to measure ``pairs`` more; ``(0, "")`` when it is decided (or has no interval, or none ran); ``(0, why)`` when
    it is still undecided after ``done`` pairs of this confirmation and ``at_most`` pairs or
    ``CONFIRM_EXTRA_SECONDS`` (``extra_s`` spent) stop it. ``confirmation``: a
    :class:`iobo.minimize.Confirmation` or None."""
    from iobo.minimize import UNDECIDED

    if confirmation is None or confirmation.verdict != UNDECIDED:
        return 0, ""
    if done >= at_most:
        return 0, f"the limit of {at_most} pairs"
    if extra_s >= CONFIRM_EXTRA_SECONDS:
        return 0, f"the limit of {CONFIRM_EXTRA_SECONDS:g} s of extra pairs"
    return min(repeats, at_most - done), ""


def _pairs_of(default: Mapping[str, Any], values: Mapping[str, Any], pairs: int) -> list:
    """``pairs`` interleaved confirmation runs, default first: (configuration, trial attrs) for :meth:`Tuner.measure`."""
    return [run for _ in range(pairs)
            for run in ((default, {"role": ROLE_CONFIRM_DEFAULT}), (values, {"role": ROLE_CONFIRM_BEST}))]


def _short(values: Mapping[str, Any], limit: int = 6) -> str:
    items = [f"{k}={v}" for k, v in values.items()]
    return ", ".join(items[:limit]) + (" ..." if len(items) > limit else "")


class _sigterm_as_interrupt:
    """Within the block, SIGTERM raises :class:`Interrupted` (a KeyboardInterrupt: the study is left consistent);
    an ignored SIGTERM stays ignored."""

    def __enter__(self):
        self._previous = signal.getsignal(signal.SIGTERM)
        if self._previous == signal.SIG_IGN:
            self._previous = None
            return self
        try:
            signal.signal(signal.SIGTERM, self._raise)
        except ValueError:  # not the main thread: leave signals alone
            self._previous = None
        return self

    @staticmethod
    def _raise(signum, frame):
        raise Interrupted(signum)

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)

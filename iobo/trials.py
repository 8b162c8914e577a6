"""The study's vocabulary: trial roles and attrs, the best and the tuning trials, the RoTI curve.

Every layer that reads a study (the tuner, the decorator, importance,
stopping, the report, the dashboard, the CLI) speaks of its trials through
this module, so that "a default run", "the best configuration" or "the
trials the budget counts" mean one thing everywhere.

Roles (user attr ``role``):

- ``default``: a run of the system default, the baseline;
- ``search``: a configuration proposed by the sampler (the role of any
  trial that was not enqueued with another);
- ``confirm-default`` / ``confirm-best``: interleaved re-measurements made
  after the search (``Tuner.confirm``);
- ``minimize``: runs that test which of the best configuration's changes
  matter (``Tuner.minimize``, :mod:`iobo.minimize`).
- ``surplus``: a trial asked by one of several tuners sharing a study after
  another had asked the last one the target allows; told FAIL unrun.

Default and search runs are the *tuning* trials: what the budget counts,
what importance and the GP see, what the RoTI curve is made of.

Origins (user attr ``origin``, :func:`origin`): where a trial's
configuration came from: ``default`` (the system default), ``rule:<name>``
(a rule read from the application's Darshan log,
:mod:`iobo.integrations.darshan_rules`), ``sampler`` (the study's sampler:
its start-up design or its model), or the role of a re-measurement.
Bandwidths are MB/s (10^6 bytes per second), maximised.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from iobo import _compat
from iobo.adapters import COLLECTIVE_IO_MODES
from iobo.errors import ConfigError
from iobo.measure import Spread, format_mb_per_s, roti
from iobo.storage import open_storage

METRIC_NAME = "bandwidth (MB/s)"
ROLE_DEFAULT, ROLE_SEARCH = "default", "search"
ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST = "confirm-default", "confirm-best"
ROLE_MINIMIZE = "minimize"
ROLE_SURPLUS = "surplus"
TUNING_ROLES = (ROLE_DEFAULT, ROLE_SEARCH)
MEASURED_ROLES = (*TUNING_ROLES, ROLE_MINIMIZE, ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST)
"""Roles of the runs that measured a configuration: the search's and the re-measurements after it."""
ORIGIN_ATTR = "origin"
ORIGIN_SAMPLER = "sampler"
INCUMBENT_ATTR = "incumbent"
"""Study attr: the GP sampler's pick at the end of the search, ``{"params", "mb_per_s", "search_trials"}``
(the measured configuration with the best posterior mean, its estimate, and the completed search trials then)."""
STOP_SAID_ATTR = "stop_said_at"
"""Study attr: the completed tuning trials when the stop rule said stop, after which the study re-measures its best
few configurations before it ends (:class:`iobo.tuner.Tuner`; absent while the rule has not said stop)."""
IDENTITY_KEYS = ("kernel", "ranks", "kernel_options", "task", "command")
"""Study attrs that say what a study tunes (a kernel at a scale, a decorated task, a command)."""


def state(name: str):
    """Optuna's ``TrialState[name]`` (imported lazily: ``import iobo`` stays light)."""
    from optuna.trial import TrialState

    return TrialState[name]


def role(trial) -> str:
    """The trial's role; a trial enqueued without one is a search trial."""
    return trial.user_attrs.get("role", ROLE_SEARCH)


def origin(trial) -> str:
    """Where the trial's configuration came from: its ``origin`` attr, else its role for a run the tuner
    queued (default, confirm, minimize), else ``sampler``."""
    if ORIGIN_ATTR in trial.user_attrs:
        return trial.user_attrs[ORIGIN_ATTR]
    return role(trial) if role(trial) != ROLE_SEARCH else ORIGIN_SAMPLER


def is_tuning(trial) -> bool:
    """True for default and search runs (not re-measurements)."""
    return role(trial) in TUNING_ROLES


def completed_trials(study, roles: Iterable[str]) -> list:
    """Completed trials whose role is one of ``roles``, in trial order."""
    roles = set(roles)
    return [t for t in study.get_trials(deepcopy=False, states=(state("COMPLETE"),)) if role(t) in roles]


def tuning_trials(study) -> list:
    """Completed default and search trials, in trial order."""
    return completed_trials(study, TUNING_ROLES)


def measured_trials(study) -> list:
    """Completed runs of every role that measures a configuration (``MEASURED_ROLES``), in trial order."""
    return completed_trials(study, MEASURED_ROLES)


def values_of(trials: Iterable, wanted_role: str) -> tuple[float, ...]:
    """Bandwidths (MB/s) of the completed trials of ``wanted_role``, in trial order."""
    return tuple(t.value for t in trials if t.state == state("COMPLETE") and t.user_attrs.get("role") == wanted_role)


@dataclass(frozen=True)
class Baseline:
    """The system default's bandwidth (MB/s) from every run of it in a study.

    start: the default runs before the first search trial; later: those
    interleaved through the search and the re-measurements
    (``confirm-default``). The estimate is the median of all of them, so a
    cold first run or a quiet hour moves it little.
    """

    start: Spread | None
    later: Spread | None

    @property
    def runs(self) -> Spread:
        return Spread(tuple(self.start.values if self.start else ()) + tuple(self.later.values if self.later else ()))

    @property
    def median(self) -> float:
        """The baseline: median of all default runs (MB/s)."""
        return self.runs.median

    @property
    def drift(self) -> float | None:
        """Later median over start median, minus 1 (0.1: the default got 10% faster); None without both."""
        if not self.start or not self.later:
            return None
        return self.later.median / self.start.median - 1

    def describe(self) -> str:
        text = f"{self.runs.describe()}"
        if self.drift is not None:
            text += (f"; start {format_mb_per_s(self.start.median)} MB/s ({self.start.n} runs), later "
                     f"{format_mb_per_s(self.later.median)} MB/s ({self.later.n} runs): drift {100 * self.drift:+.0f}%")
        return text


def baseline(trials) -> Baseline | None:
    """The :class:`Baseline` of a study's trials, or None before a default run completed."""
    done = sorted((t for t in trials if t.state == state("COMPLETE")), key=lambda t: t.number)
    first_search = next((t.number for t in done if role(t) == ROLE_SEARCH), None)
    start, later = [], []
    for t in done:
        if t.user_attrs.get("role") == ROLE_DEFAULT:
            (start if first_search is None or t.number < first_search else later).append(t.value)
        elif t.user_attrs.get("role") == ROLE_CONFIRM_DEFAULT:
            later.append(t.value)
    if not start and not later:
        return None
    return Baseline(Spread(tuple(start)) if start else None, Spread(tuple(later)) if later else None)


def best_trial(study):
    """The incumbent: the GP's pick when it was recorded after the last completed search trial (study attr
    ``INCUMBENT_ATTR``: the latest search trial of that configuration; the fastest default run when it is the
    system default's); else the completed search trial with the highest bandwidth, when it beats the median of
    the default runs; else the fastest default run (keep the system default); None before any completed.

    The GP's pick weighs every run of a configuration and of its
    neighbours, so one lucky run of a weaker configuration does not make it
    the incumbent (issue 31; experiments/results/sampler-identify.txt).
    Without a recorded pick (another sampler, a study still searching), the
    best single run.
    A default run is never the incumbent over a search trial that beats the
    baseline: on a shared machine one lucky default run (CV 20% is common)
    would otherwise hide what the search found from the walk-back and the
    confirmation, which re-measure the incumbent against the default and
    so decide whether it is a gain. Re-measurements (confirm, minimize) are
    left out, of the candidates and of the median: a lucky re-run must not
    replace what the search found, and the incumbent (which the walk-back's
    result is stored against) must not change when the confirmation
    re-measures the default.
    """
    complete = tuning_trials(study)
    search = [t for t in complete if role(t) == ROLE_SEARCH]
    defaults = [t for t in complete if role(t) == ROLE_DEFAULT]
    picked = study.user_attrs.get(INCUMBENT_ATTR)  # stale once another search trial completed
    if search and picked and picked.get("search_trials") == len(search):
        same = [t for t in search if dict(t.params) == picked["params"]]
        if same:
            return same[-1]
        if defaults and picked["params"] == dict(defaults[0].params):
            return max(defaults, key=lambda t: t.value)
    best_search = max(search, key=lambda t: t.value) if search else None
    baseline_mb_per_s = Spread(tuple(t.value for t in defaults)).median if defaults else None
    if best_search is not None and (baseline_mb_per_s is None or best_search.value > baseline_mb_per_s):
        return best_search
    return max(defaults, key=lambda t: t.value) if defaults else best_search


def record_incumbent(study, params: dict[str, Any], mb_per_s: float) -> None:
    """Store a model's pick at the end of the search (``INCUMBENT_ATTR``), which :func:`best_trial` prefers to the
    best single run until another search trial completes; nothing before a search trial completed."""
    search = completed_trials(study, (ROLE_SEARCH,))
    if search:
        study.set_user_attr(INCUMBENT_ATTR, {"params": dict(params), "mb_per_s": float(mb_per_s),
                                             "search_trials": len(search)})


def count_finished(study) -> int:
    """Finished (COMPLETE, FAIL or PRUNED) default and search trials: what a trial budget counts."""
    finished = (state("COMPLETE"), state("FAIL"), state("PRUNED"))
    return sum(1 for t in study.get_trials(deepcopy=False, states=finished) if is_tuning(t))


def count_asked(study, before: int | None = None) -> int:
    """Default and search trials asked so far (RUNNING or finished; WAITING ones are only queued).

    What several tuners sharing a study compare with its target: a RUNNING
    trial finishes one way or another (a dead tuner's is told FAIL as
    stale), so it already counts.  before: count only trials numbered below
    it (Optuna numbers trials in the order they are created, in every storage).
    """
    asked = [t for t in study.get_trials(deepcopy=False) if t.state != state("WAITING") and is_tuning(t)]
    return sum(1 for t in asked if before is None or t.number < before)


def tell_surplus(study, trial, target: int) -> None:
    """Tell FAIL, unrun, a trial asked after the study's ``target`` was reached by other tuners' trials."""
    trial.set_user_attr("role", ROLE_SURPLUS)
    trial.set_user_attr("fail_reason", f"surplus: the study already had its {target} trials when this one was "
                                       f"asked (another tuner asked the last one first); not run")
    study.tell(trial, state=state("FAIL"))


def default_config(trials) -> dict | None:
    """The system default's parameters: the first default-role run's, else those the first enqueued
    trial was given (``fixed_params``, as ``study.enqueue_trial`` stores them); None with neither."""
    for t in trials:
        if t.user_attrs.get("role") == ROLE_DEFAULT:
            return dict(t.params)
    return next((dict(t.system_attrs["fixed_params"]) for t in trials if "fixed_params" in t.system_attrs), None)


def config_of(trial) -> dict[str, Any]:
    """The configuration a trial ran: its ``config`` attr (after constraint repair), else its params."""
    return dict(trial.user_attrs.get("config", trial.params))


STALE_REASON = "stale:"
"""How the ``fail_reason`` of a trial a dead tuner left RUNNING begins (:func:`fail_stale`): it was told FAIL
when a later tuner found it, so its end is not when it stopped running."""


def roti_curve(trials, default_mb_per_s: float | None) -> list[tuple[float, float, float]]:
    """(minutes, best so far MB/s, RoTI MB/s per minute) after each tuning trial.

    Minutes are tuning time: the time during which tuning trials ran (the
    union of their start-to-end intervals) up to each trial's completion,
    so a pause between runs (a Ctrl-C and a resume minutes later, a budget
    raised the next day) is not counted, and trials running at once count
    once. A stale trial (its tuner died) adds no time: its end is when it
    was found. Failures before the first completed run add no point.
    """
    tuning = [t for t in trials if is_tuning(t) and t.datetime_start is not None and t.datetime_complete is not None]
    if not tuning or default_mb_per_s is None:
        return []
    ran = [(t.datetime_start, t.datetime_complete) for t in tuning
           if not str(t.user_attrs.get("fail_reason", "")).startswith(STALE_REASON)]
    best = None
    curve = []
    for t in sorted(tuning, key=lambda t: t.datetime_complete):
        if t.state == state("COMPLETE"):
            best = t.value if best is None else max(best, t.value)
        if best is None:
            continue
        minutes = _busy_seconds(ran, until=t.datetime_complete) / 60
        curve.append((minutes, best, roti(best, default_mb_per_s, minutes)))
    return curve


def _busy_seconds(intervals, until) -> float:
    """Seconds covered by the union of ``intervals`` ((start, end) datetimes), each cut at ``until``."""
    total, current = 0.0, None
    for start, end in sorted((s, min(e, until)) for s, e in intervals if s < until):
        if current is not None and start <= current[1]:
            current = (current[0], max(current[1], end))
            continue
        if current is not None:
            total += (current[1] - current[0]).total_seconds()
        current = (start, end)
    return total + ((current[1] - current[0]).total_seconds() if current else 0.0)


# -- opening a study and writing to its trials ------------------------------------------


def open_study(storage, name: str, sampler, made_for: Mapping[str, Any], space_names: Iterable[str],
               attrs: Mapping[str, Any] | None = None):
    """Create or load the maximising study ``name``; a loaded one must have been made for ``made_for``.

    made_for: the study attrs that identify what is tuned (some of
    ``IDENTITY_KEYS``: kernel, ranks and options; the command; or the
    decorated task), written on a new study and compared with a loaded
    one's; space_names: the tuned parameters, recorded once; attrs: more
    attrs written on a new study, not compared (what reading the study from
    another process needs: :data:`SPACE_ATTR`, a kernel's description).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=open_storage(storage), study_name=name, direction="maximize",
                                sampler=sampler, load_if_exists=True)
    stored = {k: study.user_attrs[k] for k in IDENTITY_KEYS if k in study.user_attrs}
    # another tuner may be writing the attrs right now, one at a time: a part that agrees is no mismatch
    if stored and any(made_for.get(k, object()) != v for k, v in stored.items()):
        raise ConfigError(
            f"study {name!r} was made for {stored}; this run asks for {dict(made_for)}: "
            f"use another study name (--study, study=), or the settings the study was made for"
        )
    if stored != dict(made_for):
        for key, value in made_for.items():
            study.set_user_attr(key, value)
        study.set_user_attr("space", list(space_names))
        for key, value in (attrs or {}).items():
            study.set_user_attr(key, value)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([METRIC_NAME])
    return study


SPACE_ATTR = "space_parameters"
"""Study attr: the tuned space's parameters (:meth:`iobo.space.Space.to_records`), so that ``best``, ``export``
and ``report`` read the study's configurations in any process, whoever made the space."""


def stored_space(study):
    """The :class:`iobo.space.Space` recorded on ``study`` (:data:`SPACE_ATTR`), or None for a study made before
    iobo recorded it."""
    from iobo.space import Space

    records = study.user_attrs.get(SPACE_ATTR)
    return Space.from_records(records) if records else None


def subject(attrs: Mapping[str, Any]) -> str:
    """What a study tuned, in a few words, from its attrs: ``kernel vpic``, ``command ./app ...``, ``task write``."""
    if "command" in attrs:
        return f"command {attrs['command'].get('template', '?')}"
    if "kernel" in attrs:
        return f"kernel {attrs['kernel']}"
    if "task" in attrs:
        return f"task {attrs['task']} (@iobo.tune)"
    return "unknown (the study records no kernel, command or task)"


def enqueue_defaults(study, default: Mapping[str, Any], repeats: int) -> int:
    """Queue system-default runs until the study holds ``repeats`` of them (completed or waiting).

    Returns how many were queued.
    """
    have = sum(1 for t in study.get_trials(deepcopy=False, states=(state("COMPLETE"), state("WAITING")))
               if t.user_attrs.get("role") == ROLE_DEFAULT)
    for _ in range(repeats - have):
        study.enqueue_trial(dict(default), user_attrs={"role": ROLE_DEFAULT})
    return max(0, repeats - have)


def enqueue_first(study, runs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> int:
    """Queue search runs proposed before the sampler (rules, earlier studies): ``(configuration, attrs)`` pairs,
    attrs with an ``origin``; a run whose origin a trial of the study already has is not queued again (a
    resumed study). Returns how many were queued.

    Queue them after :func:`enqueue_defaults`: Optuna runs waiting trials in the order they were queued.
    """
    have = {t.user_attrs.get(ORIGIN_ATTR) for t in study.get_trials(deepcopy=False)}
    queued = 0
    for values, attrs in runs:
        if attrs[ORIGIN_ATTR] in have:
            continue
        study.enqueue_trial(dict(values), user_attrs={"role": ROLE_SEARCH, **attrs})
        have.add(attrs[ORIGIN_ATTR])
        queued += 1
    return queued


def owner() -> str:
    """``host:pid`` of this process: who started a trial (for clean-up after a crash)."""
    return f"{socket.gethostname()}:{os.getpid()}"


ASKING_ATTR_PREFIX = "asking:"
"""Study attr ``asking:<owner>`` (an :func:`owner`): unix time that tuner began ``study.ask()``, None once the
trial it stored carries its owner (:func:`ask_owned`). ``ask()`` stores the RUNNING trial before it samples, so
a tuner killed inside it leaves a trial with no owner; when no live tuner is asking, that trial is stale."""


def ask_owned(study):
    """``study.ask()``, the trial stamped with its owner before this returns; the ask is registered meanwhile
    (``ASKING_ATTR_PREFIX``), so a trial without an owner can be told from one whose owner is about to write it."""
    key = ASKING_ATTR_PREFIX + owner()
    study.set_user_attr(key, time.time())
    try:
        trial = study.ask()
        trial.set_user_attr("owner", owner())
    finally:
        study.set_user_attr(key, None)
    return trial


def asking_elsewhere(study) -> bool:
    """Whether a tuner other than this process may be inside :func:`ask_owned` on ``study`` now: one registered
    as asking that runs on this host, or on another host (not knowable from here)."""
    me = owner()
    for key, since in study.user_attrs.items():
        who = key[len(ASKING_ATTR_PREFIX):]
        if key.startswith(ASKING_ATTR_PREFIX) and since is not None and who != me and owner_alive(who) is not False:
            return True
    return False


UNOWNED_AFTER_S = 120.0
"""A RUNNING trial with no owner attr this old (seconds) is stale even while a tuner is asking (:func:`stale`)."""


def stale(study) -> list:
    """The RUNNING trials of ``study`` whose tuner is known to be dead: its owner ran on this host and is gone,
    or it has no owner (its tuner died inside :func:`ask_owned`) and no live tuner is asking, or it has had
    none for ``UNOWNED_AFTER_S``. A trial owned on another host is never stale here (not knowable).

    The order of the reads matters: a live tuner registers its ask before the trial exists and clears it only
    after writing the owner. So a trial seen without an owner, then no ask registered, then read again and
    still without an owner, was left by a dead tuner; without the second read, a tuner that wrote its owner
    and cleared its ask between the first two reads would lose its trial.
    """
    running = study.get_trials(deepcopy=False, states=(state("RUNNING"),))
    found = [t for t in running if t.user_attrs.get("owner") and owner_alive(t.user_attrs["owner"]) is False]
    unowned = [t for t in running if not t.user_attrs.get("owner") and t.datetime_start is not None]
    young = [t for t in unowned if _age_s(t.datetime_start) < UNOWNED_AFTER_S]
    found += [t for t in unowned if t not in young]
    if young and not asking_elsewhere(study):
        still = {t.number for t in study.get_trials(deepcopy=False, states=(state("RUNNING"),))
                 if not t.user_attrs.get("owner")}
        found += [t for t in young if t.number in still]
    return sorted(found, key=lambda t: t.number)


def fail_stale(study) -> list:
    """Tell FAIL (``fail_reason`` "stale: ...", lost) the :func:`stale` trials of ``study``; the ones this
    process told. Several tuners may do this at once: a trial another one told first is left to it."""
    told = []
    for trial in stale(study):
        who = trial.user_attrs.get("owner") or "unknown"
        try:
            tell_failed(study, trial, f"{STALE_REASON} its tuner ({who}) died while it ran", lost=True)
        except Exception:
            if study.get_trials(deepcopy=False)[trial.number].state.is_finished():
                continue  # another tuner told it first
            raise
        told.append(trial)
    return told


def _age_s(started) -> float:
    """Seconds since ``started`` (a naive local datetime, as Optuna stores them)."""
    from datetime import datetime

    return (datetime.now() - started).total_seconds()


def owner_alive(who: str) -> bool | None:
    """Whether the process ``who`` (an :func:`owner`, ``host:pid``) still runs: True or False on this host; None
    for another host's, or a malformed one (not knowable from here)."""
    host, _, pid = who.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the phases after the search: one tuner at a time -------------------------------------

PHASE_LEASE_ATTR = "phase_lease"
"""Study attr: the tuner running the phases after the search (the walk-back, the confirmation) right now,
``{"owner": host:pid, "token", "phase", "since_unix"}``; None when none is (:func:`claim_phase_lease`)."""
CONCLUDED_ATTR = "concluded"
"""Study attr: ``{phase: {"from_trial", "owner", "token", "finished_unix"}}``: the last walk-back (``minimize``)
and confirmation (``confirm``) finished, from which best trial, by which tuner."""
LEASE_SETTLE_S = 2.0
"""Seconds a claim of the lease waits before reading it back (longer than a storage write takes)."""


def phase_lease(study, quiet_s: float) -> tuple[dict | None, bool]:
    """(the study's phase lease or None, whether its holder is alive).

    A holder on this host is alive while its process runs (as :func:`owner_alive`
    tells for a trial's owner); one on another host while it started or
    finished a trial, or claimed the lease, within ``quiet_s`` seconds (the
    longest a trial may run, and some). A dead holder's lease is stale: free.
    """
    lease = study.user_attrs.get(PHASE_LEASE_ATTR)
    if not lease:
        return None, False
    alive = owner_alive(lease["owner"])
    if alive is None:
        seen = [lease["since_unix"]]
        for t in study.get_trials(deepcopy=False):
            if t.user_attrs.get("owner") == lease["owner"]:
                seen.append(t.user_attrs.get("started_unix", 0.0))
                if t.datetime_complete is not None:
                    seen.append(t.datetime_complete.timestamp())
        alive = time.time() - max(seen) < quiet_s
    return lease, alive


def claim_phase_lease(study, token: str, phase: str) -> bool:
    """Try to take the phase lease (free or stale: see :func:`phase_lease`); True when this tuner holds it.

    Optuna's storages (SQLite, a journal file, PostgreSQL) offer no
    compare-and-set on an attr, so this is Fischer's mutual exclusion:
    write the claim right after finding the lease free, wait
    ``LEASE_SETTLE_S`` (longer than any write takes), and hold the lease
    only if the claim is still the one stored: of tuners that claimed
    together, the last writer holds it, and the others see it was not theirs.
    """
    claim = {"owner": owner(), "token": token, "phase": phase, "since_unix": time.time()}
    try:
        study.set_user_attr(PHASE_LEASE_ATTR, claim)
    except Exception:  # PostgreSQL: two first writes of the attr at once, one fails on the unique key
        return False
    time.sleep(LEASE_SETTLE_S)
    return (study.user_attrs.get(PHASE_LEASE_ATTR) or {}).get("token") == token


def release_phase_lease(study, token: str) -> None:
    """Free the phase lease when this tuner (``token``) holds it."""
    if (study.user_attrs.get(PHASE_LEASE_ATTR) or {}).get("token") == token:
        study.set_user_attr(PHASE_LEASE_ATTR, None)


def record_concluded(study, phase: str, from_trial: int, token: str) -> None:
    """Record (:data:`CONCLUDED_ATTR`) that ``phase`` finished for best trial ``from_trial``; by the lease holder."""
    done = dict(study.user_attrs.get(CONCLUDED_ATTR) or {})
    done[phase] = {"from_trial": from_trial, "owner": owner(), "token": token, "finished_unix": time.time()}
    study.set_user_attr(CONCLUDED_ATTR, done)


def concluded_elsewhere(study, phase: str, from_trial: int, token: str, since_unix: float) -> dict | None:
    """The record of ``phase`` finished for best trial ``from_trial`` by another tuner (not ``token``) after
    ``since_unix``, or None."""
    done = (study.user_attrs.get(CONCLUDED_ATTR) or {}).get(phase)
    if done and done["from_trial"] == from_trial and done["token"] != token and done["finished_unix"] >= since_unix:
        return done
    return None


CONFIRM_PLAN_ATTR = "confirm_plan"
"""Study attr: how many interleaved pairs the last confirmation ran and why (:func:`iobo.tuner.confirm_plan`)."""

FROZEN_ATTR = "frozen"
"""Study attr: {parameter: reason} of knobs that cannot take effect in this environment (striping off Lustre,
:func:`iobo.stack.environment_limits`) or for this program (no call to act on in the default runs under the shim,
:func:`iobo.stack.inert_knobs`): frozen at their defaults, left out of importance, never exported."""


def record_suggestion(trial, space, workload, frozen: Iterable[str] = ()) -> dict[str, Any]:
    """Ask ``trial`` for an assignment of ``space`` (constraints repaired) and record it on the trial.

    Attrs: owner (host:pid, first, so a resumed study can tell whose trial it
    is), role (``search`` unless enqueued with one), origin (:func:`origin`),
    config, repaired (what the constraints changed, if anything),
    started_unix. ``frozen`` knobs keep their defaults (see ``FROZEN_ATTR``).
    """
    if trial.user_attrs.get("owner") != owner():  # asked by :func:`ask_owned`: stamped already
        trial.set_user_attr("owner", owner())
    trial_role = role(trial)
    values, repaired = space.suggest(trial, workload, frozen)
    trial.set_user_attr("role", trial_role)
    trial.set_user_attr(ORIGIN_ATTR, origin(trial))
    trial.set_user_attr("config", values)
    if repaired:
        trial.set_user_attr("repaired", repaired)
    trial.set_user_attr("started_unix", time.time())
    return values


def outcome_attrs(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The trial attrs of a finished kernel run (a :func:`iobo.launch.run_kernel` result)."""
    result = outcome["result"]
    return {
        "bytes": outcome["bytes"],
        "seconds": outcome["seconds"],
        "step_mb_per_s": outcome["step_mb_per_s"],
        "step_elapsed_s": [round(s, 4) for s in outcome["step_elapsed_s"]],
        "wall_seconds": round(outcome["wall_seconds"], 3),
        "effective": result.get("effective", {}),
        "hints": result.get("hints", {}),
        "requested_hints": result.get("requested_hints", {}),
        "not_applied": result.get("not_applied", {}),
        "fs_type": result.get("fs_type"),
        **({"hosts": result["hosts"]} if result.get("hosts") else {}),  # a kernel's: {host: [rank, ...]}
        "command": " ".join(outcome["command"]),
        **{key: result[key] for key in SHIM_KEYS + ("stdout_tail",) if key in result},
        **({"workdir": outcome["workdir"]} if outcome.get("workdir") else {}),
    }


SHIM_KEYS = ("io", "partly_applied", "shim_warnings", "measured_by", "mpi_io")
"""Trial attrs of a program run under the preload shim, besides effective, hints and not_applied
(see :func:`shim_attrs`); ``mpi_io``: Open MPI's MPI-IO component the run used (``romio``, ``ompio``; None for
other MPIs, :func:`iobo.shim.io_component`)."""


def shim_attrs(report: Mapping[str, Any], config_values: Mapping[str, Any]) -> dict:
    """The trial attrs of the shim's report of one run (:func:`iobo.adapters.read_report`).

    config_values: the configuration the run was given. ``not_applied`` ({name:
    reason}) holds the requested settings that took effect on no call (a
    dataset, a file) of any rank: never acted on, or read back with another
    value every time, and ``transfer_mode`` ``independent`` (the default,
    which the shim leaves to the program) when the program's writes were
    collective all the same; ``partly_applied`` those that took effect on some
    calls and not others (e.g. a layout skipped on a scalar dataset).
    ``effective``: the HDF5 settings read back on the first HDF5 file, and
    the layout of each dataset created; ``hints``: the MPI-IO hints read back
    on the first MPI-IO file; ``io``: the accounting (level, bytes, the
    slowest rank's seconds, per-level calls, files opened, bytes and size histograms, the datasets created:
    what :func:`iobo.stack.inert_knobs` reads).
    """
    reasons: dict[str, str] = {}
    for item in report["not_applied"]:
        setting = item["variable"].removeprefix("IOBO_").lower()
        where = f" (in effect: {item['in_effect']} on {item['where']})" if item.get("in_effect") is not None else ""
        reasons.setdefault(setting, item["reason"] + where)
    not_applied, partly = {}, {}
    for setting, counts in report["applied"].items():
        if setting not in config_values:
            continue
        if counts["in_effect"] == 0:
            not_applied[setting] = reasons.get(setting, "no call read it back with the requested value")
        elif setting in reasons:
            partly[setting] = reasons[setting]
    collective = {mode: n for mode, n in report["effective"]["transfer"]["write"]["modes"].items()
                  if mode in COLLECTIVE_IO_MODES}
    if config_values.get("transfer_mode") == "independent" and collective:
        # the default is not requested from the shim: the program's own choice stays, and it may be collective
        not_applied["transfer_mode"] = (
            f"the program asks for collective transfer itself: HDF5 reports {collective} for its writes "
            f"(H5Pget_mpio_actual_io_mode); the shim only turns independent transfers collective")
    files = report["effective"]["files"]
    effective: dict[str, Any] = {}
    if files["hdf5"]:
        effective.update(next(iter(files["hdf5"].values())).get("settings", {}))
    for name, dataset in report["effective"]["datasets"].items():
        effective[f"dataset {name}"] = dataset["layout"] + (f" {dataset['chunk']}" if dataset.get("chunk") else "")
    hints = next(iter(files["mpiio"].values()))["hints"] if files["mpiio"] else {}
    io = {key: report[key] for key in ("level", "ranks", "bytes_written", "bytes_read", "io_seconds", "slowest_rank",
                                       "phase_seconds", "phase_rank", "hdf5_linked", "hdf5_calls")}
    io["levels"] = report["levels"]
    io["hosts"] = report.get("hosts", {})
    io["datasets_created"] = len(report["effective"]["datasets"])
    io["write_modes"] = dict(report["effective"]["transfer"]["write"]["modes"])
    io["files"] = {level: sorted(names)[:20] for level, names in files.items()}
    return {
        "effective": effective,
        "hints": dict(hints),
        "not_applied": not_applied,
        "partly_applied": partly,
        "io": io,
        "shim_warnings": list(report["warnings"]),
    }


LOST_ATTR = "lost"
"""Trial attr, True on a FAIL trial whose run was lost to the machinery rather than failed by the program: its
Parsl worker was lost (the batch job ended, its node went away) or its tuner died. Such a run says nothing of its
configuration: a lost default run does not count towards "the system default never ran"."""


def tell_failed(study, trial, reason: str, lost: bool = False) -> None:
    """Tell ``trial`` (a RUNNING ``FrozenTrial``) FAIL with ``reason`` as its ``fail_reason`` attr (and
    ``LOST_ATTR`` when ``lost``).

    The attr goes through the storage: an ``optuna.Trial`` would call the
    sampler's ``before_trial`` first, which has no business in clean-up.
    """
    _compat.set_frozen_trial_attr(study, trial, "fail_reason", reason)
    if lost:
        _compat.set_frozen_trial_attr(study, trial, LOST_ATTR, True)
    study.tell(trial.number, state=state("FAIL"))

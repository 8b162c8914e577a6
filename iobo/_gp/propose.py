"""One step of Bayesian optimisation: data in, next configuration out.

Inputs are index rows of an :class:`~iobo._gp.encoding.Encoding` and the
measured ``log`` objective (larger is better).  The GP is fitted to the
standardised values; the *incumbent* is the measured configuration with the
highest posterior mean (noise-aware: not the luckiest single run); log
augmented EI over that incumbent is maximised with pending configurations
conditioned on as fantasies.  Measured, pending and failed configurations
(a row's ``ANY`` entries covering every value) are never proposed, except
that the few most promising measured ones (by posterior mean) stay
eligible until measured ``max_repeats`` times:
re-measuring one is chosen when its augmented EI (which discounts what
noise would hide) beats every new configuration's.  With ``incumbent_runs``
above 1, an incumbent measured fewer times than that is re-measured before
anything else is proposed: with one run per configuration the GP cannot
tell noise from signal (a table where configurations differ only by noise
is fitted as all signal, noise 4% of the variance), so its posterior mean
at a lucky run is that run, and a lucky run of a weaker configuration
becomes the incumbent; its second run shows the luck, and pairs of runs
let the fit learn the noise.

With ``explore_every`` k above 0, every k-th run is proposed in a *slice*:
one parameter held at the value the runs so far took least often (other
than the incumbent's; a child's parent at a value that activates it), the
acquisition maximised over the rest.  The GP's confidence comes from its own
fit, and a smooth fit is confidently wrong about a narrow peak between
values measured bad (chunked layout pays only with 4 MiB chunks on 4 MiB
stripes: after 1 and 64 MiB chunks lost, the fit predicts 4 MiB lost too and
EI never measures it); a slice chosen by coverage, not by the model,
measures every value in the best context the model knows.  The sizes that
act through their ratio to the held one (:data:`iobo.space.SIZE_RATIOS`)
are held with it at the matching size (:func:`matching_sizes`): a 4 MiB
chunk measured on 1 MiB stripes is measured bad, and counted measured.
A slice run that measured well above what the model predicted for it
(:func:`surprising`: more than ``SURPRISE_SD`` standard deviations) is
*followed*: its held values are tried in the incumbent's context, the
incumbent's other settings with at most one more changed (:func:`follow_up`).
The acquisition alone does not follow it: the slice's other settings were
chosen for their uncertainty, so the run measured the value in a context
worse than the incumbent's, and a smooth fit spreads the many bad runs of
that value's neighbours over it (a 4 MiB chunk on 4 MiB stripes measured at
0.4 of the optimum beside an incumbent at 0.7 is still predicted at 0.2 in
the incumbent's context, where it is at 0.9).
Slices are explored only while the space holds more than
``SPARSE_CONFIGURATIONS_PER_RUN`` configurations per run: where the runs
cover a fair share of it (a recorded table of 72-216 configurations), the
model has seen most of it and the runs spent on coverage are lost to the
search (``experiments/results/sampler-explore.txt``).

From run ``identify_from`` on (0: never), where the runs do cover the
space (the same condition, reversed), every proposal re-measures one of the
``IDENTIFY_CANDIDATES`` measured configurations with the best posterior
means: top-two Thompson sampling (Russo 2016, best-arm identification).
From joint posterior draws over them, the *leader* is the configuration most
often best and the *challenger* the next; a fair coin picks which one is
measured (:func:`top_two`).  With one run of most configurations the best
few cannot be told apart, and where most of the space was seen a run spent
telling the leader from its challenger moves the recommendation more than
one more new configuration (``experiments/results/sampler-identify.txt``).
When the leader is best in every draw, the search goes on instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iobo._gp import model
from iobo._gp.acquisition import log_augmented_ei
from iobo._gp.encoding import Encoding, log2_values
from iobo._gp.optim import Excluded, Score, in_slice, maximize

N_PROMISING = 3  # measured configurations that may be re-measured
IDENTIFY_CANDIDATES = 8  # measured configurations (best posterior means) top-two sampling chooses among
IDENTIFY_DRAWS = 256  # joint posterior draws that tell the leader and the challenger
SURPRISE_SD = 1.5  # a slice run this many predicted standard deviations above its predicted mean is followed
SPARSE_CONFIGURATIONS_PER_RUN = 100  # slices are explored while the space holds more configurations per run
WARM_ITERATIONS = 10  # L-BFGS-B steps of a warm-started refit: each trial continues the last fit


@dataclass(frozen=True)
class Fit:
    """A fitted GP with its data summarised per distinct configuration.

    rows: distinct measured configurations (``u x p``); counts: runs of each
    (``u``); mean: posterior mean of each, in ``log`` units (``u``);
    posterior: the GP on standardised values; shift, scale: ``log value =
    shift + scale * standardised``.
    """

    rows: np.ndarray
    counts: np.ndarray
    mean: np.ndarray
    posterior: model.Posterior
    shift: float
    scale: float

    @property
    def best(self) -> int:
        """Index in ``rows`` of the incumbent (highest posterior mean)."""
        return int(np.argmax(self.mean))


def fit(
    encoding: Encoding, rows: np.ndarray, log_values: np.ndarray, warm: np.ndarray | None = None, optimise: bool = True
) -> Fit:
    """Fit the GP to measured rows (``n x p``) and their ``log`` objective values (``n``).

    warm: hyperparameters of an earlier fit to start from; optimise: False
    keeps ``warm`` unchanged (the GP is only conditioned on the new data).
    """
    shift = float(np.mean(log_values))
    scale = float(np.std(log_values)) or 1.0
    if warm is None:
        maxiter = 200
    else:
        maxiter = WARM_ITERATIONS if optimise else 0
    posterior = model.fit(
        encoding.slots(rows), (log_values - shift) / scale, encoding.distance_tables(), warm, maxiter=maxiter
    )
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    mean, _ = posterior.predict(encoding.slots(distinct))
    return Fit(distinct, counts, shift + scale * mean, posterior, shift, scale)


@dataclass(frozen=True)
class Proposal:
    """The next configuration to measure.

    row: its index row (``p``); held: the ``(position, choice)`` pairs it was
    held at, when proposed in a slice (else empty); mean, sd: then its
    predicted modelled value (``log`` units) and that prediction's standard
    deviation with the noise of one run (else None), for :func:`surprising`.
    """

    row: np.ndarray
    held: tuple[tuple[int, int], ...] = ()
    mean: float | None = None
    sd: float | None = None


def surprising(measured: float, mean: float, sd: float) -> bool:
    """Whether a slice run's ``measured`` modelled value lies more than ``SURPRISE_SD`` of its
    predicted ``sd`` above its predicted ``mean`` (all in ``log`` units, larger is better)."""
    return measured > mean + SURPRISE_SD * sd


def propose(
    encoding: Encoding,
    fitted: Fit,
    rng: np.random.Generator,
    pending: np.ndarray,
    failed: np.ndarray,
    max_repeats: int = 1,
    max_enumerate: int = 100_000,
    incumbent_runs: int = 1,
    explore_every: int = 0,
    follow: tuple[tuple[int, int], ...] = (),
    identify_from: int = 0,
    finalists: bool = False,
) -> Proposal:
    """The next configuration to measure.

    pending: rows being measured now (``k x p``); failed: rows that failed or
    were pruned (``f x p``), never proposed again; incumbent_runs: the
    incumbent is re-measured first while measured fewer times than this
    (and not pending); explore_every: the run whose number (runs measured
    and pending, counting from 0) is a multiple of this is proposed in the
    least measured slice (0: never) while the space is sparse in runs;
    follow: ``(position, choice)`` pairs of a surprising slice run, tried
    first in the incumbent's context (:func:`follow_up`); identify_from: from
    this run on (counted as for explore_every; 0: never), while the space is
    not sparse in runs, re-measure the leader or the challenger
    (:func:`top_two`) instead of searching; finalists: do so now, however
    sparse (a stop rule has ended the search).
    """
    incumbent = fitted.rows[fitted.best]
    runs = int(fitted.counts.sum()) + len(pending)
    sparse = encoding.size() > SPARSE_CONFIGURATIONS_PER_RUN * runs
    if finalists or (identify_from and runs >= identify_from and not sparse):
        row = top_two(encoding, fitted, rng, pending)
        if row is not None:
            return Proposal(row)
    if fitted.counts[fitted.best] < incumbent_runs and tuple(incumbent.tolist()) not in {
        tuple(r) for r in np.asarray(pending).tolist()
    }:
        return Proposal(np.asarray(incumbent, dtype=np.int64))
    standard_mean = (fitted.mean - fitted.shift) / fitted.scale
    best = float(standard_mean.max())
    posterior = fitted.posterior.with_fantasies(encoding.slots(pending))

    def score(rows: np.ndarray) -> np.ndarray:
        mean, variance = posterior.predict(encoding.slots(rows))
        return log_augmented_ei(mean, variance, best, fitted.posterior.noise_variance)

    as_set = lambda rows: {tuple(r) for r in np.asarray(rows).tolist()}  # noqa: E731
    busy = as_set(pending) | as_set(failed)
    promising = np.argsort(-fitted.mean)[:N_PROMISING]
    remeasurable = {tuple(fitted.rows[i].tolist()) for i in promising if fitted.counts[i] < max_repeats} - busy
    exclude = Excluded((as_set(fitted.rows) - remeasurable) | busy)
    def acquisition_max(fixed: tuple[tuple[int, int], ...] = ()) -> np.ndarray | None:
        return maximize(score, encoding, rng, exclude, seeds=fitted.rows[promising], max_enumerate=max_enumerate,
                        fixed=fixed)

    if follow:
        candidates = follow_up(score, encoding, incumbent, follow, rng)
        candidates = candidates[[tuple(r) not in exclude for r in candidates.tolist()]]
        if len(candidates):
            return Proposal(candidates[int(np.argmax(score(candidates)))])
    if explore_every and runs % explore_every == 0 and sparse:
        measured_rows = np.concatenate([np.repeat(fitted.rows, fitted.counts, axis=0), np.asarray(pending).reshape(
            -1, fitted.rows.shape[1])])
        held = least_measured_slice(measured_rows, incumbent, encoding, rng)
        if held is not None:
            held = (held, *matching_sizes(held, encoding))
            row = acquisition_max(held)
            if row is not None:
                mean, variance = posterior.predict(encoding.slots(row[None]))
                sd = fitted.scale * float(np.sqrt(variance[0] + fitted.posterior.noise_variance))
                return Proposal(row, held, fitted.shift + fitted.scale * float(mean[0]), sd)
    row = acquisition_max()
    if row is None:  # everything allowed was measured: re-measure the best-scoring configuration
        busy = Excluded(busy)
        candidates = np.array([r for r in fitted.rows.tolist() if tuple(r) not in busy] or fitted.rows.tolist())
        row = candidates[int(np.argmax(score(candidates)))]
    return Proposal(np.asarray(row, dtype=np.int64))


def top_two(encoding: Encoding, fitted: Fit, rng: np.random.Generator, pending: np.ndarray) -> np.ndarray | None:
    """Top-two Thompson sampling among the ``IDENTIFY_CANDIDATES`` measured configurations with the best
    posterior means: the index row (``p``) of the *leader* (best in most of ``IDENTIFY_DRAWS`` joint draws of
    the latent values) or of the *challenger* (best in most of the rest), by a fair coin; the other of the two
    when the one drawn is being measured (``pending``, ``k x p``).  None when both are, with fewer than two
    candidates, or when the leader is best in every draw."""
    rows = fitted.rows[np.argsort(-fitted.mean)[:IDENTIFY_CANDIDATES]]
    if len(rows) < 2:
        return None
    draws = fitted.posterior.joint_draws(encoding.slots(rows), IDENTIFY_DRAWS, int(rng.integers(2**31)))
    wins = np.bincount(np.argmax(draws, axis=1), minlength=len(rows))
    leader, challenger = (int(i) for i in np.argsort(-wins, kind="stable")[:2])
    if wins[challenger] == 0:
        return None
    busy = {tuple(r) for r in np.asarray(pending).tolist()}
    pair = [i for i in ((leader, challenger) if rng.random() < 0.5 else (challenger, leader))
            if tuple(rows[i].tolist()) not in busy]
    return np.asarray(rows[pair[0]], dtype=np.int64) if pair else None


def follow_up(score: Score, encoding: Encoding, incumbent: np.ndarray, held: tuple[tuple[int, int], ...],
              rng: np.random.Generator) -> np.ndarray:
    """Index rows (``m x p``) that take the ``held`` ``(position, choice)`` pairs in the ``incumbent``'s
    (``p``) context: the incumbent with the held choices (what that leaves open, a held child's parent
    or a child the held values activate, at the best ``score``), and each of that configuration's
    neighbours (one more parameter changed, :meth:`Encoding.neighbours`) that still takes them.
    The one more change lets a held value bring a partner that is not a size ratio (collective
    transfers bring collective buffering on).
    """
    positions = {position for position, _ in held}
    parents = {encoding.params[i].parent[0] for i in positions if encoding.params[i].parent is not None}

    def under_held(i: int) -> bool:  # a descendant of a held parameter: its activity is the held value's
        while encoding.params[i].parent is not None:
            i = encoding.params[i].parent[0]
            if i in positions:
                return True
        return False

    kept = tuple((i, int(k)) for i, k in enumerate(incumbent)
                 if i not in positions | parents and k >= 0 and not under_held(i))
    base = maximize(score, encoding, rng, fixed=(*held, *kept))
    if base is None:  # the incumbent's context contradicts the held values
        return np.zeros((0, len(encoding.params)), dtype=np.int64)
    near, _ = encoding.neighbours(base[None])
    rows = np.concatenate([base[None], near])
    return rows[in_slice(rows, held)]


def least_measured_slice(rows: np.ndarray, incumbent: np.ndarray, encoding: Encoding,
                         rng: np.random.Generator) -> tuple[int, int] | None:
    """``(position, choice)`` that the fewest measured ``rows`` (``n x p``) take, among the choices other than
    the ``incumbent``'s (``p``) of every parameter (ties drawn at random); None when no parameter has another."""
    slices = [(i, k) for i, p in enumerate(encoding.params) for k in range(len(p.choices)) if k != incumbent[i]]
    if not slices:
        return None
    counts = np.array([np.count_nonzero(rows[:, i] == k) for i, k in slices])
    fewest = np.flatnonzero(counts == counts.min())
    return slices[int(fewest[rng.integers(len(fewest))])]


def matching_sizes(held: tuple[int, int], encoding: Encoding) -> list[tuple[int, int]]:
    """``(position, choice)`` of each size that acts through its ratio to the ``held`` one
    (:attr:`Encoding.ratios`), at the choice nearest the held size in ``log2`` (a ratio of 1: chunks of
    the stripe size, a collective buffer of the stripe size, as many aggregators as stripes).

    A held value is measured in the context the ratio prior favours, so that a value that pays only
    matched (4 MiB chunks on 4 MiB stripes) is not counted measured on a mismatched size.  Left out: a
    conditional partner of an unconditional held parameter (holding it would force its parent: a stripe
    size must not force a chunked layout), and every partner of an unset (``None``) held choice.
    """
    position, choice = held
    params = encoding.params
    held_size = log2_values(params[position].choices)
    if held_size is None or params[position].choices[choice] is None:
        return []
    partners = {}
    for ratio in encoding.ratios:
        if position not in (ratio.first, ratio.second):
            continue
        other = ratio.second if ratio.first == position else ratio.first
        if params[other].parent is not None and params[position].parent is None:
            continue
        sizes = log2_values(params[other].choices)
        set_choices = [k for k, value in enumerate(params[other].choices) if value is not None]
        partners[other] = min(set_choices, key=lambda k: abs(sizes[k] - held_size[choice]))
    return sorted(partners.items())

"""Maximising an acquisition function over a finite, conditional space.

Up to ``max_enumerate`` configurations the maximum is exact: every
configuration is scored.  Beyond that, multi-start local search: score a
random sample, then climb from its best members and from given seeds (e.g.
the best observed configurations) to the best neighbour (one parameter
changed, :meth:`Encoding.neighbours`) until no neighbour improves.

Configurations in ``exclude`` (measured, pending, failed) are scored and may
be climbed through, but never returned.  A *slice* (parameters held at one
choice each) restricts the search to the configurations that take them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np

from iobo._gp.encoding import ANY, Encoding

Score = Callable[[np.ndarray], np.ndarray]  # index rows (m x p) -> scores (m)


class Excluded:
    """A set of configurations (index rows as tuples) where an ``ANY`` entry covers every value.

    ``tuple(row) in excluded`` for a row of choice indices (``-1`` inactive).
    Rows are kept per pattern of ``ANY`` positions; a query is masked with
    each pattern (few: one per way trials skipped unexplained parameters).
    """

    def __init__(self, rows: Collection[tuple[int, ...]] = ()):
        self._plain: set[tuple[int, ...]] = set()
        self._by_mask: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
        for row in rows:
            mask = tuple(j for j, k in enumerate(row) if k == ANY)
            (self._by_mask.setdefault(mask, set()) if mask else self._plain).add(tuple(row))

    def __contains__(self, row: tuple[int, ...]) -> bool:
        if row in self._plain:
            return True
        for mask, rows in self._by_mask.items():
            key = list(row)
            for j in mask:
                key[j] = ANY
            if tuple(key) in rows:
                return True
        return False


def maximize(
    score: Score,
    encoding: Encoding,
    rng: np.random.Generator,
    exclude: Collection[tuple[int, ...]] | Excluded = (),
    seeds: np.ndarray | None = None,
    max_enumerate: int = 100_000,
    n_random: int = 500,
    n_starts: int = 5,
    max_steps: int = 20,
    fixed: Sequence[tuple[int, int]] = (),
) -> np.ndarray | None:
    """Index row (``p``) of the best-scoring configuration not in ``exclude``.

    fixed: ``(position, choice)`` pairs: only configurations whose parameter
    at each ``position`` takes its ``choice`` (a slice of the space) are
    considered.
    Returns ``None`` when every configuration is excluded (exhaustive case) or
    local search met no allowed configuration.
    """
    exclude = exclude if isinstance(exclude, Excluded) else Excluded(exclude)
    if encoding.size() <= max_enumerate:
        rows = encoding.enumerate()
        return _best_allowed(rows[in_slice(rows, fixed)], score, exclude)
    if fixed:  # local search may climb out of the slice: score what lies outside it -inf
        unsliced = score
        score = lambda rows: np.where(in_slice(rows, fixed), unsliced(rows), -np.inf)  # noqa: E731
    return _local_search(score, encoding, rng, exclude, seeds, n_random, n_starts, max_steps, fixed)


def in_slice(rows: np.ndarray, fixed: Sequence[tuple[int, int]]) -> np.ndarray:
    """Which ``rows`` (``n x p``) take every ``(position, choice)`` of ``fixed`` (``n``, bool)."""
    inside = np.ones(len(rows), dtype=bool)
    for position, choice in fixed:
        inside &= rows[:, position] == choice
    return inside


def _best_allowed(rows: np.ndarray, score: Score, exclude: Excluded) -> np.ndarray | None:
    allowed = np.array([tuple(r) not in exclude for r in rows.tolist()], dtype=bool)
    if not allowed.any():
        return None
    rows = rows[allowed]
    return rows[int(np.argmax(score(rows)))]


def _local_search(score, encoding, rng, exclude, seeds, n_random, n_starts, max_steps, fixed=()):
    sample = encoding.random(n_random, rng, fixed)
    sample_scores = score(sample)
    best_row, best_score = None, -np.inf

    def consider(rows: np.ndarray, values: np.ndarray) -> None:
        nonlocal best_row, best_score
        for i in np.argsort(-values):
            if values[i] <= best_score:
                return
            if tuple(rows[i].tolist()) not in exclude:
                best_row, best_score = rows[i].copy(), float(values[i])
                return

    consider(sample, sample_scores)
    top = np.argsort(-sample_scores)[:n_starts]
    starts = sample[top]
    start_scores = sample_scores[top]
    if seeds is not None and len(seeds):
        starts = np.concatenate([starts, seeds])
        start_scores = np.concatenate([start_scores, score(seeds)])
    # climb all starts together: one batched score call per step
    for _ in range(max_steps):
        if not len(starts):
            break
        near, origin = encoding.neighbours(starts)
        values = score(near)
        consider(near, values)
        best_of = np.full(len(starts), -np.inf)
        np.maximum.at(best_of, origin, values)
        winner = np.full(len(starts), -1)
        winner[origin[values == best_of[origin]]] = np.flatnonzero(values == best_of[origin])
        moved = best_of > start_scores
        starts, start_scores = near[winner[moved]], best_of[moved]
    return best_row

"""Encoding of a finite, conditional search space into the unit cube.

Every parameter is a finite tuple of choices.  A configuration is held as a
row of choice indices (``int64``, ``-1`` where a conditional parameter is
inactive); :meth:`Encoding.encode` turns ``n x p`` index rows into ``n x D``
points of the unit cube, the GP's inputs:

- *ordinal* parameters take one column.  Numbers from a range (a
  ``scale``: an Optuna int or float parameter's grid) sit at their place in
  the range, linear or logarithmic.  Other all-number choices (``None`` =
  "unset" allowed) take the choice's ``log2`` value (rank when a value is
  not positive) normalised to [0, 1]; ``None`` sits one median step below
  the smallest number.  Powers of two are thus evenly spaced.
- *nominal* parameters (strings, booleans, mixed) take one column per choice,
  one-hot scaled by ``1/sqrt(2)`` so two different choices are at distance 1.
- an *inactive* conditional parameter is encoded as 0.5 (ordinal) or all
  zeros (nominal): a constant, so configurations that differ only in unused
  parameters are the same point.

``groups`` maps every column to its parameter, so a kernel can give each
parameter (not each column) one lengthscale.

A row of a measured configuration may hold ``ANY`` (-2) for a parameter
the trial was not asked although no condition explains its absence
(define-by-run objectives whose ``if`` no single parent's values capture):
the GP sees it as inactive, and when configurations already measured are
excluded (:class:`iobo._gp.optim.Excluded`) it stands for every value, as
the objective would not ask it again.

*Ratios* are extra kernel inputs for pairs of size-like parameters that act
through their ratio (a collective buffer matching the stripe size, as many
aggregators as stripes): ``log2(a) - log2(b)``, normalised to [0, 1] over
the pair's choices.  A kernel with one lengthscale per input then sees "the
buffer matches the stripe" as one direction instead of a diagonal across
two axes.  They exist only in :meth:`Encoding.slots` and
:meth:`Encoding.distance_tables`, the GP's view; rows and configurations
stay one column per parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iobo.errors import SpaceError

INACTIVE = -1
ANY = -2  # a row entry for a parameter a trial was not asked though no condition explains it (see ``Encoding``)
LADDER_WIDTH = 16  # ordinal parameters with more choices are searched by index steps 1, 2, 4...
NOMINAL_CHOICES = 3  # numeric parameters with exactly this many choices are nominal (:func:`ordinal_positions`)


def same_choice(a: Any, b: Any) -> bool:
    """Equality that keeps ``True`` apart from ``1`` and ``None`` apart from ``0``."""
    return type(a) is type(b) and a == b


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def log2_values(choices: Sequence[Any]) -> tuple[float, ...] | None:
    """``log2`` of every choice, or ``None`` unless all are positive numbers but at most one ``None``.

    ``None`` ("unset") is placed one median step below the smallest number.
    """
    numbers = [v for v in choices if v is not None]
    if len(numbers) < 2 or len(numbers) < len(choices) - 1 or not all(_is_number(v) and v > 0 for v in numbers):
        return None
    return _with_unset(choices, {v: math.log2(v) for v in numbers})


def _with_unset(choices: Sequence[Any], scale: Mapping[Any, float]) -> tuple[float, ...]:
    ordered = sorted(scale.values())
    unset = ordered[0] - float(np.median(np.diff(ordered))) if None in choices else ordered[0]
    return tuple(unset if v is None else scale[v] for v in choices)


def ordinal_positions(choices: Sequence[Any]) -> tuple[float, ...] | None:
    """Positions in [0, 1] of ordinal choices, or ``None`` when the choices are nominal.

    Ordinal: two numbers, or more than ``NOMINAL_CHOICES``, every one a
    number except at most one ``None`` ("unset").  Exactly three are
    nominal: an order of three gives the GP little to learn smoothness from
    (two gaps) and can mislead it: placed by ``log2``, alignment 1 B,
    64 KiB, 4 MiB sit at 0, 0.73 and 1, so the middle value is taken for
    the last, and 1 ("no alignment") is not a size on the others' scale at
    all.  As nominal choices each value's effect is learned from its own
    runs (ratios to other sizes, :class:`Ratio`, are kept either way).  Two
    numbers are as far apart either way; ordinal, a conditional parameter's
    unused slot sits halfway between them (one-hot: 0.71 of their distance
    from each), which measured better on a table with inert parameters
    (``experiments/results/sampler-encoding-variants.txt``).
    """
    numbers = [v for v in choices if v is not None]
    if not numbers or not all(_is_number(v) for v in numbers) or len(numbers) < len(choices) - 1:
        return None
    if len(numbers) < 2 or len(choices) == NOMINAL_CHOICES:  # ``(None, x)``: two states, nothing to order on
        return None
    raw = log2_values(choices) or _with_unset(choices, {v: float(r) for r, v in enumerate(sorted(numbers))})
    lo, hi = min(raw), max(raw)
    return tuple((r - lo) / (hi - lo) for r in raw)


def scaled_positions(choices: Sequence[float], low: float, high: float, log: bool) -> tuple[float, ...]:
    """Positions in [0, 1] of numbers in ``[low, high]``: linear in the value, or in its logarithm."""
    if high == low:
        return tuple(0.0 for _ in choices)
    f = math.log if log else float
    return tuple((f(v) - f(low)) / (f(high) - f(low)) for v in choices)


@dataclass(frozen=True)
class Param:
    """One encoded parameter.

    choices: the allowed values; positions: their ordinal positions in [0, 1]
    (``None`` for a nominal parameter); parent: ``(parent position in the
    encoding, indices of the parent's choices that activate it)`` for a
    conditional parameter.
    """

    name: str
    choices: tuple[Any, ...]
    positions: tuple[float, ...] | None
    parent: tuple[int, frozenset[int]] | None = None
    keys: dict = field(init=False, repr=False, compare=False)  # (type, value) -> choice index

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", {(type(v), v): i for i, v in enumerate(self.choices)})

    @property
    def width(self) -> int:
        """Number of unit-cube columns."""
        return 1 if self.positions is not None else len(self.choices)

    @property
    def ladder(self) -> bool:
        """Whether local search moves this parameter by index steps 1, 2, 4... (a wide ordinal one)."""
        return self.positions is not None and len(self.choices) > LADDER_WIDTH

    def index(self, value: Any) -> int:
        """Index of ``value`` among the choices (equal and of the same type)."""
        try:
            return self.keys[(type(value), value)]
        except (KeyError, TypeError):
            raise KeyError(f"{value!r} is not a choice of {self.name!r}") from None


@dataclass(frozen=True)
class Ratio:
    """A kernel input ``log2(first) - log2(second)`` over two parameters' choices.

    first, second: positions of the parameters in the encoding; levels: the
    distinct differences, ascending, normalised to [0, 1]; level: the level
    index of each pair of choices (``len(first choices) x len(second
    choices)``).  Powers of two give few levels (``len(first) + len(second)
    - 1`` at most), which keeps the kernel's tables small.
    """

    first: int
    second: int
    levels: np.ndarray
    level: np.ndarray


class Encoding:
    """A search space of finite parameters, some conditional on another's value.

    choices: ``name -> tuple of choices`` (ordered as the encoding will be);
    conditions: ``name -> (parent name, activating value)`` or ``(parent
    name, tuple of activating values)``; a parent may itself be conditional
    (a child is active when its parent is active and takes an activating
    value); ratios: ``(first, second)`` name pairs whose ``log2`` ratio
    becomes a kernel input; pairs with a parameter not in ``choices`` or not
    positive-numeric are left out (see :attr:`ratio_names`); scales: ``name
    -> (low, high, log)`` for numbers drawn from a range: their choices sit
    at their place in ``[low, high]``, linear or logarithmic (other numeric
    parameters: see :func:`ordinal_positions`).
    """

    def __init__(
        self,
        choices: Mapping[str, Sequence[Any]],
        conditions: Mapping[str, tuple[str, Any]] | None = None,
        ratios: Sequence[tuple[str, str]] = (),
        scales: Mapping[str, tuple[float, float, bool]] | None = None,
    ):
        conditions = dict(conditions or {})
        scales = dict(scales or {})
        names = list(choices)
        params: list[Param] = []
        for name in names:
            values = tuple(choices[name])
            parent = None
            if name in conditions:
                parent_name, activating = conditions[name]
                if parent_name not in choices or parent_name == name:
                    raise SpaceError(f"the parent {parent_name!r} of {name!r} must be another parameter of the "
                                     f"space {names}; fix the conditions")
                lookup = Param(parent_name, tuple(choices[parent_name]), None)
                values_on = activating if isinstance(activating, (tuple, list)) else (activating,)
                parent = (names.index(parent_name), frozenset(lookup.index(v) for v in values_on))
            if name in scales:
                positions: tuple[float, ...] | None = scaled_positions(values, *scales[name])
            else:
                positions = ordinal_positions(values)
            params.append(Param(name, values, positions, parent))
        self.params: tuple[Param, ...] = tuple(params)
        self.names: tuple[str, ...] = tuple(names)
        self._conditional = self._parents_first()
        self.groups: np.ndarray = np.concatenate(
            [np.full(p.width, i, dtype=np.int64) for i, p in enumerate(self.params)]
        ) if params else np.zeros(0, dtype=np.int64)
        self.ratios: tuple[Ratio, ...] = tuple(self._ratio(a, b) for a, b in dict.fromkeys(ratios) if self._ratio(a, b))

    def _parents_first(self) -> tuple[int, ...]:
        """Positions of the conditional parameters, each after its parent (the conditions must form a forest)."""
        depth: dict[int, int] = {}
        for i in range(len(self.params)):
            seen, j = [], i
            while self.params[j].parent is not None:
                if j in seen:
                    raise SpaceError(f"the conditions of {self.names[i]!r} form a cycle "
                                     f"({' <- '.join(self.names[k] for k in seen)}); fix the conditions")
                seen.append(j)
                j = self.params[j].parent[0]
            depth[i] = len(seen)
        return tuple(sorted((i for i in depth if depth[i] > 0), key=lambda i: (depth[i], i)))

    def _ratio(self, first: str, second: str) -> Ratio | None:
        if first == second or first not in self.names or second not in self.names:
            return None
        i, j = self.names.index(first), self.names.index(second)
        a, b = log2_values(self.params[i].choices), log2_values(self.params[j].choices)
        if a is None or b is None:
            return None
        diff = np.subtract.outer(np.asarray(a), np.asarray(b))
        levels, level = np.unique(np.round((diff - diff.min()) / (np.ptp(diff) or 1.0), 9), return_inverse=True)
        return Ratio(i, j, levels, level.reshape(diff.shape))

    @property
    def ratio_names(self) -> tuple[str, ...]:
        """``"first/second"`` of each ratio input, in :meth:`slots` column order."""
        return tuple(f"{self.names[r.first]}/{self.names[r.second]}" for r in self.ratios)

    # -- sizes -------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """Number of unit-cube columns ``D``."""
        return int(self.groups.size)

    def size(self) -> int:
        """Number of distinct configurations (inactive parameters counted once)."""
        children: dict[int, list[int]] = {i: [] for i in range(len(self.params))}
        for i, p in enumerate(self.params):
            if p.parent is not None:
                children[p.parent[0]].append(i)

        def count(i: int) -> int:  # configurations of parameter i and the parameters below it
            return sum(
                math.prod(count(c) for c in children[i] if k in self.params[c].parent[1])
                for k in range(len(self.params[i].choices))
            )

        return math.prod(count(i) for i, p in enumerate(self.params) if p.parent is None)

    # -- configurations <-> index rows ---------------------------------------------
    def active(self, i: int, rows: np.ndarray) -> np.ndarray:
        """Whether conditional parameter ``i``'s parent takes an activating choice, per row (``n``)."""
        position, on = self.params[i].parent
        return np.isin(rows[:, position], list(on))

    def to_row(self, config: Mapping[str, Any]) -> np.ndarray:
        """Index row (``p``) of a configuration; missing or inactive parameters are ``-1``."""
        return self.to_rows([config])[0]

    def to_rows(self, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Index rows (``n x p``) of configurations; missing or inactive parameters are ``-1``."""
        rows = np.full((len(configs), len(self.params)), INACTIVE, dtype=np.int64)
        for r, config in enumerate(configs):
            for i, p in enumerate(self.params):
                if p.name in config:
                    rows[r, i] = p.index(config[p.name])
        return self.deactivate(rows)

    def to_config(self, row: Sequence[int]) -> dict[str, Any]:
        """The configuration of an index row, active parameters only."""
        return {p.name: p.choices[int(k)] for p, k in zip(self.params, row) if k >= 0}

    def encode(self, rows: np.ndarray) -> np.ndarray:
        """Unit-cube points (``n x D``) of index rows (``n x p``)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.params))
        out = np.zeros((rows.shape[0], self.dim))
        col = 0
        for i, p in enumerate(self.params):
            k = rows[:, i]
            active = k >= 0
            if p.positions is not None:
                out[:, col] = np.where(active, np.asarray(p.positions)[np.where(active, k, 0)], 0.5)
            else:
                out[np.flatnonzero(active), col + k[active]] = 1.0 / math.sqrt(2.0)
            col += p.width
        return out

    def slots(self, rows: np.ndarray) -> np.ndarray:
        """The GP's inputs (``n x (p + ratios)``) of index rows (``n x p``).

        Parameter columns: the choice index, inactive (-1) moved to the extra
        slot ``len(choices)``.  Ratio columns: the level of the pair's
        ``log2`` ratio, ``len(levels)`` when either side is inactive.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.params))
        inactive = np.array([len(p.choices) for p in self.params], dtype=np.int64)
        slots = np.where(rows < 0, inactive, rows)
        pairs = []
        for r in self.ratios:
            a, b = rows[:, r.first], rows[:, r.second]
            off = (a < 0) | (b < 0)
            pairs.append(np.where(off, len(r.levels), r.level[np.where(off, 0, a), np.where(off, 0, b)]))
        return np.column_stack([slots, *pairs]) if pairs else slots

    def distance_tables(self) -> list[np.ndarray]:
        """Squared unit-cube distances between slots, one table per input (``p + ratios``).

        Entry ``[a, b]`` of parameter ``j``'s table (``len(choices) + 1``
        square, the last slot "inactive") is ``|encode(a) - encode(b)|^2``
        over its columns; a ratio's is the squared difference of two levels,
        1 between an active and an inactive pair.
        """
        tables = []
        for j, p in enumerate(self.params):
            rows = np.full((len(p.choices) + 1, len(self.params)), INACTIVE, dtype=np.int64)
            rows[: len(p.choices), j] = np.arange(len(p.choices))
            cols = self.encode(rows)[:, self.groups == j]
            tables.append(((cols[:, None, :] - cols[None, :, :]) ** 2).sum(-1))
        for r in self.ratios:
            value = np.append(r.levels, np.nan)  # the last slot: inactive
            table = np.subtract.outer(value, value) ** 2
            active = ~np.isnan(value)
            table[active[:, None] != active[None, :]] = 1.0
            table[~active[:, None] & ~active[None, :]] = 0.0
            tables.append(table)
        return tables

    # -- candidate sets --------------------------------------------------------------
    def enumerate(self) -> np.ndarray:
        """Every configuration as an index row (``size() x p``)."""
        rows = np.zeros((1, len(self.params)), dtype=np.int64)
        for i, p in enumerate(self.params):
            if p.parent is None:
                rows = np.repeat(rows, len(p.choices), axis=0)
                rows[:, i] = np.tile(np.arange(len(p.choices)), len(rows) // len(p.choices))
        for i in self._conditional:
            rows = self._expand(rows, i)
        return rows

    def _expand(self, rows: np.ndarray, i: int) -> np.ndarray:
        """Give conditional parameter ``i`` every choice in rows where it is active, -1 elsewhere."""
        n_choices = len(self.params[i].choices)
        active = self.active(i, rows)
        off = rows[~active].copy()
        off[:, i] = INACTIVE
        on = np.repeat(rows[active], n_choices, axis=0)
        on[:, i] = np.tile(np.arange(n_choices), int(active.sum()))
        return np.concatenate([off, on])

    def random(self, n: int, rng: np.random.Generator, fixed: Sequence[tuple[int, int]] = ()) -> np.ndarray:
        """``n`` configurations drawn uniformly per parameter (``n x p``); fixed: ``(position, choice)``
        pairs that every one takes instead (their children drawn as usual; their parents, if any, at a
        choice that activates them, drawn at random)."""
        rows = np.stack([rng.integers(len(p.choices), size=n) for p in self.params], axis=1).astype(np.int64)
        rows = rows.reshape(n, len(self.params))
        for i, _ in fixed:
            while self.params[i].parent is not None:
                i, on = self.params[i].parent
                rows[:, i] = rng.choice(sorted(on), size=n)
        for i, choice in fixed:  # after the parents: a fixed parent keeps its own choice
            rows[:, i] = choice
        return self.deactivate(rows)

    def deactivate(self, rows: np.ndarray) -> np.ndarray:
        """Set inactive conditional parameters to -1 (in place) and return ``rows``."""
        for i in self._conditional:
            rows[~self.active(i, rows), i] = INACTIVE
        return rows

    def neighbours(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Configurations one parameter change away from each of ``rows`` (``n x p``).

        Returns the neighbours (``m x p``) and, for each, the index of the row
        it came from (``m``).  A parameter moves to each of its other choices,
        a wide ordinal one (:attr:`Param.ladder`) by 1, 2, 4... choices either
        way.  Changing a parent to an activating choice yields one neighbour
        per choice of the child it activates.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.params))
        n = len(rows)
        # every other choice of each parameter but the wide ordinal ones, for every row at once
        listed = [i for i, p in enumerate(self.params) if not p.ladder]
        column = np.concatenate([np.full(len(self.params[i].choices), i) for i in listed] or [np.zeros(0, np.int64)])
        value = np.concatenate([np.arange(len(self.params[i].choices)) for i in listed] or [np.zeros(0, np.int64)])
        origin = np.repeat(np.arange(n), column.size)
        column, value = np.tile(column, n), np.tile(value, n)
        now = rows[origin, column]
        keep = (now != value) & (now >= 0)
        origins, columns, values = [origin[keep]], [column[keep]], [value[keep]]
        for i, p in enumerate(self.params):  # the wide ordinal ones: 1, 2, 4... choices either way
            if p.ladder:
                steps = 2 ** np.arange(int(math.log2(len(p.choices))) + 1)
                now = rows[:, i : i + 1]
                to = now + np.concatenate([steps, -steps])[None, :]
                at, k = np.nonzero((to >= 0) & (to < len(p.choices)) & (now >= 0))
                origins.append(at)
                columns.append(np.full(at.size, i))
                values.append(to[at, k])
        origin, column, value = np.concatenate(origins), np.concatenate(columns), np.concatenate(values)
        out = rows[origin]
        out[np.arange(out.shape[0]), column] = value
        for i in self._conditional:
            needs = self.active(i, out) & (out[:, i] == INACTIVE)
            if needs.any():
                n_choices = len(self.params[i].choices)
                grown = np.repeat(out[needs], n_choices, axis=0)
                grown[:, i] = np.tile(np.arange(n_choices), int(needs.sum()))
                out = np.concatenate([out[~needs], grown])
                origin = np.concatenate([origin[~needs], np.repeat(origin[needs], n_choices)])
        return self.deactivate(out), origin


def infer_conditions(names: Sequence[str], configs: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, tuple]]:
    """Guess ``name -> (parent, activating values)`` from which parameters each configuration has.

    A parameter missing from some configurations is conditional on a parent
    when it is present exactly where the parent takes one of a set of values
    (``chunk_size`` exactly where ``layout == "chunked"``; ``y`` where
    ``x in (6, 7, 9)``, the values of ``x`` seen with ``y``).  Candidate
    parents are present wherever the parameter is and somewhere it is not
    (so conditions nest and never form a cycle); of several, the one with
    the fewest activating values wins, then the first in ``names`` order.
    A parameter whose presence no parent explains stays unconditional (its
    absence encodes as inactive all the same).
    """
    present = {n: np.array([n in c for c in configs], dtype=bool) for n in names}
    as_array = np.empty(len(configs), dtype=object)
    as_array[:] = list(configs)
    conditions: dict[str, tuple[str, tuple]] = {}
    for name in names:
        here = present[name]
        if here.all() or not here.any():
            continue
        found: list[tuple[int, int, str, tuple]] = []
        for order, parent in enumerate(names):
            there = present[parent]
            if parent == name or (here & ~there).any() or there.sum() <= here.sum():
                continue
            values: dict[tuple, Any] = {}  # (type, value) -> value, in order of appearance
            for c in as_array[here]:
                values.setdefault((type(c[parent]), c[parent]), c[parent])
            elsewhere = as_array[there & ~here]
            if not any((type(c[parent]), c[parent]) in values for c in elsewhere):
                found.append((len(values), order, parent, tuple(values.values())))
        if found:
            _, _, parent, values = min(found, key=lambda f: f[:2])
            conditions[name] = (parent, values)
    return conditions

"""Encoding of a finite, conditional search space into the unit cube.

Every parameter is a finite tuple of choices.  A configuration is held as a
row of choice indices (``int64``, ``-1`` where a conditional parameter is
inactive); :meth:`Encoding.encode` turns ``n x p`` index rows into ``n x D``
points of the unit cube, the GP's inputs:

- *ordinal* parameters (all choices numbers, ``None`` = "unset" allowed) take
  one column: the choice's ``log2`` value (rank when a value is not positive)
  normalised to [0, 1]; ``None`` sits one median step below the smallest
  number.  Powers of two are thus evenly spaced.
- *nominal* parameters (strings, booleans, mixed) take one column per choice,
  one-hot scaled by ``1/sqrt(2)`` so two different choices are at distance 1.
- an *inactive* conditional parameter is encoded as 0.5 (ordinal) or all
  zeros (nominal): a constant, so configurations that differ only in unused
  parameters are the same point.

``groups`` maps every column to its parameter, so a kernel can give each
parameter (not each column) one lengthscale.

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
from dataclasses import dataclass
from typing import Any

import numpy as np

INACTIVE = -1


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

    Ordinal: every choice is a number, except at most one ``None`` ("unset").
    """
    numbers = [v for v in choices if v is not None]
    if not numbers or not all(_is_number(v) for v in numbers) or len(numbers) < len(choices) - 1:
        return None
    if len(numbers) < 2:  # ``(None, x)``: two states, nothing to order on
        return None
    raw = log2_values(choices) or _with_unset(choices, {v: float(r) for r, v in enumerate(sorted(numbers))})
    lo, hi = min(raw), max(raw)
    return tuple((r - lo) / (hi - lo) for r in raw)


@dataclass(frozen=True)
class Param:
    """One encoded parameter.

    choices: the allowed values; positions: their ordinal positions in [0, 1]
    (``None`` for a nominal parameter); parent: ``(parent position in the
    encoding, index of the activating choice)`` for a conditional parameter.
    """

    name: str
    choices: tuple[Any, ...]
    positions: tuple[float, ...] | None
    parent: tuple[int, int] | None = None

    @property
    def width(self) -> int:
        """Number of unit-cube columns."""
        return 1 if self.positions is not None else len(self.choices)

    def index(self, value: Any) -> int:
        for i, choice in enumerate(self.choices):
            if same_choice(value, choice):
                return i
        raise KeyError(f"{value!r} is not a choice of {self.name!r}")


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
    conditions: ``name -> (parent name, activating value)``; a parent must be
    unconditional; ratios: ``(first, second)`` name pairs whose ``log2``
    ratio becomes a kernel input; pairs with a parameter not in ``choices``
    or not positive-numeric are left out (see :attr:`ratio_names`).
    """

    def __init__(
        self,
        choices: Mapping[str, Sequence[Any]],
        conditions: Mapping[str, tuple[str, Any]] | None = None,
        ratios: Sequence[tuple[str, str]] = (),
    ):
        conditions = dict(conditions or {})
        names = list(choices)
        params: list[Param] = []
        for name in names:
            values = tuple(choices[name])
            parent = None
            if name in conditions:
                parent_name, value = conditions[name]
                if parent_name in conditions:
                    raise ValueError(f"parent {parent_name!r} of {name!r} must itself be unconditional")
                pos = names.index(parent_name)
                parent = (pos, Param(parent_name, tuple(choices[parent_name]), None).index(value))
            params.append(Param(name, values, ordinal_positions(values), parent))
        self.params: tuple[Param, ...] = tuple(params)
        self.names: tuple[str, ...] = tuple(names)
        self.groups: np.ndarray = np.concatenate(
            [np.full(p.width, i, dtype=np.int64) for i, p in enumerate(self.params)]
        ) if params else np.zeros(0, dtype=np.int64)
        self.ratios: tuple[Ratio, ...] = tuple(self._ratio(a, b) for a, b in dict.fromkeys(ratios) if self._ratio(a, b))

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
        total = 1
        children: dict[int, list[Param]] = {}
        for p in self.params:
            if p.parent is not None:
                children.setdefault(p.parent[0], []).append(p)
        for i, p in enumerate(self.params):
            if p.parent is not None:
                continue
            per_value = [
                math.prod(len(c.choices) for c in children.get(i, []) if c.parent[1] == k) for k in range(len(p.choices))
            ]
            total *= sum(per_value)
        return total

    # -- configurations <-> index rows ---------------------------------------------
    def is_active(self, p: Param, row: Sequence[int]) -> bool:
        return p.parent is None or row[p.parent[0]] == p.parent[1]

    def to_row(self, config: Mapping[str, Any]) -> np.ndarray:
        """Index row (``p``) of a configuration; missing or inactive parameters are ``-1``."""
        row = np.full(len(self.params), INACTIVE, dtype=np.int64)
        for i, p in enumerate(self.params):
            if p.name in config:
                row[i] = p.index(config[p.name])
        for i, p in enumerate(self.params):
            if not self.is_active(p, row):
                row[i] = INACTIVE
        return row

    def to_config(self, row: Sequence[int]) -> dict[str, Any]:
        """The configuration of an index row, active parameters only."""
        return {p.name: p.choices[int(k)] for p, k in zip(self.params, row) if k != INACTIVE}

    def encode(self, rows: np.ndarray) -> np.ndarray:
        """Unit-cube points (``n x D``) of index rows (``n x p``)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.params))
        out = np.zeros((rows.shape[0], self.dim))
        col = 0
        for i, p in enumerate(self.params):
            k = rows[:, i]
            active = k != INACTIVE
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
        slots = np.where(rows == INACTIVE, inactive, rows)
        pairs = []
        for r in self.ratios:
            a, b = rows[:, r.first], rows[:, r.second]
            off = (a == INACTIVE) | (b == INACTIVE)
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
        for i, p in enumerate(self.params):
            if p.parent is not None:
                rows = self._expand(rows, i)
        return rows

    def _expand(self, rows: np.ndarray, i: int) -> np.ndarray:
        """Give conditional parameter ``i`` every choice in rows where it is active, -1 elsewhere."""
        p = self.params[i]
        active = rows[:, p.parent[0]] == p.parent[1]
        off = rows[~active].copy()
        off[:, i] = INACTIVE
        on = np.repeat(rows[active], len(p.choices), axis=0)
        on[:, i] = np.tile(np.arange(len(p.choices)), int(active.sum()))
        return np.concatenate([off, on])

    def random(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` configurations drawn uniformly per parameter (``n x p``)."""
        rows = np.stack([rng.integers(len(p.choices), size=n) for p in self.params], axis=1).astype(np.int64)
        return self.deactivate(rows.reshape(n, len(self.params)))

    def deactivate(self, rows: np.ndarray) -> np.ndarray:
        """Set inactive conditional parameters to -1 (in place) and return ``rows``."""
        for i, p in enumerate(self.params):
            if p.parent is not None:
                rows[rows[:, p.parent[0]] != p.parent[1], i] = INACTIVE
        return rows

    def neighbours(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Configurations one parameter change away from each of ``rows`` (``n x p``).

        Returns the neighbours (``m x p``) and, for each, the index of the row
        it came from (``m``).  Changing a parent to its activating choice
        yields one neighbour per choice of the child it activates.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(self.params))
        column = np.concatenate([np.full(len(p.choices), i) for i, p in enumerate(self.params)])
        value = np.concatenate([np.arange(len(p.choices)) for p in self.params])
        origin = np.repeat(np.arange(len(rows)), column.size)
        out = rows[origin]
        column, value = np.tile(column, len(rows)), np.tile(value, len(rows))
        keep = (out[np.arange(out.shape[0]), column] != value) & (out[np.arange(out.shape[0]), column] != INACTIVE)
        out, origin, column, value = out[keep], origin[keep], column[keep], value[keep]
        out[np.arange(out.shape[0]), column] = value
        for i, p in enumerate(self.params):
            if p.parent is None:
                continue
            needs = (out[:, p.parent[0]] == p.parent[1]) & (out[:, i] == INACTIVE)
            if needs.any():
                grown = np.repeat(out[needs], len(p.choices), axis=0)
                grown[:, i] = np.tile(np.arange(len(p.choices)), int(needs.sum()))
                out = np.concatenate([out[~needs], grown])
                origin = np.concatenate([origin[~needs], np.repeat(origin[needs], len(p.choices))])
        return self.deactivate(out), origin


def infer_conditions(names: Sequence[str], configs: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, Any]]:
    """Guess ``name -> (parent, value)`` from which parameters each configuration has.

    A parameter missing from some configurations is conditional on an
    always-present parent when it is present exactly where the parent takes
    one value (``chunk_size`` exactly where ``layout == "chunked"``).  The
    first such parent in ``names`` order wins; a parameter whose presence no
    single value explains stays unconditional (its absence encodes as
    inactive all the same).
    """
    always = [n for n in names if all(n in c for c in configs)]
    conditions: dict[str, tuple[str, Any]] = {}
    for name in names:
        present = [name in c for c in configs]
        if all(present) or not any(present):
            continue
        for parent in always:
            if parent == name:
                continue
            value = next(c[parent] for c, here in zip(configs, present) if here)
            if all(same_choice(c[parent], value) == here for c, here in zip(configs, present)):
                conditions[name] = (parent, value)
                break
    return conditions

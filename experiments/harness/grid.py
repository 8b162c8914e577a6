"""A benchmark problem's finite space: every parameter a tuple of choices, some active only under a parent's value.

What the benchmarks need of a space and nothing more: how many
configurations it has, all of them in a fixed order (the pruning benchmark
draws them by index), a configuration with the parameters its parents switch
off dropped, and choice indices for the GA's genes.  Values are matched by
type as well as by value (``True`` is not the choice ``1``, ``None`` not
``0``), as Optuna's categorical distributions keep them apart.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from iobo.errors import SpaceError

INACTIVE = -1  # the choice index of a parameter its parent switches off


def same_choice(a: Any, b: Any) -> bool:
    """Equal in type and value."""
    return type(a) is type(b) and a == b


class Grid:
    """choices: parameter -> ordered values; conditions: parameter -> (parent, value that activates it).

    A parent must itself be unconditional.
    """

    def __init__(self, choices: Mapping[str, Sequence[Any]], conditions: Mapping[str, tuple[str, Any]] | None = None):
        self.choices = {name: tuple(values) for name, values in choices.items()}
        self.conditions = dict(conditions or {})
        self.names = tuple(self.choices)
        for name, (parent, value) in self.conditions.items():
            if parent not in self.choices or parent in self.conditions:
                raise SpaceError(f"the parent of a conditional parameter must be an unconditional parameter of the "
                                 f"grid; {name!r} depends on {parent!r}; make {parent!r} an unconditional choice")
            self.index(parent, value)

    def index(self, name: str, value: Any) -> int:
        """Position of ``value`` among ``name``'s choices."""
        for i, choice in enumerate(self.choices[name]):
            if same_choice(choice, value):
                return i
        raise SpaceError(f"a value must be one of the parameter's choices; {name}={value!r} is not one of "
                         f"{self.choices[name]}; use one of them")

    def is_active(self, name: str, config: Mapping[str, Any]) -> bool:
        """Whether ``name`` is switched on in ``config`` (unconditional, or its parent at the activating value)."""
        if name not in self.conditions:
            return True
        parent, value = self.conditions[name]
        return parent in config and same_choice(config[parent], value)

    def size(self) -> int:
        """Number of distinct configurations (a parameter switched off counts once)."""
        total = 1
        for name in self.names:
            if name in self.conditions:
                continue
            total *= sum(
                math.prod(len(self.choices[child]) for child, (parent, on) in self.conditions.items()
                          if parent == name and same_choice(on, value))
                for value in self.choices[name]
            )
        return total

    def configurations(self) -> list[dict[str, Any]]:
        """Every configuration, active parameters only, in a fixed order: the unconditional parameters
        as ``itertools.product`` of their choices; then, per conditional parameter, the configurations
        that switch it off, followed by each that switches it on, once per choice."""
        free = [n for n in self.names if n not in self.conditions]
        configs = [dict(zip(free, combo)) for combo in itertools.product(*(self.choices[n] for n in free))]
        for name in self.conditions:
            off = [c for c in configs if not self.is_active(name, c)]
            on = [{**c, name: value} for c in configs if self.is_active(name, c) for value in self.choices[name]]
            configs = off + on
        return [{n: c[n] for n in self.names if n in c} for c in configs]

    def active(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config``'s parameters of this grid that are active, as the grid's own choice objects;
        parameters missing from ``config`` stay missing."""
        return {n: self.choices[n][self.index(n, config[n])] for n in self.names
                if n in config and self.is_active(n, config)}

    def indices(self, config: Mapping[str, Any]) -> list[int]:
        """Choice index of each parameter in grid order; :data:`INACTIVE` where missing or switched off."""
        active = self.active(config)
        return [self.index(n, active[n]) if n in active else INACTIVE for n in self.names]

    def from_indices(self, indices: Sequence[int]) -> dict[str, Any]:
        """The configuration of choice indices (grid order), parameters switched off dropped."""
        config = {n: self.choices[n][int(k)] for n, k in zip(self.names, indices) if k != INACTIVE}
        return {n: v for n, v in config.items() if self.is_active(n, config)}


def infer_conditions(names: Sequence[str], configs: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, Any]]:
    """``name -> (parent, value)`` read off which parameters each configuration has.

    A parameter missing from some configurations depends on a parameter that
    every configuration has when it is present exactly where that parent
    takes one value (``chunk_size`` exactly where ``layout == "chunked"``);
    the first such parent in ``names`` order.  A parameter no single value
    explains gets no condition.
    """
    always = [n for n in names if all(n in c for c in configs)]
    conditions: dict[str, tuple[str, Any]] = {}
    for name in names:
        present = [name in c for c in configs]
        if all(present) or not any(present):
            continue
        for parent in always:
            value = configs[present.index(True)][parent]
            if all(same_choice(c[parent], value) == here for c, here in zip(configs, present)):
                conditions[name] = (parent, value)
                break
    return conditions

"""Folding a rank's event list: a block of events repeated N times with what changes in arithmetic progression.

An *item* is an event (a dict: ``op``, its arguments, ``ok``, ``gap_s``) or a
repeat, ``{"repeat": N, "body": [items], "step": [[slot, delta], ...]}``.
The *slots* of an item are its numbers, in a fixed walk order: every integer
of its arguments (bools are not numbers) and every run of digits in its
strings (``ck.12.h5`` has the slot 12; a zero-padded run ``007`` keeps its
width); a repeat's slots are its body's, then its step (one delta per body
slot). The *skeleton* is the item with its slots blanked (and, for a repeat,
its count). Repetition ``j`` of a repeat is its body with ``slots + j *
step``; so a fold is exact by construction: consecutive blocks fold only when
their skeletons are equal and every slot advances by the same delta in every
block.

``gap_s`` (seconds of computation before the event) is not a slot: a fold
keeps, per position in its body, the mean gap over the repetitions, so the
total computation time is kept, not each repetition's.

Folding is bottom-up: periods are tried shortest first (only those at which
some skeleton recurs), and after any fold from period 1 again, so the writes
of one step fold before the steps do (``R1000[create, R8[write], close]``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

GAP = "gap_s"
_DIGITS = re.compile(r"\d+")


def _walk_slots(value: Any, out: list[int], shape: list) -> None:
    """Append ``value``'s slots to ``out`` and its skeleton tokens to ``shape`` (same walk as :func:`_fill`)."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        shape.append(value)
    elif isinstance(value, int):
        out.append(value)
        shape.append("#")
    elif isinstance(value, str):
        pieces = []
        last = 0
        for match in _DIGITS.finditer(value):
            text = match.group()
            pieces.append(value[last:match.start()])
            pieces.append(f"#{len(text)}" if len(text) > 1 and text[0] == "0" else "#")
            out.append(int(text))
            last = match.end()
        pieces.append(value[last:])
        shape.append(("s", tuple(pieces)))
    elif isinstance(value, list):
        shape.append("[")
        for element in value:
            _walk_slots(element, out, shape)
        shape.append("]")
    elif isinstance(value, dict):
        shape.append("{")
        for key in sorted(value):
            if key != GAP:
                shape.append(key)
                _walk_slots(value[key], out, shape)
        shape.append("}")
    else:
        raise TypeError(f"an event holds JSON values only, not {type(value).__name__}")


def _fill(value: Any, slots: Iterator[int]) -> Any:
    """``value`` with its slots replaced, in walk order, by the next values of ``slots``."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return next(slots)
    if isinstance(value, str):
        def replace(match: re.Match) -> str:
            text, new = match.group(), next(slots)
            return str(new).zfill(len(text)) if len(text) > 1 and text[0] == "0" else str(new)
        return _DIGITS.sub(replace, value)
    if isinstance(value, list):
        return [_fill(element, slots) for element in value]
    return {key: (item if key == GAP else _fill(item, slots)) for key, item in
            ((k, value[k]) for k in sorted(value))}


class Event:
    """One event: its dict (``gap_s`` included), skeleton and slots."""

    __slots__ = ("data", "skeleton", "slots")

    def __init__(self, data: dict[str, Any]) -> None:
        slots: list[int] = []
        shape: list = []
        _walk_slots(data, slots, shape)
        self.data, self.skeleton, self.slots = data, repr(shape), tuple(slots)

    def gaps(self) -> list[float]:
        return [self.data.get(GAP, 0.0)]

    def rebuilt(self, slots: Sequence[int], gaps: Sequence[float]) -> "Event":
        data = _fill(self.data, iter(slots))
        data[GAP] = gaps[0]
        return Event(data)

    def expand(self, steps: int | None = None) -> Iterator[dict[str, Any]]:
        yield dict(self.data)

    def to_json(self) -> dict[str, Any]:
        return self.data


class Repeat:
    """``count`` repetitions of ``body``; repetition j has the body's slots plus j x ``step``."""

    __slots__ = ("count", "body", "step", "skeleton", "slots")

    def __init__(self, count: int, body: list, step: Sequence[int]) -> None:
        self.count, self.body, self.step = count, body, tuple(step)
        self.skeleton = repr(("R", count, [item.skeleton for item in body]))
        self.slots = tuple(s for item in body for s in item.slots) + self.step

    def gaps(self) -> list[float]:
        return [g for item in self.body for g in item.gaps()]

    def rebuilt(self, slots: Sequence[int], gaps: Sequence[float]) -> "Repeat":
        body_slots = len(self.slots) - len(self.step)
        return Repeat(self.count, _rebuild(self.body, slots[:body_slots], gaps), slots[body_slots:])

    def repetition(self, j: int) -> list:
        """The body of repetition ``j`` (0-based)."""
        base = self.slots[:len(self.slots) - len(self.step)]
        return _rebuild(self.body, [b + j * d for b, d in zip(base, self.step)], self.gaps())

    def expand(self, steps: int | None = None) -> Iterator[dict[str, Any]]:
        """The events of the first ``steps`` repetitions (all with None); nested repeats in full."""
        for j in range(self.count if steps is None else min(steps, self.count)):
            for item in self.repetition(j):
                yield from item.expand()

    def to_json(self) -> dict[str, Any]:
        return {"repeat": self.count, "body": [item.to_json() for item in self.body],
                "step": [[index, delta] for index, delta in enumerate(self.step) if delta]}


def _rebuild(items: Sequence, slots: Sequence[int], gaps: Sequence[float]) -> list:
    """``items`` with their slots and gaps replaced, in order."""
    out, s, g = [], 0, 0
    for item in items:
        ns, ng = len(item.slots), len(item.gaps())
        out.append(item.rebuilt(slots[s:s + ns], gaps[g:g + ng]))
        s, g = s + ns, g + ng
    return out


def item_from_json(data: dict[str, Any]):
    """An :class:`Event` or :class:`Repeat` from its JSON form (:meth:`to_json`)."""
    if "repeat" in data:
        body = [item_from_json(item) for item in data["body"]]
        step = [0] * sum(len(item.slots) for item in body)
        for index, delta in data["step"]:
            step[index] = delta
        return Repeat(int(data["repeat"]), body, step)
    return Event(dict(data))


def _block_slots(items: Sequence, start: int, period: int) -> tuple[int, ...]:
    return tuple(s for item in items[start:start + period] for s in item.slots)


def _fold_period(items: list, period: int) -> tuple[list, bool]:
    """One left-to-right pass folding tandem repeats of ``period`` items; (new items, whether any fold)."""
    skeletons = [item.skeleton for item in items]
    out, i, folded = [], 0, False
    while i < len(items):
        if i + 2 * period <= len(items) and skeletons[i:i + period] == skeletons[i + period:i + 2 * period]:
            first = _block_slots(items, i, period)
            step = tuple(b - a for a, b in zip(first, _block_slots(items, i + period, period)))
            count = 2
            while (i + (count + 1) * period <= len(items)
                   and skeletons[i + count * period:i + (count + 1) * period] == skeletons[i:i + period]
                   and _block_slots(items, i + count * period, period)
                   == tuple(a + count * d for a, d in zip(first, step))):
                count += 1
            gaps = [0.0] * len(sum((item.gaps() for item in items[i:i + period]), []))
            for j in range(count):
                block_gaps = [g for item in items[i + j * period:i + (j + 1) * period] for g in item.gaps()]
                gaps = [a + b for a, b in zip(gaps, block_gaps)]
            body = _rebuild(items[i:i + period], first, [g / count for g in gaps])
            out.append(Repeat(count, body, step))
            i += count * period
            folded = True
        else:
            out.append(items[i])
            i += 1
    return out, folded


def _periods(items: Sequence) -> list[int]:
    """The distances at which some skeleton recurs (the only periods a fold can have), shortest first."""
    last: dict[str, int] = {}
    found: set[int] = set()
    for index, item in enumerate(items):
        if item.skeleton in last:
            found.add(index - last[item.skeleton])
        last[item.skeleton] = index
    return sorted(p for p in found if 2 * p <= len(items))


def compress(events: Sequence[dict[str, Any]]) -> list:
    """The events folded into items (:class:`Event` and :class:`Repeat`), bottom-up; expands back exactly."""
    items: list = [Event(dict(event)) for event in events]
    changed = True
    while changed:
        changed = False
        for period in _periods(items):
            items, changed = _fold_period(items, period)
            if changed:
                break
    return items


def expand(items: Sequence, steps: int | None = None) -> list[dict[str, Any]]:
    """The events of ``items``; with ``steps``, only the first ``steps`` repetitions of each top-level repeat."""
    return [event for item in items for event in item.expand(steps if isinstance(item, Repeat) else None)]


def canonical(event: dict[str, Any]) -> str:
    """An event's arguments as text, gap left out (for comparing event lists)."""
    return json.dumps({k: v for k, v in event.items() if k != GAP}, sort_keys=True)

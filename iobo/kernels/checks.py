"""Values a kernel can check: exact float32 data made from each item's place, and the count of wrong values.

A kernel writes values that are functions of (global index, salt), so that
reading any of them back tells whether it landed where it should.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

VALUE_MODULUS = 2**24
"""float32 holds every integer below 2**24 exactly."""
SALT_STRIDE = 1_000_003
"""How far the values of one salt (step, variable...) are shifted from the previous salt's."""


def global_index(shape: Sequence[int], start: Sequence[int], count: Sequence[int]):
    """Row-major index in a dataset of ``shape`` of every item of the block at ``start`` of ``count`` (int64 array)."""
    import numpy as np

    axes = [np.arange(first, first + n, dtype=np.int64) for first, n in zip(start, count)]
    index = np.zeros(tuple(count), dtype=np.int64)
    for axis, coordinates in enumerate(axes):
        stride = math.prod(shape[axis + 1:])
        index += coordinates.reshape([-1 if a == axis else 1 for a in range(len(count))]) * stride
    return index


def exact_float32(index, salt: int):
    """float32 integers ``(index + salt * 1000003) mod 2**24``: exact, and different for neighbours and salts."""
    import numpy as np

    return ((index + salt * SALT_STRIDE) % VALUE_MODULUS).astype(np.float32)


@dataclass
class Mismatches:
    """Values that differ from what was expected on this rank: how many, and the first described."""

    count: int = 0
    first: str = ""

    def compare(self, where: str, expected, actual) -> None:
        """Count the items of ``actual`` that differ from ``expected``; ``where`` names the data (file:dataset)."""
        import numpy as np

        if expected.shape != actual.shape:
            self.count += expected.size
            self.first = self.first or f"{where}: shape {actual.shape}, expected {expected.shape}"
            return
        bad = np.argwhere(expected != actual)
        if bad.size and not self.first:
            position = tuple(int(i) for i in bad[0])
            self.first = f"{where}{list(position)}: expected {expected[position]}, read {actual[position]}"
        self.count += len(bad)

    def merge(self, other: "Mismatches") -> None:
        """Add the mismatches found by another comparison."""
        self.count += other.count
        self.first = self.first or other.first


def verdict(comm, kernel: str, mismatches: Mismatches, checked: int, what: str) -> tuple[bool, str]:
    """(every rank's values all correct, failure message for rank 0); ``checked``: values compared over all ranks."""
    wrong = comm.allreduce(mismatches.count)
    described = [text for text in comm.allgather(mismatches.first) if text]
    message = (f"{kernel}: verify failed: {wrong} of {checked} values {what} differ from what was written; "
               f"first: {described[0] if described else '?'}")
    return wrong == 0, message

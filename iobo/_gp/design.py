"""Space-filling start: a Latin hypercube over choice indices, one parameter at a time.

Optuna defines parameters by running the objective, so the start-up design
cannot be drawn for the whole space at once.  Instead every parameter gets
its own random permutation of ``n`` strata (seeded by the sampler seed and
the parameter's name): the ``j``-th start-up configuration takes stratum
``perm[j mod n]`` of each parameter, which is a Latin hypercube of ``n``
points whatever set of parameters the objective ends up asking for.  Points
``n..2n-1`` form a second, independent hypercube, and so on.
"""

from __future__ import annotations

import zlib

import numpy as np


def latin_index(seed: int, name: str, n_choices: int, j: int, n: int) -> int:
    """Choice index (``0..n_choices-1``) of parameter ``name`` in start-up point ``j``.

    seed: the sampler seed; n: points per hypercube (``>= 1``).
    """
    block, position = divmod(j, n)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), block])
    stratum = rng.permutation(n)[position]
    offset = rng.random(n)[position]
    return min(int((stratum + offset) * n_choices / n), n_choices - 1)

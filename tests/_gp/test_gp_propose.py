"""The slice a run is proposed in: which value is held, and which sizes are held with it."""

import numpy as np

from iobo._gp.encoding import Encoding
from iobo._gp.propose import least_measured_slice, matching_sizes

MiB = 2**20


def _io_encoding() -> Encoding:
    return Encoding(
        {"striping_unit": (None, MiB, 4 * MiB, 16 * MiB), "cb_buffer_size": (MiB, 2 * MiB, 4 * MiB, 8 * MiB),
         "layout": ("contiguous", "chunked"), "chunk_size": (64 * 1024, MiB, 4 * MiB, 64 * MiB),
         "romio_cb_write": ("enable", "disable")},
        {"chunk_size": ("layout", "chunked")},
        ratios=[("cb_buffer_size", "striping_unit"), ("chunk_size", "striping_unit")],
    )


def test_a_held_chunk_size_brings_the_stripe_size_that_matches_it():
    enc = _io_encoding()
    assert matching_sizes((3, 2), enc) == [(0, 2)]  # 4 MiB chunks: 4 MiB stripes
    assert matching_sizes((3, 0), enc) == [(0, 1)]  # 64 KiB chunks: the nearest set stripe size, 1 MiB


def test_a_held_stripe_size_brings_its_buffer_but_never_forces_a_chunked_layout():
    enc = _io_encoding()
    assert matching_sizes((0, 3), enc) == [(1, 3)]  # 16 MiB stripes: the largest buffer, 8 MiB; no chunk_size
    assert matching_sizes((0, 0), enc) == []  # unset stripe size: nothing to match
    assert matching_sizes((4, 1), enc) == []  # not a size


def test_the_least_measured_value_other_than_the_incumbents_is_held():
    enc = _io_encoding()
    rows = enc.to_rows([{"striping_unit": s, "cb_buffer_size": MiB, "layout": "contiguous", "romio_cb_write": w}
                     for s in (None, MiB, 4 * MiB, 16 * MiB) for w in ("enable", "disable")])
    rows = np.concatenate([rows, enc.to_rows([{"striping_unit": MiB, "cb_buffer_size": b, "layout": "contiguous",
                                            "romio_cb_write": "enable"} for b in (2 * MiB, 4 * MiB, 8 * MiB)])])
    rows = np.concatenate([rows, enc.to_rows([{"striping_unit": MiB, "cb_buffer_size": MiB, "layout": "chunked",
                                            "chunk_size": c, "romio_cb_write": "enable"} for c in (MiB, 4 * MiB, 64 * MiB)])])
    # every value measured at least once but the 64 KiB chunk
    assert least_measured_slice(rows, rows[0], enc, np.random.default_rng(0)) == (3, 0)

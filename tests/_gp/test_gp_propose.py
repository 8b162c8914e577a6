"""The slice a run is proposed in: which value is held, and which sizes are held with it."""

import numpy as np

from iobo._gp.encoding import Encoding
from iobo._gp.propose import (
    IDENTIFY_CANDIDATES,
    fit,
    follow_up,
    least_measured_slice,
    matching_sizes,
    propose,
    surprising,
    top_two,
)

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


def _held(enc: Encoding, **values) -> tuple[tuple[int, int], ...]:
    return tuple((enc.names.index(n), enc.params[enc.names.index(n)].index(v)) for n, v in values.items())


def test_a_follow_up_takes_the_held_values_in_the_incumbents_context_with_one_more_change_at_most():
    enc = _io_encoding()
    incumbent = enc.to_row({"striping_unit": 16 * MiB, "cb_buffer_size": 8 * MiB, "layout": "contiguous",
                            "romio_cb_write": "enable"})
    held = _held(enc, chunk_size=4 * MiB, striping_unit=4 * MiB)
    rows = follow_up(lambda r: np.zeros(len(r)), enc, incumbent, held, np.random.default_rng(0))
    base = enc.to_row({"striping_unit": 4 * MiB, "cb_buffer_size": 8 * MiB, "layout": "chunked",
                       "chunk_size": 4 * MiB, "romio_cb_write": "enable"})  # the held child brings its parent
    assert base.tolist() in rows.tolist()
    assert all(enc.to_config(r)["chunk_size"] == 4 * MiB and enc.to_config(r)["striping_unit"] == 4 * MiB for r in rows)
    assert all(np.count_nonzero(r != base) <= 1 for r in rows)
    assert {tuple(r) for r in enc.neighbours(base[None])[0].tolist()} & {tuple(r) for r in rows.tolist()}


def test_a_follow_up_drops_what_the_held_value_deactivates():
    enc = _io_encoding()
    incumbent = enc.to_row({"striping_unit": 4 * MiB, "cb_buffer_size": 4 * MiB, "layout": "chunked",
                            "chunk_size": 4 * MiB, "romio_cb_write": "disable"})
    rows = follow_up(lambda r: np.zeros(len(r)), enc, incumbent, _held(enc, layout="contiguous"),
                     np.random.default_rng(0))
    assert enc.to_row({"striping_unit": 4 * MiB, "cb_buffer_size": 4 * MiB, "layout": "contiguous",
                       "romio_cb_write": "disable"}).tolist() in rows.tolist()


def test_only_a_run_well_above_its_prediction_is_surprising():
    assert surprising(1.0, 0.0, 0.5)  # 2 standard deviations above
    assert not surprising(0.7, 0.0, 0.5)  # 1.4
    assert not surprising(-1.0, 0.0, 0.5)


def _chunked_runs(enc: Encoding) -> tuple[np.ndarray, np.ndarray]:
    """Runs like a study's halfway through: the contiguous layout measured widely, chunks measured bad on
    mismatched stripes, and one slice run of 4 MiB chunks on 4 MiB stripes in a poor context (1 MiB buffer,
    collective buffering off), where it measured about half the incumbent's value.  The truth: chunks of
    the stripe size pay 1.3x, other chunks 0.3x."""
    def truth(c) -> float:
        unit = c["striping_unit"] or MiB
        value = 1000.0 * np.exp(-(np.log2(unit / (8 * MiB)) / 2.0) ** 2) * (1.0 if c["romio_cb_write"] == "enable" else 0.5)
        value *= np.exp(-(np.log2(c["cb_buffer_size"] / unit) / 2.5) ** 2) * 0.5 + 0.5
        if c["layout"] == "chunked":
            value *= 1.3 if c["chunk_size"] == unit == 4 * MiB else 0.3
        return value
    configs = [{"striping_unit": s, "cb_buffer_size": b, "layout": "contiguous", "romio_cb_write": w}
               for s in (None, MiB, 4 * MiB, 16 * MiB) for b in (MiB, 8 * MiB) for w in ("enable", "disable")]
    configs += [{"striping_unit": s, "cb_buffer_size": b, "layout": "chunked", "chunk_size": k, "romio_cb_write": "enable"}
                for s, b, k in ((MiB, 8 * MiB, 64 * MiB), (16 * MiB, 2 * MiB, 4 * MiB), (4 * MiB, 4 * MiB, MiB),
                                (16 * MiB, 8 * MiB, 64 * 1024), (MiB, MiB, 4 * MiB), (16 * MiB, 4 * MiB, MiB))]
    configs.append({"striping_unit": 4 * MiB, "cb_buffer_size": MiB, "layout": "chunked", "chunk_size": 4 * MiB,
                    "romio_cb_write": "disable"})
    return enc.to_rows(configs), np.log([truth(c) for c in configs])


def test_a_surprising_slice_is_followed_into_the_incumbents_context():
    """The fit rates 4 MiB chunks on 4 MiB stripes in the incumbent's context below the incumbent (the bad
    chunked runs around it); followed, the proposal takes them there, where they pay 1.3x."""
    enc = _io_encoding()
    rows, log_values = _chunked_runs(enc)
    fitted = fit(enc, rows, log_values)
    incumbent = enc.to_config(fitted.rows[fitted.best])
    assert incumbent["layout"] == "contiguous" and incumbent["romio_cb_write"] == "enable"
    held = _held(enc, chunk_size=4 * MiB, striping_unit=4 * MiB)
    target = enc.to_row({**incumbent, "layout": "chunked", "chunk_size": 4 * MiB, "striping_unit": 4 * MiB})
    none = np.zeros((0, len(enc.params)), dtype=np.int64)
    mean, _ = fitted.posterior.predict(enc.slots(target[None]))
    assert fitted.shift + fitted.scale * mean[0] < fitted.mean[fitted.best]  # the model alone does not go there:
    assert enc.to_config(propose(enc, fitted, np.random.default_rng(0), none, none).row)["layout"] == "contiguous"
    proposal = propose(enc, fitted, np.random.default_rng(0), none, none, follow=held)
    assert proposal.held == ()
    config = enc.to_config(proposal.row)
    assert config["chunk_size"] == 4 * MiB and config["striping_unit"] == 4 * MiB
    assert np.count_nonzero(proposal.row != target) <= 1


def test_a_slice_proposal_carries_what_it_held_and_its_prediction():
    """In a space sparse in runs (an inert 64-valued parameter: 10,240 configurations for 23 runs) every
    run is a slice turn with ``explore_every=1``; the proposal says what it held and what it predicted."""
    io = _io_encoding()
    enc = Encoding({**{p.name: p.choices for p in io.params}, "zinert": tuple(range(64))},
                   {"chunk_size": ("layout", "chunked")},
                   ratios=[("cb_buffer_size", "striping_unit"), ("chunk_size", "striping_unit")])
    io_rows, log_values = _chunked_runs(io)
    rows = np.concatenate([io_rows, np.zeros((len(io_rows), 1), dtype=np.int64)], axis=1)
    fitted = fit(enc, rows, log_values)
    none = np.zeros((0, len(enc.params)), dtype=np.int64)
    proposal = propose(enc, fitted, np.random.default_rng(0), none, none, explore_every=1)
    assert proposal.held and proposal.mean is not None and proposal.sd > 0
    assert all(proposal.row[i] == k for i, k in proposal.held)
    assert proposal.held[1:] == tuple(matching_sizes(proposal.held[0], enc))
    assert propose(enc, fitted, np.random.default_rng(0), none, none, explore_every=0).held == ()


def _measured(enc: Encoding, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` distinct random rows of ``enc`` and a smooth log objective with 10% noise."""
    rng = np.random.default_rng(seed)
    rows = np.unique(np.array([[rng.integers(len(p.choices)) for p in enc.params] for _ in range(2 * n)]), axis=0)[:n]
    return rows, -0.3 * rows.sum(axis=1) + rng.normal(0.0, 0.1, len(rows))


def test_identification_stays_off_while_the_space_is_sparse_in_runs_unless_the_search_ended():
    enc = Encoding({f"p{i}": tuple(range(5)) for i in range(8)}, {})  # 390,625 configurations
    rows, values = _measured(enc, 30, 0)
    proposal = propose(enc, fit(enc, rows, values), np.random.default_rng(0), np.zeros((0, 8)), np.zeros((0, 8)),
                       identify_from=10)
    assert proposal.row.tolist() not in rows.tolist()  # a new configuration: the search goes on
    finalists = propose(enc, fit(enc, rows, values), np.random.default_rng(0), np.zeros((0, 8)), np.zeros((0, 8)),
                        finalists=True)  # a stop rule ended the search: tell the best few apart however sparse
    assert finalists.row.tolist() in rows.tolist()


def test_identification_re_measures_the_leader_or_the_challenger_and_stops_once_one_is_sure():
    enc = Encoding({f"p{i}": tuple(range(3)) for i in range(3)}, {})  # 27 configurations, each measured once
    rows = np.array([[a, b, c] for a in range(3) for b in range(3) for c in range(3)])
    values = -0.3 * rows.sum(axis=1) + np.random.default_rng(1).normal(0.0, 0.1, len(rows))
    values[:2] = 1.0, 0.95  # a near tie at the top: (0, 0, 0) and (0, 0, 1)
    fitted = fit(enc, rows, values)
    picks = {tuple(top_two(enc, fitted, np.random.default_rng(s), np.zeros((0, 3))).tolist()) for s in range(20)}
    assert picks == {(0, 0, 0), (0, 0, 1)}  # the leader and the challenger, by a coin
    assert all(top_two(enc, fitted, np.random.default_rng(s), rows[:1]).tolist() == [0, 0, 1] for s in range(5))
    assert top_two(enc, fitted, np.random.default_rng(0), rows[:2]) is None  # both being measured
    sure = np.concatenate([rows, np.repeat(rows[:1], 10, axis=0)])
    values[0] = 3.0  # one configuration far ahead, measured 11 times
    assert top_two(enc, fit(enc, sure, np.concatenate([values, np.full(10, 3.0)])), np.random.default_rng(0),
                   np.zeros((0, 3))) is None

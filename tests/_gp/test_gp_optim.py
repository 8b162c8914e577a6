"""Maximising a score over finite spaces: exact enumeration and local search."""

import numpy as np

from iobo._gp.design import latin_index
from iobo._gp.encoding import ANY, Encoding
from iobo._gp.optim import Excluded, maximize


def _separable(enc: Encoding, target: list[int]):
    return lambda rows: -np.abs(rows - np.array(target)).sum(axis=1).astype(float)


def test_enumeration_returns_the_best_allowed_configuration():
    enc = Encoding({"a": tuple(range(5)), "b": tuple(range(4))})
    score = _separable(enc, [3, 2])
    rng = np.random.default_rng(0)
    assert maximize(score, enc, rng).tolist() == [3, 2]
    assert maximize(score, enc, rng, exclude={(3, 2)}).tolist() in ([2, 2], [4, 2], [3, 1], [3, 3])


def test_fully_excluded_space_gives_none():
    enc = Encoding({"a": (0, 1)})
    assert maximize(lambda r: np.zeros(len(r)), enc, np.random.default_rng(0), exclude={(0,), (1,)}) is None


def test_local_search_finds_the_optimum_of_a_large_space():
    enc = Encoding({f"p{i}": tuple(range(8)) for i in range(9)})  # 8^9 = 134M configurations
    target = [5, 1, 7, 2, 2, 6, 0, 3, 4]
    row = maximize(_separable(enc, target), enc, np.random.default_rng(1), max_enumerate=1000)
    assert row.tolist() == target


def test_local_search_skips_excluded_configurations():
    enc = Encoding({f"p{i}": tuple(range(8)) for i in range(6)})
    target = [1, 2, 3, 4, 5, 6]
    row = maximize(_separable(enc, target), enc, np.random.default_rng(2), exclude={tuple(target)}, max_enumerate=10)
    assert row is not None and row.tolist() != target
    assert np.abs(row - np.array(target)).sum() == 1


def test_latin_hypercube_uses_every_stratum_once_per_block():
    n, choices = 6, 6
    first = [latin_index(42, "stripes", choices, j, n) for j in range(n)]
    second = [latin_index(42, "stripes", choices, j, n) for j in range(n, 2 * n)]
    assert sorted(first) == list(range(6)) and sorted(second) == list(range(6))
    assert first != [latin_index(42, "aggregators", choices, j, n) for j in range(n)]


def test_any_entries_exclude_every_value_of_their_parameter():
    excluded = Excluded([(1, ANY, 0), (2, 3, 1)])
    assert (1, 0, 0) in excluded and (1, 3, 0) in excluded and (2, 3, 1) in excluded
    assert (1, 0, 1) not in excluded and (2, 2, 1) not in excluded
    enc = Encoding({"a": (0, 1, 2), "b": (0, 1, 2, 3), "c": (0, 1)})
    score = _separable(enc, [1, 2, 0])  # best: (1, 2, 0), covered by (1, ANY, 0)
    row = maximize(score, enc, np.random.default_rng(0), exclude=excluded)
    assert row.tolist() in ([0, 2, 0], [2, 2, 0], [1, 1, 1], [1, 3, 1], [1, 2, 1])


def test_a_slice_holds_one_parameter_at_its_choice_in_both_regimes():
    enc = Encoding({f"p{i}": tuple(range(6)) for i in range(5)})  # 7,776 configurations
    target = [1, 2, 3, 4, 5]
    for max_enumerate in (100_000, 10):  # exact, then local search
        row = maximize(_separable(enc, target), enc, np.random.default_rng(3), max_enumerate=max_enumerate,
                       fixed=((2, 0),), seeds=np.array([target]))
        assert row.tolist() == [1, 2, 0, 4, 5]


def test_a_slice_on_a_parent_draws_the_children_it_activates():
    enc = Encoding({"layout": ("contiguous", "chunked"), "chunk": tuple(range(6)), "b": tuple(range(8))},
                   {"chunk": ("layout", "chunked")})
    score = lambda rows: -np.abs(rows[:, 2] - 5) - np.abs(rows[:, 1] - 4) * (rows[:, 1] >= 0)  # noqa: E731
    start = np.array([[0, -1, 5]])  # contiguous: the best the unsliced score has
    for max_enumerate in (100_000, 5):
        row = maximize(score, enc, np.random.default_rng(4), max_enumerate=max_enumerate, fixed=((0, 1),),
                       seeds=start, exclude={(0, -1, 5)})
        assert row.tolist() == [1, 4, 5]


def test_a_slice_with_every_member_excluded_gives_none():
    enc = Encoding({"a": (0, 1), "b": (0, 1)})
    assert maximize(lambda r: np.zeros(len(r)), enc, np.random.default_rng(0), exclude={(1, 0), (1, 1)},
                    fixed=((0, 1),)) is None


def test_a_slice_on_a_child_sets_its_parent_to_a_value_that_activates_it():
    enc = Encoding({"layout": ("contiguous", "chunked"), "chunk": tuple(range(6)), "b": tuple(range(8))},
                   {"chunk": ("layout", "chunked")})
    rows = enc.random(50, np.random.default_rng(5), fixed=((1, 3),))
    assert (rows[:, 0] == 1).all() and (rows[:, 1] == 3).all()
    score = lambda rows: -np.abs(rows[:, 2] - 5).astype(float) - 3 * (rows[:, 0] == 1)  # noqa: E731  chunked loses
    for max_enumerate in (100_000, 5):
        row = maximize(score, enc, np.random.default_rng(6), max_enumerate=max_enumerate, fixed=((1, 3),),
                       seeds=np.array([[0, -1, 5]]), exclude={(0, -1, 5)})
        assert row.tolist() == [1, 3, 5]


def test_a_slice_holds_several_parameters_in_both_regimes():
    enc = Encoding({f"p{i}": tuple(range(6)) for i in range(5)})
    target = [1, 2, 3, 4, 5]
    for max_enumerate in (100_000, 10):
        row = maximize(_separable(enc, target), enc, np.random.default_rng(7), max_enumerate=max_enumerate,
                       fixed=((2, 0), (4, 1)), seeds=np.array([target]))
        assert row.tolist() == [1, 2, 0, 4, 1]


def test_a_fixed_parent_keeps_its_choice_when_a_fixed_child_activates_it():
    enc = Encoding({"layout": ("contiguous", "chunked", "compact"), "chunk": tuple(range(6))},
                   {"chunk": ("layout", ("chunked", "compact"))})
    rows = enc.random(40, np.random.default_rng(8), fixed=((0, 2), (1, 4)))
    assert (rows[:, 0] == 2).all() and (rows[:, 1] == 4).all()

"""The unit-cube encoding of finite, conditional spaces."""

import math

import numpy as np
import pytest

from iobo._gp.encoding import ANY, INACTIVE, Encoding, infer_conditions, ordinal_positions
from iobo.errors import SpaceError
from iobo.space import io_stack_space

MiB = 2**20


def test_powers_of_two_are_evenly_spaced_and_unset_sits_one_step_below():
    assert ordinal_positions((1, 2, 4, 8)) == pytest.approx((0, 1 / 3, 2 / 3, 1))
    assert ordinal_positions((None, 1, 2, 4)) == pytest.approx((0, 1 / 3, 2 / 3, 1))


def test_uneven_sizes_take_log2_positions():
    # 1 B, 4 KiB, 64 KiB, 1 MiB: log2 = 0, 12, 16, 20
    assert ordinal_positions((1, 4096, 65536, MiB)) == pytest.approx((0, 0.6, 0.8, 1))


def test_strings_booleans_and_lone_none_are_nominal():
    assert ordinal_positions(("enable", "disable")) is None
    assert ordinal_positions((False, True)) is None
    assert ordinal_positions((None, 4)) is None


def test_three_numbers_are_nominal_two_stay_ordinal():
    # by log2, 64 KiB would sit at 0.73, next to 4 MiB: the GP would take it for 4 MiB before measuring it
    for choices in ((1, 65536, 4 * MiB), (MiB, 4 * MiB, 16 * MiB), (None, 1, 2), (None, 8)):
        assert ordinal_positions(choices) is None, choices
    # two numbers: one gap, the same distance either way; ordinal keeps an unused slot halfway between them
    assert ordinal_positions((2, 8)) == (0.0, 1.0)
    assert ordinal_positions((MiB, 16 * MiB)) == (0.0, 1.0)
    conditional = Encoding({"layout": ("contiguous", "chunked"), "chunk_size": (256 * 1024, 4 * MiB)},
                           {"chunk_size": ("layout", "chunked")})
    unused = conditional.distance_tables()[1][2, :2]  # squared distance from "not chunked" to each size
    assert np.allclose(unused, 0.25)  # halfway: 0.5 of the sizes' distance (one-hot gave 0.5, i.e. 0.71 of it)
    enc = Encoding({"alignment_interval": (1, 65536, 4 * MiB), "cb_buffer_size": (MiB, 4 * MiB, 16 * MiB, 64 * MiB)})
    assert enc.params[0].width == 3 and enc.params[1].width == 1  # one-hot; one ordinal column
    unit = enc.encode(enc.to_rows([{"alignment_interval": v, "cb_buffer_size": MiB} for v in (1, 65536, 4 * MiB)]))
    gaps = {round(float(np.linalg.norm(unit[i] - unit[j])), 9) for i, j in ((0, 1), (1, 2), (0, 2))}
    assert len(gaps) == 1  # every value as far from every other


def test_nominal_choices_are_one_hot_at_distance_one():
    enc = Encoding({"mode": ("a", "b", "c")})
    x = enc.encode(np.array([[0], [1], [2]]))
    assert x.shape == (3, 3)
    assert np.linalg.norm(x[0] - x[1]) == pytest.approx(1.0)
    assert np.linalg.norm(x[1] - x[2]) == pytest.approx(1.0)


def test_groups_map_columns_to_parameters():
    enc = Encoding({"size": (1, 2, 4, 8), "mode": ("a", "b")})
    assert enc.groups.tolist() == [0, 1, 1]
    assert enc.dim == 3


def _layout_space() -> Encoding:
    space = io_stack_space().select(["layout", "chunk_size", "transfer_mode"])
    return Encoding({p.name: p.values for p in space}, {"chunk_size": ("layout", "chunked")})


def test_conditional_parameter_counts_once_when_inactive():
    enc = _layout_space()
    # contiguous: 2 transfer modes; chunked: 6 chunk sizes x 2 transfer modes
    assert enc.size() == 2 + 12 == io_stack_space().select(["layout", "chunk_size", "transfer_mode"]).size()
    rows = enc.enumerate()
    assert len(rows) == enc.size() == len({tuple(r) for r in rows.tolist()})
    contiguous = rows[rows[:, enc.names.index("layout")] == 0]
    assert (contiguous[:, enc.names.index("chunk_size")] == INACTIVE).all()


def test_inactive_parameter_encodes_as_a_constant():
    enc = _layout_space()
    a = enc.to_row({"layout": "contiguous", "transfer_mode": "independent"})
    b = enc.to_row({"layout": "contiguous", "chunk_size": 4 * MiB, "transfer_mode": "independent"})
    assert a.tolist() == b.tolist()  # an inactive value is dropped
    assert enc.to_config(a) == {"layout": "contiguous", "transfer_mode": "independent"}


def test_neighbours_change_one_parameter_and_activate_children():
    enc = _layout_space()
    row = enc.to_row({"layout": "contiguous", "transfer_mode": "independent"})
    near, origin = enc.neighbours(row[None, :])
    assert (origin == 0).all()
    configs = [enc.to_config(r) for r in near]
    # the other transfer mode, and each of 6 chunk sizes with layout chunked
    assert len(configs) == 1 + 6
    assert sum(c["layout"] == "chunked" for c in configs) == 6
    assert all(len({k for k in c if c[k] != enc.to_config(row).get(k)}) >= 1 for c in configs)


def test_random_rows_respect_conditions():
    enc = _layout_space()
    rows = enc.random(200, np.random.default_rng(0))
    chunked = rows[:, enc.names.index("layout")] == 1
    assert (rows[~chunked, enc.names.index("chunk_size")] == INACTIVE).all()
    assert (rows[chunked, enc.names.index("chunk_size")] >= 0).all()


def test_infer_conditions_finds_the_activating_value():
    configs = [
        {"layout": "contiguous", "mode": "a"},
        {"layout": "chunked", "chunk_size": 1, "mode": "b"},
        {"layout": "chunked", "chunk_size": 4, "mode": "a"},
    ]
    assert infer_conditions(["chunk_size", "layout", "mode"], configs) == {"chunk_size": ("layout", ("chunked",))}


def test_size_of_the_full_io_stack_space_matches_space_size():
    space = io_stack_space()
    enc = Encoding({p.name: p.values for p in space}, {p.name: p.active_if for p in space if p.active_if})
    assert enc.size() == space.size()
    assert math.isclose(enc.size(), space.size())


def _ratio_space(ratios=(("cb_buffer_size", "striping_unit"),)) -> Encoding:
    space = io_stack_space().select(["cb_buffer_size", "striping_unit", "romio_cb_write"])
    return Encoding({p.name: p.values for p in space}, ratios=ratios)


def test_a_ratio_is_one_more_gp_input_where_matched_sizes_coincide():
    enc = _ratio_space()
    assert enc.ratio_names == ("cb_buffer_size/striping_unit",)
    pairs = ((MiB, MiB), (8 * MiB, 8 * MiB), (8 * MiB, MiB))
    rows = np.array([enc.to_row({"cb_buffer_size": b, "striping_unit": u, "romio_cb_write": "enable"}) for b, u in pairs])
    slots = enc.slots(rows)
    assert slots.shape == (3, 4)  # 3 parameters + 1 ratio
    ratio = enc.distance_tables()[3]
    # both matched pairs have ratio 1: distance 0 in the ratio input; the 8:1 pair is 3 of 14 log2 steps away
    assert ratio[slots[0, 3], slots[1, 3]] == 0.0
    span = math.log2(128) + (math.log2(128) + 1)  # differences run from 1 MiB / 128 MiB to 128 MiB / unset (0.5 MiB)
    assert ratio[slots[0, 3], slots[2, 3]] == pytest.approx((3 / span) ** 2)
    # the parameter inputs themselves are unchanged
    assert np.array_equal(slots[:, :3], rows)


def test_an_inactive_side_makes_the_ratio_inactive_at_distance_one():
    space = io_stack_space().select(["layout", "chunk_size", "striping_unit"])
    enc = Encoding({p.name: p.values for p in space}, {"chunk_size": ("layout", "chunked")},
                   ratios=[("chunk_size", "striping_unit")])
    contiguous = enc.to_row({"layout": "contiguous", "striping_unit": MiB})
    other = enc.to_row({"layout": "contiguous", "striping_unit": 4 * MiB})
    chunked = enc.to_row({"layout": "chunked", "chunk_size": MiB, "striping_unit": MiB})
    slots = enc.slots(np.array([contiguous, other, chunked]))
    ratio = enc.distance_tables()[3]
    assert ratio[slots[0, 3], slots[1, 3]] == 0.0
    assert ratio[slots[0, 3], slots[2, 3]] == 1.0


def test_ratios_of_absent_or_nominal_parameters_are_left_out():
    enc = _ratio_space(ratios=[("cb_buffer_size", "striping_unit"), ("cb_nodes", "striping_factor"),
                               ("romio_cb_write", "striping_unit"), ("cb_buffer_size", "striping_unit")])
    assert enc.ratio_names == ("cb_buffer_size/striping_unit",)
    assert len(enc.distance_tables()) == 4


def test_numbers_from_a_range_sit_at_their_place_in_it():
    enc = Encoding({"x": (0, 1, 5, 10), "lr": (1e-4, 1e-3, 1e-1)}, scales={"x": (0, 10, False), "lr": (1e-4, 1e-1, True)})
    assert enc.params[0].positions == pytest.approx((0, 0.1, 0.5, 1))
    assert enc.params[1].positions == pytest.approx((0, 1 / 3, 1))
    # without a scale, positive numbers would be placed by log2
    assert Encoding({"x": (1, 2, 4)}, scales={"x": (1, 4, False)}).params[0].positions == pytest.approx((0, 1 / 3, 1))


def _nested() -> Encoding:
    """kind a -> d in (u, v, w); d in (u, v) -> y in 0..3; kind b -> z in 0..4."""
    return Encoding(
        {"kind": ("a", "b", "c"), "d": ("u", "v", "w"), "y": (0, 1, 2, 3), "z": tuple(range(5))},
        {"d": ("kind", "a"), "y": ("d", ("u", "v")), "z": ("kind", ("b",))},
    )


def test_nested_and_multi_valued_conditions_count_and_enumerate_each_configuration_once():
    enc = _nested()
    # a: u or v with 4 y each + w = 9; b: 5 z; c: 1
    assert enc.size() == 9 + 5 + 1
    rows = enc.enumerate()
    assert len({tuple(r) for r in rows.tolist()}) == len(rows) == enc.size()
    configs = [enc.to_config(r) for r in rows]
    assert all(("y" in c) == (c.get("d") in ("u", "v")) for c in configs)
    assert all(("z" in c) == (c["kind"] == "b") for c in configs)


def test_an_inactive_parent_deactivates_its_children():
    enc = _nested()
    row = enc.to_row({"kind": "b", "d": "u", "y": 2, "z": 1})
    assert enc.to_config(row) == {"kind": "b", "z": 1}
    rows = enc.random(300, np.random.default_rng(0))
    assert {tuple(sorted(enc.to_config(r))) for r in rows} == {("d", "kind", "y"), ("d", "kind"), ("kind", "z"), ("kind",)}


def test_neighbours_grow_nested_children():
    enc = _nested()
    row = enc.to_row({"kind": "c"})
    configs = [enc.to_config(r) for r in enc.neighbours(row[None, :])[0]]
    # kind a brings d, and y where d is u or v: 9 configurations; kind b brings z: 5
    assert len(configs) == len({tuple(sorted(c.items())) for c in configs}) == 9 + 5


def test_conditions_must_form_a_forest():
    with pytest.raises(SpaceError, match="form a cycle"):
        Encoding({"a": (0, 1), "b": (0, 1)}, {"a": ("b", 1), "b": ("a", 1)})
    with pytest.raises(SpaceError, match="must be another parameter"):
        Encoding({"a": (0, 1)}, {"a": ("missing", 1)})


def test_wide_ordinal_parameters_move_by_powers_of_two_steps():
    enc = Encoding({"x": tuple(range(100)), "mode": ("a", "b")}, scales={"x": (0, 99, False)})
    near, _ = enc.neighbours(enc.to_row({"x": 40, "mode": "a"})[None, :])
    moves = sorted(enc.to_config(r)["x"] for r in near if enc.to_config(r)["mode"] == "a")
    assert moves == [40 + s for s in (-32, -16, -8, -4, -2, -1, 1, 2, 4, 8, 16, 32)]
    assert sum(enc.to_config(r)["mode"] == "b" for r in near) == 1


def test_infer_conditions_finds_nested_parents_and_sets_of_values():
    configs = [
        {"kind": "a", "d": "u", "y": 1},
        {"kind": "a", "d": "v", "y": 2},
        {"kind": "a", "d": "w"},
        {"kind": "b", "z": 3},
        {"kind": "c"},
        {"kind": "b", "z": 0},
    ]
    assert infer_conditions(["d", "kind", "y", "z"], configs) == {
        "d": ("kind", ("a",)),
        "y": ("d", ("u", "v")),
        "z": ("kind", ("b",)),
    }
    # a numeric parent: y exists where x > 5 (the values seen so far)
    numeric = [{"x": 7, "y": 0}, {"x": 2}, {"x": 9, "y": 1}, {"x": 4}]
    assert infer_conditions(["x", "y"], numeric) == {"y": ("x", (7, 9))}
    # presence no single parent explains: unconditional
    assert infer_conditions(["a", "y"], [{"a": 1, "y": 0}, {"a": 1}, {"a": 2}]) == {}


def test_any_is_inactive_for_the_gp_and_absent_from_the_configuration():
    enc = Encoding({"x": (0, 1, 2), "mode": ("a", "b")}, scales={"x": (0, 2, False)})
    row = np.array([1, ANY])
    assert enc.to_config(row) == {"x": 1}
    assert enc.slots(row[None, :]).tolist() == enc.slots(np.array([[1, INACTIVE]])).tolist()
    assert np.array_equal(enc.encode(row[None, :]), enc.encode(np.array([[1, INACTIVE]])))

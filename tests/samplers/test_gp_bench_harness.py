"""The benchmark harness: recorded sweeps (CSV) as problems, and evaluation counting."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "sampler"))

import bench  # noqa: E402
import problems  # noqa: E402

FIXTURE = Path(__file__).parent / "data" / "tiny_sweep.csv"


def test_table_loads_types_conditions_and_medians():
    table = problems.load_table(FIXTURE)
    assert table.choices == {
        "striping_factor": (None, 4),
        "romio_cb_write": ("enable", "disable"),
        "layout": ("contiguous", "chunked"),
        "chunk_size": (1048576, 4194304),
    }
    assert table.conditions == {"chunk_size": ("layout", ("chunked",))}
    assert table.encoding.size() == 12
    best = {"striping_factor": 4, "romio_cb_write": "enable", "layout": "contiguous"}
    assert table.truth(best) == pytest.approx(1500.0)  # median of 1350, 1500, 1950
    assert table.best == pytest.approx(1500.0)
    assert table.default == {"striping_factor": None, "romio_cb_write": "enable", "layout": "contiguous"}
    # an inactive chunk size is ignored, as the kernel would ignore it
    assert table.truth(best | {"chunk_size": 4194304}) == table.truth(best)


def test_measurements_draw_recorded_repeats():
    table = problems.load_table(FIXTURE)
    rng = np.random.default_rng(0)
    config = {"striping_factor": None, "romio_cb_write": "disable", "layout": "chunked", "chunk_size": 1048576}
    draws = {table.measure(config, rng) for _ in range(60)}
    assert draws == {270.0, 300.0, 390.0}


def test_incomplete_sweeps_are_refused(tmp_path):
    lines = FIXTURE.read_text().splitlines()
    partial = tmp_path / "partial.csv"
    partial.write_text("\n".join(lines[:-3]) + "\n")  # drop one configuration's repeats
    with pytest.raises(ValueError, match="not a full sweep: 1 configurations missing"):
        problems.load_table(partial)


def test_evaluations_to_target_counts_from_one_and_censors():
    assert bench.evaluations_to([1.0, 5.0, 9.0], 5.0, budget=3) == 2
    assert bench.evaluations_to([1.0, 2.0], 5.0, budget=2) == 3


def test_synthetic_optimum_is_known_and_inside_the_space():
    model = problems.synthetic("chunked8")
    rows = model.encoding.enumerate()
    values = np.array([model.truth(model.encoding.to_config(r)) for r in rows[::7]])
    assert values.max() <= model.best * (1 + 1e-12)
    optimum = {"striping_factor": 16, "cb_nodes": 16, "striping_unit": 4 * 2**20, "cb_buffer_size": 4 * 2**20,
               "transfer_mode": "collective", "romio_cb_write": "enable", "layout": "chunked", "chunk_size": 4 * 2**20}
    assert model.truth(optimum) == pytest.approx(model.best)


def test_widened_table_adds_parameters_that_change_nothing():
    table = problems.load_table(FIXTURE)
    wide = problems.widen(table, ("sieve_buf_size", "coll_metadata"))
    assert list(wide.choices) == [*table.choices, "sieve_buf_size", "coll_metadata"]
    assert wide.encoding.size() == table.encoding.size() * len(wide.choices["sieve_buf_size"]) * 2
    assert wide.default == table.default | {"sieve_buf_size": 65536, "coll_metadata": False}
    assert wide.best == table.best and wide.conditions == table.conditions
    config = {"striping_factor": None, "romio_cb_write": "disable", "layout": "chunked", "chunk_size": 1048576}
    for extra in ({"sieve_buf_size": 65536, "coll_metadata": False}, {"sieve_buf_size": 2**24, "coll_metadata": True}):
        assert wide.truth(config | extra) == table.truth(config)
        rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
        draws = [wide.measure(config | extra, rng_a) for _ in range(5)]
        assert draws == [table.measure(config, rng_b) for _ in range(5)]


def test_a_run_on_a_table_asks_the_conditional_parameter_where_its_parent_activates_it():
    import optimizers
    from iobo.samplers import GPSampler

    table = problems.load_table(FIXTURE)
    run = optimizers.run_optuna(table, GPSampler(seed=0, n_startup_trials=3), 12, 0)
    assert len(run.truths) == 12 and max(run.truths) == pytest.approx(table.best)

"""The benchmark harness: recorded sweeps (CSV) as problems, and evaluation counting."""

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.harness import problems
from experiments.harness.grid import INACTIVE, Grid, infer_conditions
from experiments.harness.runs import evaluations_to
from iobo.errors import ConfigError, SpaceError

FIXTURE = Path(__file__).parent / "data" / "tiny_sweep.csv"


def test_table_loads_types_conditions_and_medians():
    table = problems.load_table(FIXTURE)
    assert table.choices == {
        "striping_factor": (None, 4),
        "romio_cb_write": ("enable", "disable"),
        "layout": ("contiguous", "chunked"),
        "chunk_size": (1048576, 4194304),
    }
    assert table.conditions == {"chunk_size": ("layout", "chunked")}
    assert table.grid.size() == 12
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
    with pytest.raises(ConfigError, match="must be a full sweep of its grid; .* has 1 configurations missing"):
        problems.load_table(partial)


def test_evaluations_to_target_counts_from_one_and_censors():
    assert evaluations_to([1.0, 5.0, 9.0], 5.0, budget=3) == 2
    assert evaluations_to([1.0, 2.0], 5.0, budget=2) == 3


def test_synthetic_optimum_is_known_and_inside_the_space():
    model = problems.synthetic("chunked8")
    configs = model.grid.configurations()
    values = np.array([model.truth(c) for c in configs[::7]])
    assert values.max() <= model.best * (1 + 1e-12)
    optimum = {"striping_factor": 16, "cb_nodes": 16, "striping_unit": 4 * 2**20, "cb_buffer_size": 4 * 2**20,
               "transfer_mode": "collective", "romio_cb_write": "enable", "layout": "chunked", "chunk_size": 4 * 2**20}
    assert model.truth(optimum) == pytest.approx(model.best)


def test_widened_table_adds_parameters_that_change_nothing():
    table = problems.load_table(FIXTURE)
    wide = problems.widen(table, ("sieve_buf_size", "coll_metadata"))
    assert list(wide.choices) == [*table.choices, "sieve_buf_size", "coll_metadata"]
    assert wide.grid.size() == table.grid.size() * len(wide.choices["sieve_buf_size"]) * 2
    assert wide.default == table.default | {"sieve_buf_size": 65536, "coll_metadata": False}
    assert wide.best == table.best and wide.conditions == table.conditions
    config = {"striping_factor": None, "romio_cb_write": "disable", "layout": "chunked", "chunk_size": 1048576}
    for extra in ({"sieve_buf_size": 65536, "coll_metadata": False}, {"sieve_buf_size": 2**24, "coll_metadata": True}):
        assert wide.truth(config | extra) == table.truth(config)
        rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
        draws = [wide.measure(config | extra, rng_a) for _ in range(5)]
        assert draws == [table.measure(config, rng_b) for _ in range(5)]


GRID = Grid({"layout": ("contiguous", "chunked"), "chunk_size": (1, 2, 4), "files": ("shared", "per_process")},
            {"chunk_size": ("layout", "chunked")})


def test_grid_lists_every_configuration_once_in_its_fixed_order():
    assert GRID.configurations() == [
        {"layout": "contiguous", "files": "shared"},
        {"layout": "contiguous", "files": "per_process"},
        {"layout": "chunked", "chunk_size": 1, "files": "shared"},
        {"layout": "chunked", "chunk_size": 2, "files": "shared"},
        {"layout": "chunked", "chunk_size": 4, "files": "shared"},
        {"layout": "chunked", "chunk_size": 1, "files": "per_process"},
        {"layout": "chunked", "chunk_size": 2, "files": "per_process"},
        {"layout": "chunked", "chunk_size": 4, "files": "per_process"},
    ]
    assert GRID.size() == 8
    wide = problems.synthetic("stack12").grid  # too large to list; counted from the choices
    layouts = wide.choices["layout"]
    others = math.prod(len(v) for n, v in wide.choices.items() if n not in ("layout", "chunk_size"))
    assert wide.size() == others * (len(layouts) - 1 + len(wide.choices["chunk_size"]))


def test_grid_drops_what_a_parent_switches_off_and_round_trips_indices():
    assert GRID.active({"layout": "contiguous", "chunk_size": 4, "files": "shared"}) == {
        "layout": "contiguous", "files": "shared"}
    assert GRID.indices({"layout": "contiguous", "files": "per_process"}) == [0, INACTIVE, 1]
    assert GRID.from_indices([0, 2, 1]) == {"layout": "contiguous", "files": "per_process"}
    for config in GRID.configurations():
        assert GRID.from_indices(GRID.indices(config)) == config


def test_grid_keeps_types_apart_and_refuses_foreign_values_and_nested_conditions():
    flags = Grid({"coll_metadata": (False, True), "cb_nodes": (None, 0, 1)})
    assert flags.indices({"coll_metadata": True, "cb_nodes": 1}) == [1, 2]
    assert flags.indices({"coll_metadata": False, "cb_nodes": 0}) == [0, 1]
    with pytest.raises(SpaceError, match=r"cb_nodes=True is not one of \(None, 0, 1\)"):
        flags.active({"cb_nodes": True})
    with pytest.raises(SpaceError, match="parent of a conditional parameter must be an unconditional"):
        Grid({"a": (1, 2), "b": (1, 2), "c": (1, 2)}, {"b": ("a", 1), "c": ("b", 2)})


def test_conditions_are_read_off_which_parameters_a_table_has():
    configs = [{"layout": "contiguous", "files": "shared"}, {"layout": "chunked", "chunk_size": 1, "files": "shared"},
               {"layout": "chunked", "chunk_size": 2, "files": "per_process"}, {"layout": "contiguous"}]
    # chunk_size: present exactly where layout is chunked; files: no single value explains its absence
    assert infer_conditions(["layout", "chunk_size", "files"], configs) == {"chunk_size": ("layout", "chunked")}


def test_benchmarks_run_as_modules_from_the_project_root():
    """A benchmark run as the README says (``python -m experiments...``), no path set up: it imports the harness."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-m", "experiments.sampler.bench", "--seeds", "2", "--budget", "10", "--problems", "lustre4",
         "--optimizers", "random", "--timing-seeds", "0"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "## lustre4 (synthetic, 4 params, CV 10%;" in out.stdout
    assert out.stdout.count("\nrandom ") == 2  # a row in the levels table, one in the table against S
    assert "## lustre4 against S: known truth" in out.stdout


def test_blind_sampling_is_without_replacement_default_first_and_seeded():
    from experiments.harness.optimizers import run_blind
    from experiments.harness.truth import truth_of
    from experiments.sampler.bench import to_s

    table = problems.load_table(FIXTURE)
    size = table.grid.size()
    run = run_blind(table, size, seed=3)
    assert run.truths[0] == table.truth(table.default)
    configs = [c for c in table.grid.configurations()]
    assert sorted(run.truths) == sorted(table.truth(c) for c in configs)  # every configuration once
    assert run_blind(table, size, seed=3).truths == run.truths
    assert run_blind(table, size, seed=4).truths != run.truths
    assert all(run.recommended[n] == run.best_run[n] for n in range(1, size + 1))
    truth = truth_of(table)
    first = to_s(run.truths, truth, size)
    assert truth.in_s(run.truths[first - 1]) and not any(truth.in_s(v) for v in run.truths[:first - 1])
    assert to_s([0.0] * size, truth, size) == size + 1


def test_a_seed_list_takes_ranges_once_each_and_refuses_what_is_not_one():
    from experiments.harness.runs import seed_list, show_seeds

    assert seed_list("10-12,60-61") == [10, 11, 12, 60, 61]
    assert seed_list("3, 5-6,5") == [3, 5, 6]
    assert show_seeds(seed_list("10-29,60-99")) == "10-29, 60-99"
    assert show_seeds([3, 5, 6]) == "3, 5-6"
    for bad in ("9-3", "a-b", "1-", "-4"):
        with pytest.raises(argparse.ArgumentTypeError, match="a seed range is N or N-M"):
            seed_list(bad)

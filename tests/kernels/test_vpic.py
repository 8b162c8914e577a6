"""VPIC-IO kernel on real MPI (2 ranks, MPICH) and parallel HDF5, small sizes on tmpfs.

Uses the ``scratch`` fixture of tests/conftest.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from kernel_runs import RANKS, assert_ok, assert_rejected, module_dir, run_kernel_cli  # noqa: F401  (fixture)

from iobo.config import IOConfig
from iobo.kernels import vpic

MODULE = "iobo.kernels.vpic"
KiB, MiB = 1024, 1024 * 1024
STEPS = 2

HDF5_SETTINGS = {
    "alignment_threshold": 4 * KiB,
    "alignment_interval": 64 * KiB,
    "meta_block_size": 32 * KiB,
    "sieve_buf_size": MiB,
    "mdc_initial_size": 8 * MiB,
    "transfer_mode": "collective",
    "coll_metadata": True,
}
MPIIO_HINTS = {  # all away from ROMIO's defaults (16 MiB, automatic, automatic, 1 aggregator, *:1)
    "cb_buffer_size": 4 * MiB,
    "romio_cb_write": "enable",
    "romio_ds_write": "disable",
    "cb_nodes": 2,
    "cb_config_list": "*:*",
}
LUSTRE_STRIPING = {"striping_factor": 4, "striping_unit": MiB}


def expected_dataset(variable: int, step: int, particles: int) -> np.ndarray:
    """A whole shared-file dataset: every rank's slice one after the other."""
    return np.concatenate([vpic.particle_values(variable, step, rank * particles, particles) for rank in range(RANKS)])


def dataset_offsets(path: Path) -> list[int]:
    """Byte offsets in the file of every contiguous dataset."""
    with h5py.File(path, "r") as file:
        return [file[f"Timestep_{step}/{name}"].id.get_offset() for step in range(STEPS) for name in vpic.VARIABLES]


# -- runs shared by several tests -------------------------------------------------------

DEFAULT_PARTICLES = 4096


@pytest.fixture(scope="module")
def default_run(module_dir):
    out = module_dir / "default"
    run = run_kernel_cli(MODULE, out, "--particles", str(DEFAULT_PARTICLES), "--steps", str(STEPS),
                         "--keep", "--verify")
    assert_ok(run)
    return out, run


PER_PROCESS_PARTICLES = 3000
PER_PROCESS_CONFIG = {"files": "per_process", "transfer_mode": "collective", "coll_metadata": True,
                      "cb_buffer_size": 4 * MiB}


@pytest.fixture(scope="module")
def per_process_run(module_dir):
    out = module_dir / "per_process"
    run = run_kernel_cli(MODULE, out, "--particles", str(PER_PROCESS_PARTICLES), "--steps", str(STEPS),
                         "--keep", "--verify", config=PER_PROCESS_CONFIG)
    assert_ok(run)
    return out, run


# -- contents ---------------------------------------------------------------------------


def test_shared_file_holds_every_rank_slice_step_and_variable(default_run):
    out, run = default_run
    with h5py.File(out / "vpic.h5", "r") as file:
        assert sorted(file) == [f"Timestep_{step}" for step in range(STEPS)]
        for step in range(STEPS):
            assert sorted(file[f"Timestep_{step}"]) == sorted(vpic.VARIABLES)
            for variable, name in enumerate(vpic.VARIABLES):
                dataset = file[f"Timestep_{step}/{name}"]
                assert dataset.dtype == np.float32
                np.testing.assert_array_equal(dataset[...], expected_dataset(variable, step, DEFAULT_PARTICLES))
    assert run.result["verified"] is True


def test_generator_values_differ_between_particles_variables_and_steps():
    base = vpic.particle_values(0, 0, 0, 1000)
    assert len(np.unique(base)) == 1000
    assert not np.array_equal(base, vpic.particle_values(1, 0, 0, 1000))
    assert not np.array_equal(base, vpic.particle_values(0, 1, 0, 1000))
    np.testing.assert_array_equal(vpic.particle_values(3, 1, 500, 10), vpic.particle_values(3, 1, 0, 510)[500:])


def test_verify_counts_a_corrupted_value(per_process_run, scratch):
    out, _ = per_process_run
    copy = scratch / "vpic.1.h5"
    shutil.copy(out / "vpic.1.h5", copy)
    with h5py.File(copy, "r+") as file:
        file["Timestep_1/px"][17] = -1.0
    plan = vpic.FilePlan(copy, shared=False, length=PER_PROCESS_PARTICLES, offset=0, first=PER_PROCESS_PARTICLES)
    found = vpic.mismatches(plan, PER_PROCESS_PARTICLES, STEPS)
    assert found.count == 1
    assert "vpic.1.h5:/Timestep_1/px[0]+[17]: expected" in found.first and "read -1.0" in found.first


# -- JSON lines -------------------------------------------------------------------------


def test_step_and_result_lines_are_well_formed(default_run):
    out, run = default_run
    step_bytes = RANKS * DEFAULT_PARTICLES * len(vpic.VARIABLES) * 4
    assert [line["event"] for line in run.lines] == ["step"] * STEPS + ["result"]
    for step, line in enumerate(run.steps):
        assert (line["step"], line["repeat"], line["bytes"]) == (step, 0, step_bytes)
        assert line["seconds"] > 0
        assert line["mb_per_s"] == pytest.approx(step_bytes / line["seconds"] / 1e6)
    # elapsed: from before the open to each step's end, the untimed making of each step's data included
    elapsed = [line["elapsed_s"] for line in run.steps]
    assert elapsed == sorted(elapsed) and elapsed[0] >= run.steps[0]["seconds"]
    assert elapsed[-1] - elapsed[0] >= sum(line["seconds"] for line in run.steps[1:])
    result = run.result
    assert (result["kernel"], result["ranks"], result["bytes"]) == ("vpic", RANKS, STEPS * step_bytes)
    assert result["seconds"] >= sum(line["seconds"] for line in run.steps) * 0.5 > 0
    assert result["mb_per_s"] == pytest.approx(result["bytes"] / result["seconds"] / 1e6)
    assert result["repeats_mb_per_s"] == [result["mb_per_s"]]
    assert (result["objective"], result["bytes_written"], result["bytes_read"]) == ("write", result["bytes"], 0)
    assert result["write"]["open_seconds"] > 0 and result["write"]["close_seconds"] > 0
    assert result["files"] == [str(out / "vpic.h5")] and result["kept"] is True
    assert result["effective"]["driver"] == "mpio"


# -- HDF5 parameters reach the file -------------------------------------------------------


def test_hdf5_settings_take_effect(scratch):
    particles = 16384  # 128 KiB datasets: all above the 4 KiB alignment threshold
    out = scratch / "hdf5"
    run = run_kernel_cli(MODULE, out, "--particles", str(particles), "--steps", str(STEPS), "--keep",
                         config=HDF5_SETTINGS)
    assert_ok(run)
    effective = run.result["effective"]
    for name, value in HDF5_SETTINGS.items():
        assert effective[name] == value, name
    assert effective["coll_metadata_ops"] is True and effective["coll_metadata_write"] is True
    assert effective["actual_io_mode"] == "contiguous_collective"
    assert run.result["not_applied"] == {}
    assert all(offset % HDF5_SETTINGS["alignment_interval"] == 0 for offset in dataset_offsets(out / "vpic.h5"))


def test_default_run_does_not_align_datasets(default_run):
    """Guards the alignment test: without the setting, offsets are not all on 64 KiB."""
    out, run = default_run
    assert run.result["effective"]["alignment_interval"] == 1
    assert any(offset % HDF5_SETTINGS["alignment_interval"] for offset in dataset_offsets(out / "vpic.h5"))


def test_chunked_layout_with_chunk_size(scratch):
    particles = 16384  # 128 KiB per rank: 4 chunks of 64 KiB per dataset
    config = {"layout": "chunked", "chunk_size": 64 * KiB, "transfer_mode": "collective"}
    out = scratch / "chunked"
    run = run_kernel_cli(MODULE, out, "--particles", str(particles), "--steps", str(STEPS), "--keep", "--verify",
                         config=config)
    assert_ok(run)
    effective = run.result["effective"]
    assert (effective["layout"], effective["chunk_size"]) == ("chunked", 64 * KiB)
    assert effective["transfer_mode"] == "collective" and effective["actual_io_mode"] == "chunk_collective"
    assert run.result["verified"] is True
    with h5py.File(out / "vpic.h5", "r") as file:
        assert file["Timestep_1/pz"].chunks == (64 * KiB // 4,)


# -- MPI-IO hints, Lustre, file per process -------------------------------------------------


def test_mpiio_hints_take_effect_and_striping_off_lustre_is_reported(scratch):
    out = scratch / "hints"
    run = run_kernel_cli(MODULE, out, "--particles", "1024", "--steps", str(STEPS), "--repeats", "2",
                         config=MPIIO_HINTS | LUSTRE_STRIPING)
    assert_ok(run)
    result = run.result
    wanted = {name: str(value) for name, value in MPIIO_HINTS.items()}
    assert result["requested_hints"] == wanted
    assert {name: result["hints"].get(name) for name in wanted} == wanted
    assert result["fs_type"] != "lustre"
    assert set(result["not_applied"]) == set(LUSTRE_STRIPING)
    assert all(result["fs_type"] in reason for reason in result["not_applied"].values())
    assert [(line["repeat"], line["step"]) for line in run.steps] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_default_hints_differ_from_the_tested_ones(default_run):
    """Guards the hints test: ROMIO's own values are not the ones it requests."""
    _, run = default_run
    hints = run.result["hints"]
    assert all(hints[name] != str(value) for name, value in MPIIO_HINTS.items())


def test_file_per_process_writes_one_file_per_rank(per_process_run):
    out, run = per_process_run
    assert sorted(p.name for p in out.iterdir()) == [f"vpic.{rank}.h5" for rank in range(RANKS)]
    assert run.result["files"] == [str(out / f"vpic.{rank}.h5") for rank in range(RANKS)]
    for rank in range(RANKS):
        with h5py.File(out / f"vpic.{rank}.h5", "r") as file:
            for step in range(STEPS):
                for variable, name in enumerate(vpic.VARIABLES):
                    expected = vpic.particle_values(variable, step, rank * PER_PROCESS_PARTICLES, PER_PROCESS_PARTICLES)
                    np.testing.assert_array_equal(file[f"Timestep_{step}/{name}"][...], expected)
    assert run.result["effective"]["driver"] == "sec2"
    assert run.result["verified"] is True


def test_file_per_process_reports_mpi_settings_not_applied(per_process_run):
    _, run = per_process_run
    mpi_only = set(PER_PROCESS_CONFIG) - {"files"}
    assert set(run.result["not_applied"]) == mpi_only
    assert all("sec2" in reason for reason in run.result["not_applied"].values())
    assert run.result["requested_hints"] == {} and run.result["hints"] == {}


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, config, message",
    [
        (["--particles", "0"], None, ["--particles=0", ">= 1"]),
        ([], {"bogus": 1}, ["bogus", "allowed names", "cb_buffer_size"]),
        ([], {"cb_buffer_size": 12345}, ["cb_buffer_size", "12345", "allowed: 1 MiB"]),
        (["--particles", "1024"], {"layout": "chunked", "chunk_size": 64 * MiB},
         ["chunk_size=64 MiB", "chunk_size <= 8192 bytes"]),
    ],
    ids=["zero-particles", "unknown-parameter", "value-not-allowed", "chunk-above-dataset"],
)
def test_bad_input_exits_2_before_any_io(scratch, flags, config, message):
    out = scratch / "bad"
    assert_rejected(run_kernel_cli(MODULE, out, *flags, config=config), out, message)


def test_failure_on_a_rank_aborts_the_job(scratch):
    not_a_directory = scratch / "file"
    not_a_directory.write_text("")
    run = run_kernel_cli(MODULE, not_a_directory, "--particles", "16", timeout=60)
    assert run.returncode != 0
    assert "Traceback" in run.stderr and "FileExistsError" in run.stderr


# -- durable steps -----------------------------------------------------------------------------


@pytest.mark.parametrize("flush_steps, fsyncs_per_step", [(True, 1), (False, 0)])
def test_flush_steps_makes_each_step_durable_before_the_step_ends(scratch, monkeypatch, flush_steps, fsyncs_per_step):
    """--flush-steps: each do_step (the timed step) ends with H5Fflush + fsync of the rank's file."""
    from iobo import stack
    from iobo.kernels import files

    synced: list[Path] = []
    real_fsync = files.fsync_file
    monkeypatch.setattr(files, "fsync_file", lambda path: (synced.append(path), real_fsync(path)))
    config = IOConfig.from_values({"files": "per_process"}, vpic.space())
    plan = vpic.file_plan(scratch, shared=False, rank=0, ranks=1, particles=1024)
    writer = vpic.make_writer(None, plan, config, stack.applicable(config, {}), {}, 1024, STEPS,
                              fsync=False, flush_steps=flush_steps)
    file = writer.open()
    for step in range(STEPS):
        writer.prepare(step)
        writer.do_step(file, step)
        assert synced == [plan.path] * (fsyncs_per_step * (step + 1))
    writer.close(file)
    assert vpic.mismatches(plan, 1024, STEPS).count == 0

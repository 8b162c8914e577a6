"""The LD_PRELOAD shim (adapters/libiobo_preload.so) tunes an unmodified h5py program.

Every run is real: ``mpiexec.mpich -n 2`` starts a parallel h5py program that
knows nothing of iobo's settings; the shim gets them from the ``IOBO_*``
variables of :func:`iobo.adapters.preload_env`. The test then checks, from
the written file and from what the open file reports, that they took effect,
and that without ``LD_PRELOAD`` the same variables change nothing.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest

from iobo import adapters
from iobo.errors import ConfigError
from iobo.config import IOConfig
from iobo.space import KiB, MiB

RANKS = 2
ITEMS = 262144  # 1 MiB of float32 per 1-D dataset
ROMIO_DEFAULT_CB_BUFFER = str(16 * MiB)
PROGRAM_CB_BUFFER = str(1 * MiB)  # the hint the program passes itself on one open

# The program under test: plain h5py and mpi4py, no iobo. After writing, it
# prints (rank 0, one JSON line) what the open file reports: its access
# plist, the actual I/O mode of its last write (ctypes on its own transfer
# plist) and the MPI-IO hints in effect, on the HDF5 file and on two plain
# MPI.File.Open calls (one passing no hints, one passing its own cb_buffer_size).
PROGRAM = textwrap.dedent(f"""
    import json, sys
    import numpy as np
    from mpi4py import MPI
    import h5py

    path = sys.argv[1]
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    n = {ITEMS}
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        per = n // size
        for i in range(3):
            ds = f.create_dataset(f"d{{i}}", (n,), dtype="f4")
            ds[rank * per:(rank + 1) * per] = np.arange(rank * per, (rank + 1) * per, dtype="f4") + i
        rows = 64 // size
        grid = f.create_dataset("grid", (64, 4096), dtype="f4")
        grid[rank * rows:(rank + 1) * rows] = rank
        f.create_dataset("small", (1000,), dtype="f4")
        f.create_dataset("scalar", (), dtype="f4")

        from iobo import stack  # ctypes helpers, only to report
        fapl = f.id.get_access_plist()  # every rank: it duplicates the communicator
        report = {{
            "alignment": list(fapl.get_alignment()),
            "meta_block_size": fapl.get_meta_block_size(),
            "sieve_buf_size": fapl.get_sieve_buf_size(),
            "mdc_initial_size": fapl.get_mdc_config().initial_size,
            **stack.coll_metadata(fapl),
            "actual_io_mode": stack.actual_io_mode(ds._dxpl),
            "hdf5_file_hints": stack.effective_hints(f),
        }}

    def hints_of_open(name, hints):
        info = MPI.Info.Create()
        for key, value in hints.items():
            info.Set(key, value)
        fh = MPI.File.Open(comm, path + name, MPI.MODE_CREATE | MPI.MODE_WRONLY, info)
        info.Free()
        got = fh.Get_info()
        out = dict(got.items())
        got.Free()
        fh.Close()
        return out

    report["plain_open_hints"] = hints_of_open(".plain", {{}})
    report["explicit_open_hints"] = hints_of_open(".explicit", {{"cb_buffer_size": "{PROGRAM_CB_BUFFER}"}})
    if rank == 0:
        print(json.dumps(report), flush=True)
""")

TUNED = {
    "alignment_threshold": 64 * KiB, "alignment_interval": 1 * MiB, "meta_block_size": 128 * KiB,
    "sieve_buf_size": 1 * MiB, "mdc_initial_size": 4 * MiB, "coll_metadata": True,
    "transfer_mode": "collective", "cb_buffer_size": 4 * MiB, "cb_nodes": 2, "cb_config_list": "*:*",
    "romio_cb_write": "enable", "romio_ds_write": "disable",
}


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "program.py"
    path.write_text(PROGRAM)
    return path


def run_program(program, scratch, variables, preload=True):
    """Run the program on RANKS ranks with ``variables``; (report, stderr, written file path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOBO_") and k not in ("LD_PRELOAD", "ROMIO_HINTS")}
    env.update(variables)
    if not preload:
        env.pop("LD_PRELOAD", None)
    out = scratch / "out.h5"
    run = subprocess.run(["mpiexec.mpich", "-n", str(RANKS), sys.executable, str(program), str(out)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"exit {run.returncode}\nstdout: {run.stdout}\nstderr: {run.stderr}"
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, run.stdout
    return json.loads(lines[0]), run.stderr, out


def check_data(path):
    """Every value the program wrote is in the file."""
    with h5py.File(path, "r") as f:
        for i in range(3):
            np.testing.assert_array_equal(f[f"d{i}"][...], np.arange(ITEMS, dtype="f4") + i)
        expected = np.repeat(np.arange(RANKS, dtype="f4"), 64 // RANKS)[:, None] * np.ones(4096, "f4")
        np.testing.assert_array_equal(f["grid"][...], expected)


def test_shim_applies_file_settings_hints_and_collective_transfer(library, program, scratch):
    config = IOConfig.from_values(TUNED)
    report, stderr, path = run_program(program, scratch, adapters.preload_env(config, report_prefix=scratch / "io"))

    # HDF5 file access settings, as the open file reports them
    assert report["alignment"] == [64 * KiB, 1 * MiB]
    assert report["meta_block_size"] == 128 * KiB
    assert report["sieve_buf_size"] == 1 * MiB
    assert report["mdc_initial_size"] == 4 * MiB
    assert report["coll_metadata_ops"] is True and report["coll_metadata_write"] is True
    # collective transfer, as HDF5 reports it on the program's own transfer plist
    assert report["actual_io_mode"] == "contiguous_collective"
    # MPI-IO hints in effect: on the HDF5 file and on plain MPI-IO opens
    for key in ("hdf5_file_hints", "plain_open_hints", "explicit_open_hints"):
        hints = report[key]
        assert hints["cb_buffer_size"] == str(4 * MiB), key  # iobo's value beats the program's own
        assert hints["cb_nodes"] == "2", key  # honoured by ROMIO only with cb_config_list *:*
        assert hints["cb_config_list"] == "*:*", key
        assert hints["romio_cb_write"] == "enable", key
        assert hints["romio_ds_write"] == "disable", key

    # independently, from the written file: datasets >= the threshold start on the interval
    with h5py.File(path, "r") as f:
        for name in ("d0", "d1", "d2", "grid"):
            offset = f[name].id.get_offset()
            assert offset is not None and offset % MiB == 0, (name, offset)
            assert f[name].chunks is None  # layout untouched: contiguous is the default
    check_data(path)
    assert "iobo_preload" not in stderr  # quiet unless asked

    # the shim's own report agrees: h5py's H5Dwrite calls moved the 4 MiB the program wrote
    shim = adapters.read_report(scratch / "io")
    assert shim["ranks"] == RANKS and shim["level"] == "hdf5" and shim["hdf5_linked"] == "dynamic"
    assert shim["bytes_written"] == 4 * MiB and shim["bytes_read"] == 0
    assert shim["effective"]["files"]["mpiio"][str(path)]["hints"] == report["hdf5_file_hints"]
    writes = 3 + 64 // RANKS  # per rank: d0..d2, and h5py broadcasts `grid[rows] = rank` one row a call
    assert shim["effective"]["transfer"]["write"]["modes"] == {"contiguous_collective": writes * RANKS}
    assert shim["not_applied"] == [] and shim["warnings"] == []
    # every rank says which host it ran on (one here), and the bytes per host add up
    host = socket.gethostname()
    assert [r["host"] for r in shim["per_rank"]] == [host] * RANKS
    assert shim["hosts"] == {host: {"ranks": list(range(RANKS)), "bytes_written": 4 * MiB, "bytes_read": 0}}


def test_without_preload_the_same_variables_change_nothing(library, program, scratch):
    variables = adapters.preload_env(IOConfig.from_values(TUNED))
    report, stderr, path = run_program(program, scratch, variables, preload=False)

    assert report["alignment"] == [1, 1]
    assert report["meta_block_size"] == 2 * KiB
    assert report["sieve_buf_size"] == 64 * KiB
    assert report["mdc_initial_size"] == 2 * MiB
    assert report["coll_metadata_ops"] is False and report["coll_metadata_write"] is False
    assert report["actual_io_mode"] == "no_collective"
    for key in ("hdf5_file_hints", "plain_open_hints"):
        assert report[key]["cb_buffer_size"] == ROMIO_DEFAULT_CB_BUFFER, key
        assert report[key]["romio_cb_write"] == "automatic", key
        assert report[key]["cb_nodes"] == "1", key
    assert report["explicit_open_hints"]["cb_buffer_size"] == PROGRAM_CB_BUFFER
    with h5py.File(path, "r") as f:
        offsets = [f[name].id.get_offset() for name in ("d0", "d1", "d2", "grid")]
    assert any(offset % MiB for offset in offsets), offsets
    check_data(path)


def test_chunked_layout_row_major_within_the_dataset(library, program, scratch):
    config = IOConfig.from_values({"layout": "chunked", "chunk_size": 256 * KiB, "transfer_mode": "collective"})
    variables = {**adapters.preload_env(config), "IOBO_PRELOAD_VERBOSE": "1"}
    report, stderr, path = run_program(program, scratch, variables)

    with h5py.File(path, "r") as f:
        for name in ("d0", "d1", "d2"):
            assert f[name].chunks == (65536,), name  # 256 KiB of float32
        assert f["grid"].chunks == (16, 4096)  # leading dimension shrunk, rows kept whole
        assert f["small"].chunks == (1000,)  # never larger than the dataset
        assert f["scalar"].chunks is None
    assert report["actual_io_mode"] == "chunk_collective"
    check_data(path)
    # the verbose log: one line per file (not per rank), one per dataset
    lines = [line for line in stderr.splitlines() if line.startswith("iobo_preload:")]
    assert sum("H5Fcreate" in line for line in lines) == 1, stderr
    assert sum("transfer_mode=collective" in line for line in lines) == 1, stderr
    assert "iobo_preload: H5Dcreate2 grid: layout=chunked chunk_shape=[16 4096]" in lines, stderr
    assert any("H5Dcreate2 scalar: layout left as the program set it" in line for line in lines), stderr


def test_chunk_size_defaults_to_the_space_default(library, program, scratch):
    config = IOConfig.from_values({"layout": "chunked"})  # chunk_size at its default: not exported
    assert "IOBO_CHUNK_SIZE" not in config.env()
    _, _, path = run_program(program, scratch, adapters.preload_env(config))
    with h5py.File(path, "r") as f:
        assert f["d0"].chunks == (ITEMS,)  # 1 MiB: the whole dataset
        assert f["grid"].chunks == (64, 4096)


def test_malformed_variable_warns_and_is_ignored(library, program, scratch):
    variables = {**adapters.preload_env(IOConfig.from_values({"alignment_threshold": 64 * KiB})),
                 "IOBO_ALIGNMENT_INTERVAL": "abc"}
    report, stderr, path = run_program(program, scratch, variables)

    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert warnings == ["iobo_preload: warning: ignoring IOBO_ALIGNMENT_INTERVAL='abc': not a JSON integer; "
                        "allowed: a JSON integer >= 1 (bytes), or null"], stderr
    assert report["alignment"] == [64 * KiB, 1]  # the valid variable applied, the program's interval kept
    check_data(path)


def test_preload_env_puts_the_shim_first_and_carries_the_config(library, monkeypatch, tmp_path):
    monkeypatch.setenv("LD_PRELOAD", "/opt/other/libtool.so")
    config = IOConfig.from_values({"cb_buffer_size": 4 * MiB, "layout": "chunked"})
    env = adapters.preload_env(config, tmp_path / "romio-hints")
    assert env["LD_PRELOAD"] == f"{library}:/opt/other/libtool.so"
    assert env["ROMIO_HINTS"] == str(tmp_path / "romio-hints")
    assert {k: v for k, v in env.items() if k.startswith("IOBO_")} == {
        **config.env(), "IOBO_PRELOAD_EXCLUDE": ":".join(adapters.interpreter_directories())}
    assert "ROMIO_HINTS" not in adapters.preload_env(config)


def test_a_python_programs_imports_are_not_its_io(library, tmp_path):
    """The shim does not count files under iobo's interpreter directories (IOBO_PRELOAD_EXCLUDE): a Python program
    reads hundreds of modules as it starts; its own file is all it writes and reads."""
    script = ("from mpi4py import MPI; import json, email.parser, sys\n"
              "open(sys.argv[1], 'wb').write(b'x' * 1000); assert open(sys.argv[1], 'rb').read() == b'x' * 1000\n")
    for exclude in (True, False):
        env = {k: v for k, v in os.environ.items() if not k.startswith("IOBO_") and k != "LD_PRELOAD"}
        env.update(adapters.preload_env(IOConfig.from_values({}), report_prefix=tmp_path / f"r{exclude}"))
        if not exclude:
            del env["IOBO_PRELOAD_EXCLUDE"]
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        posix = adapters.read_report(tmp_path / f"r{exclude}")["levels"]["posix"]
        assert posix["write"]["bytes"] == 1000
        if exclude:
            assert posix["read"]["bytes"] == 1000 and posix["files_opened"] == 2  # its file, opened twice
        else:  # what the exclusion removes: the interpreter's own reads
            assert posix["read"]["bytes"] > 100_000 and posix["files_opened"] > 50


def test_preload_env_paths_are_absolute(library, monkeypatch, tmp_path):
    """The program may run elsewhere: ROMIO_HINTS and the report prefix are made absolute."""
    monkeypatch.chdir(tmp_path)
    env = adapters.preload_env(IOConfig.from_values({"cb_buffer_size": 4 * MiB}), "romio-hints", report_prefix="io")
    assert env["ROMIO_HINTS"] == str(tmp_path / "romio-hints")
    assert env["IOBO_PRELOAD_REPORT"] == str(tmp_path / "io")


def test_missing_library_names_the_build_command(monkeypatch, tmp_path):
    monkeypatch.setattr(adapters, "ADAPTERS_DIR", tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no shim of `iobo shim build` either
    monkeypatch.delenv("IOBO_PRELOAD_LIBRARY", raising=False)
    with pytest.raises(ConfigError, match=r"not built; build it with: make -C .* adapters/libiobo_preload.so"):
        adapters.preload_library()

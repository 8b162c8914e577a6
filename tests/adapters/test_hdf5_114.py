"""The shim against HDF5 1.14 or later, when one is installed here: ``IOBO_TEST_HDF5=PREFIX`` names a parallel
HDF5 >= 1.14 built with MPICH (Debian has 1.10.8 only, and CI cannot fetch one: skipped without it; how it was built
and checked by hand: adapters/README.md, "HDF5 1.14").

``iobo shim build --hdf5 PREFIX`` compiles the shim with its 1.14 wrappers, and tests/adapters/programs/hdf5_114.c,
which creates, writes and reads only through 1.14's new entry points (H5Fcreate_async, H5Dcreate_async,
H5Dwrite_multi, H5Dwrite_async, H5Dread_multi, H5Dclose_async, H5Fclose_async), gets every setting: what HDF5 tells
the program itself (its access list's alignment, its datasets' layouts, the I/O mode on its transfer list) and the
shim's accounting of its bytes."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from iobo import adapters, shim
from iobo.config import IOConfig
from iobo.space import KiB, MiB, io_stack_space

ROOT = Path(__file__).resolve().parents[2]
PREFIX = os.environ.get("IOBO_TEST_HDF5")
RANKS, NDSETS = 2, 4  # hdf5_114.c: 3 datasets in H5Dwrite_multi, 1 in H5Dwrite_async, 1 MiB per rank each

pytestmark = pytest.mark.skipif(not PREFIX, reason="IOBO_TEST_HDF5 names no HDF5 >= 1.14 installation prefix")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The shim built against $IOBO_TEST_HDF5 in a fresh cache, and hdf5_114.c compiled against it."""
    out = tmp_path_factory.mktemp("hdf5-114")
    info = shim.build(mpicc="mpicc.mpich", hdf5=PREFIX, cache=out / "cache" / "iobo" / "shim")
    major, minor = (int(n) for n in info["hdf5"]["version"].split(".")[:2])
    assert (major, minor) >= (1, 14), info["hdf5"]
    program = out / "hdf5_114"
    command = ["mpicc.mpich", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'tests/adapters/programs'}", *info["cflags"],
               "-o", str(program), str(ROOT / "tests/adapters/programs/hdf5_114.c"), *info["libs"]]
    build = subprocess.run(command, capture_output=True, text=True, cwd=out, timeout=300)
    assert build.returncode == 0, build.stderr
    assert shim.linked_libraries(program)["hdf5"].path == info["hdf5"]["path"]
    return {"info": info, "program": program, "cache": out / "cache"}


def test_hdf5_114_calls_get_the_settings_and_are_measured(built, scratch, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(built["cache"]))  # the shim for this HDF5 is found for the program
    monkeypatch.delenv("IOBO_PRELOAD_LIBRARY", raising=False)
    space = io_stack_space()
    config = IOConfig({**space.default(), "alignment_threshold": 4 * KiB, "alignment_interval": 64 * KiB,
                       "layout": "chunked", "chunk_size": 256 * KiB, "transfer_mode": "collective"}, space)
    env = adapters.program_environment(config, scratch / "hints", scratch / "io", program=built["program"])
    assert env["LD_PRELOAD"].split(":")[0] == built["info"]["library"]
    done = subprocess.run(["mpiexec.mpich", "-n", str(RANKS), str(built["program"]), str(scratch / "a.h5")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["version"] == built["info"]["hdf5"]["version"]
    assert seen["alignment"] == [4 * KiB, 64 * KiB]  # set at H5Fcreate_async
    assert seen["layouts"] == {f"d{i}": ["chunked", 256 * KiB // 4] for i in range(NDSETS)}  # at H5Dcreate_async
    assert seen["actual_io_mode"] == 2  # H5D_MPIO_CHUNK_COLLECTIVE: H5Dwrite_multi made collective

    report = adapters.read_report(scratch / "io")
    assert report["not_applied"] == []
    assert all(counts["in_effect"] == counts["considered"] > 0 for counts in report["applied"].values())
    assert report["level"] == "hdf5"
    assert report["bytes_written"] == seen["bytes_written"] == RANKS * NDSETS * MiB
    assert report["bytes_read"] == seen["bytes_read"] == RANKS * (NDSETS - 1) * MiB
    hdf5 = report["levels"]["hdf5"]
    assert hdf5["write"]["calls"] == RANKS * 2 and hdf5["read"]["calls"] == RANKS  # multi + async; multi
    assert report["effective"]["transfer"]["write"]["modes"] == {"chunk_collective": RANKS * 2}

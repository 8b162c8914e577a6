"""``iobo extract --drop F`` empties a function whose results reach the I/O only through a log. Real libclang,
real h5pcc builds, real MPI runs under the shim.

- logged.c (tests/extract): Jacobi sweeps whose residual rank 0 logs every
  step with POSIX writes, HDF5 checkpoints every EVERY steps. Without
  ``--drop`` the slice keeps the sweep (the log reads it); with ``--drop
  sweep`` the sweep's body is ``{ (void)grid; ... return 0; }``, its call stays, and the
  kernel makes the program's I/O (iobo check's thresholds) at the
  extraction's input and at another size, step count and rank count, without
  the sweeps' time;
- when the solve decides how much is written (a tolerance the residual must
  reach), the emptied kernel's I/O differs and the check names the rows;
- a name the sources do not define, and ``main``, are refused before any
  kernel source is written, with the names the sources do define;
- a loop whose body is empty (``for (...; r++, first += rows);``) keeps its
  ``;`` (blanked, the next statement became its body: MACSio's timer
  reduction did that and lost its reduced timers).
"""

import re
import subprocess
from pathlib import Path

import pytest

from iobo.cli import main
from iobo.extract.run import run_once
from iobo.replay.check import failures
from iobo.replay.signature import compare, render, signature
from support.programs import view_marks

LOGGED = Path(__file__).with_name("logged.c")


def extract(capsys, scratch, name, *words):
    kernel_dir = scratch / name
    code = main(["extract", str(LOGGED), "-o", str(kernel_dir), *words, "--", "-Wall", "-Wextra", "-Werror", "-lm"])
    out = capsys.readouterr()
    assert code == 0, out.err + out.out
    return kernel_dir, out.out


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    binary = tmp_path_factory.mktemp("logged") / "logged"
    subprocess.run(["h5pcc.mpich", "-shlib", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(LOGGED), "-lm"],
                   check=True, cwd=binary.parent)  # h5pcc leaves logged.o in its working directory
    return binary


def test_without_drop_the_log_keeps_the_solve(library, scratch, capsys):
    kernel_dir, out = extract(capsys, scratch, "whole", "--no-build")
    assert view_marks(kernel_dir)["change += fabs(next[i * COLS + j] - grid[i * COLS + j]);"] == "+"
    assert "emptied" not in out, out


def test_a_dropped_solver_leaves_the_programs_io_without_its_time(library, program, scratch, capsys):
    kernel_dir, out = extract(capsys, scratch, "dropped", "--drop", "sweep")
    assert "note: " in out and "sweep: emptied on request (--drop)" in out, out
    assert re.search(r"functions: \d+ kept, \d+ dropped, 1 emptied \(--drop\)", out), out
    kernel = (kernel_dir / "logged.c").read_text()
    assert kernel.count("\n") == LOGGED.read_text().count("\n")  # line for line
    body = kernel.split("static double sweep(double *grid, double *next, int rows)\n", 1)[1].split("\n}\n", 1)[0]
    assert body.split() == "{ (void)grid; (void)next; (void)rows; return 0;".split(), body
    assert "double change = sweep(grid, next, rows), total = 0.0;" in kernel  # the call stays and does nothing
    assert "for (int r = 0; r < rank; r++, first += (hsize_t)rows);" in kernel  # an empty body stays ';'
    view = view_marks(kernel_dir)
    assert view["change += fabs(next[i * COLS + j] - grid[i * COLS + j]);"] == "-"
    assert view["write(log, line, (size_t)length);"] == "+"
    for args, ranks in (("{workdir}/run 12 4 512", 2), ("{workdir}/run 9 3 256", 3)):
        ran = run_once(f"{program} {args}", ranks)
        emptied = run_once(f"{kernel_dir / 'kernel'} {args}", ranks)
        rows = compare(signature(ran["report"]), signature(emptied["report"]))
        assert failures(rows) == [], f"{args}\n{render(rows)}"
        found = {row["what"]: row["kernel"] for row in rows}
        assert found["hdf5 write bytes"] > 0 and found["posix write calls"] > 0, render(rows)
    heavy = "{workdir}/run 400 200 2048"  # 400 sweeps of 2048 x 1024 per rank, 2 checkpoints
    ran, emptied = run_once(f"{program} {heavy}", 2), run_once(f"{kernel_dir / 'kernel'} {heavy}", 2)
    ratio = ran["wall_seconds"] / emptied["wall_seconds"]
    print(f"program {ran['wall_seconds']:.2f} s, emptied kernel {emptied['wall_seconds']:.2f} s: {ratio:.1f}x")
    assert ratio >= 5, (ran["wall_seconds"], emptied["wall_seconds"])


def test_when_the_solve_decides_the_io_the_check_shows_the_emptied_kernel_differs(library, program, scratch,
                                                                                  capsys):
    kernel_dir, _ = extract(capsys, scratch, "dropped", "--drop", "sweep")
    args = "{workdir}/run 12 4 256 1e-300"  # the program never gets there; the emptied sweep's 0 does at step 1
    rows = compare(signature(run_once(f"{program} {args}", 2)["report"]),
                   signature(run_once(f"{kernel_dir / 'kernel'} {args}", 2)["report"]))
    failed = {failure.split(":")[0] for failure in failures(rows)}
    assert {"hdf5 write bytes", "hdf5 write calls", "posix write calls"} <= failed, render(rows)


@pytest.mark.parametrize("name, message", [
    ("solve", "--drop solve: no such function is defined in the sources (only a function whose body is in SOURCES "
              "can be emptied); defined there: checkpoint, sweep"),
    ("main", "main, constructors and destructors cannot be emptied"),
])
def test_a_function_that_cannot_be_emptied_is_refused(scratch, capsys, name, message):
    code = main(["extract", str(LOGGED), "-o", str(scratch / "refused"), "--drop", name, "--no-build"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err, err
    assert not (scratch / "refused" / "logged.c").exists()

"""iobo extract cuts a C program's I/O kernel from its source: real libclang, real h5pcc builds, 2 real MPI ranks.

On the test programs checkpoint.c (Jacobi sweeps between HDF5 checkpoints)
and halo.c (a collective write from a buffer with ghost cells): the kernel
builds and runs through the command line, its I/O signature (the shim's
report of one run) equals the program's within iobo check's thresholds at the
extraction's input and at other sizes, counts and rank counts, the sweeps are dropped (the
view marks them, the kernel is much faster where the program computes), and a
source that does not parse is refused with its file and line.
"""

import json
import re
import subprocess
from pathlib import Path

import pytest

from iobo.cli import main
from iobo.extract.run import run_once
from iobo.replay.check import failures
from iobo.replay.signature import compare, render, signature
from support.programs import SOURCES, view_marks

RANKS = 2
MIXED = Path(__file__).with_name("mixed.c")


def extracted(name, scratch, capsys, run_args):
    """Extract tests/adapters/programs/<name>.c into scratch/<name>-kernel through the CLI, built and run once."""
    kernel_dir = scratch / f"{name}-kernel"
    code = main(["extract", str(SOURCES / f"{name}.c"), "-o", str(kernel_dir), "--run", run_args, "--ranks",
                 str(RANKS), "--", "-Wall", "-Werror"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "ran: " in out.out, out.out
    return kernel_dir, out.out


def assert_same_io(program, kernel, args, level="hdf5", ranks=RANKS):
    """The program and the kernel, each run once under the shim with ``args`` on ``ranks``: no signature row
    beyond the thresholds (bytes 0.1%, calls 2% per level; the same datasets and layouts), and bytes written at
    ``level``."""
    rows = compare(signature(run_once(f"{program} {args}", ranks)["report"]),
                   signature(run_once(f"{kernel} {args}", ranks)["report"]))
    assert failures(rows) == [], f"{args}\n{render(rows)}"
    written = {row["what"]: row["kernel"] for row in rows}
    assert written[f"{level} write bytes"] > 0, render(rows)


def test_the_checkpoint_kernel_does_the_programs_io_at_two_inputs(library, programs, scratch, capsys):
    kernel_dir, out = extracted("checkpoint", scratch, capsys, "{workdir}/ck 2 4 4 5")
    counts = re.search(r"statements: (\d+) kept, (\d+) dropped; functions: (\d+) kept, (\d+) dropped", out)
    assert counts and int(counts[2]) > 0 and counts[4] == "1", out  # sweep() dropped whole
    assert "hdf5: 16,777,216 B in 16 writes" in out, out  # 2 checkpoints x 2 ranks x 4 slabs of 1 MiB
    kernel = kernel_dir / "kernel"
    assert_same_io(programs["checkpoint"], kernel, "{workdir}/ck 2 4 4 5")
    assert_same_io(programs["checkpoint"], kernel, "{workdir}/ck 4 2 8 3 collective")  # unseen: sizes, count, mode
    assert_same_io(programs["checkpoint"], kernel, "{workdir}/ck 3 1 2 3", ranks=3)  # and ranks


def test_the_halo_kernel_does_the_programs_io_at_two_inputs(library, programs, scratch, capsys):
    kernel_dir, _ = extracted("halo", scratch, capsys, "{workdir}/halo.h5 500 1000")
    marks = view_marks(kernel_dir)
    assert marks["field[i] = (float)(rank + i % 97);"] == "-", marks
    assert marks["herr_t status = H5Dwrite(dset, H5T_NATIVE_FLOAT, mem_space, file_space, dxpl, field);"] == "+"
    assert_same_io(programs["halo"], kernel_dir / "kernel", "{workdir}/halo.h5 500 1000")
    assert_same_io(programs["halo"], kernel_dir / "kernel", "{workdir}/halo.h5 300 700", ranks=3)


def test_the_view_marks_the_sweeps_dropped_and_the_io_kept(scratch, capsys):
    kernel_dir = scratch / "checkpoint-view"
    assert main(["extract", str(SOURCES / "checkpoint.c"), "-o", str(kernel_dir), "--no-build"]) == 0
    capsys.readouterr()
    marks = view_marks(kernel_dir)
    assert marks["for (int s = 0; s < sweeps; s++)"] == "-", marks
    assert marks["checksum += sweep(grid, next, rows);"] == "-", marks
    assert marks["static double sweep(double *grid, double *next, hsize_t rows)"] == "-", marks
    assert marks["for (int s = 0; s < slabs; s++) {"] == "+", marks
    assert marks["hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);"] == "+", marks
    assert marks["double *grid = calloc(rows * COLS, sizeof *grid), *next = calloc(rows * COLS, sizeof *next);"] \
        == "+", marks  # the written buffer keeps its allocation
    kernel = (kernel_dir / "checkpoint.c").read_text()
    source = (SOURCES / "checkpoint.c").read_text()
    assert kernel.count("\n") == source.count("\n")  # line for line
    assert "sweep(" not in kernel and "H5Dwrite(" in kernel


def test_the_kernel_skips_the_computation(library, programs, scratch, capsys):
    """At 2,000 sweeps between checkpoints the program computes for seconds; its kernel only writes."""
    kernel_dir, _ = extracted("checkpoint", scratch, capsys, "{workdir}/ck 2 1 4 1")
    args = "{workdir}/ck 2 1 4 2000"
    program = run_once(f"{programs['checkpoint']} {args}", RANKS)
    kernel = run_once(f"{kernel_dir / 'kernel'} {args}", RANKS)
    ratio = program["wall_seconds"] / kernel["wall_seconds"]
    print(f"program {program['wall_seconds']:.2f} s, kernel {kernel['wall_seconds']:.2f} s: {ratio:.1f}x")
    assert ratio >= 5, (program["wall_seconds"], kernel["wall_seconds"])
    rows = compare(signature(program["report"]), signature(kernel["report"]))
    assert failures(rows) == [], render(rows)


def test_a_source_that_does_not_parse_is_refused_with_its_line(scratch, capsys):
    bad = scratch / "bad.c"
    bad.write_text("#include <mpi.h>\nint main(void)\n{\n    MPI_Init(NULL, NULL)\n    return undeclared;\n}\n")
    code = main(["extract", str(bad), "-o", str(scratch / "bad-kernel")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{bad}:" in err and "does not parse" in err and "iobo record" in err, err


@pytest.mark.parametrize("words, message", [([], "needs the program's C sources"),
                                            (["missing.c"], "sources not found")])
def test_missing_sources_are_refused(scratch, capsys, words, message):
    assert main(["extract", *words, "-o", str(scratch / "k")]) == 2
    assert message in capsys.readouterr().err


def test_input_reads_offsets_and_posix_writes_are_kept_and_the_relaxation_dropped(library, scratch, capsys):
    """mixed.c: sizes read with fscanf into a struct, MPI-IO dumps at offsets a function computes, a POSIX log;
    the kernel drops relax(), the norm (an else branch) and the cell initialisation, and does the same I/O at the
    extraction's input and at another."""
    program = scratch / "mixed"
    subprocess.run(["mpicc.mpich", "-Wall", "-Wextra", "-Werror", "-o", str(program), str(MIXED)], check=True)
    kernel_dir = scratch / "mixed-kernel"
    (scratch / "in.txt").write_text("4096 400 100\n")
    (scratch / "in2.txt").write_text("1000 90 30\n")
    code = main(["extract", str(MIXED), "-o", str(kernel_dir), "--run",
                 f"{scratch / 'in.txt'} {{workdir}}/dumps.bin {{workdir}}/log.txt", "--", "-Wall", "-Wextra",
                 "-Werror"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "mpiio: 262,144 B in 8 writes" in out.out, out.out  # 4 dumps x 2 ranks x 4096 doubles
    marks = view_marks(kernel_dir)
    for dropped in ("relax(&g);", "norm += g.cells[1];", "g.cells[i] = i == 0 ? 100.0 + rank : 0.0;",
                    "static void relax(grid_t *g)"):
        assert marks[dropped] == "-", (dropped, marks)
    for kept in ("if (!in || fscanf(in, \"%d %d %d\", &g->n, &g->steps, &g->every) != 3) {",
                 "return ((MPI_Offset)dump * ranks + rank) * cells * (MPI_Offset)sizeof(double);",
                 "g.cells = malloc((size_t)g.n * sizeof(double));", "dumps++;",
                 "int length = snprintf(line, sizeof line, \"dumps %d\\n\", dumps);"):
        assert marks[kept] == "+", (kept, marks)
    kernel_lines = (kernel_dir / "mixed.c").read_text().split("\n")
    assert len(kernel_lines) == len(MIXED.read_text().split("\n"))
    assert kernel_lines[67].strip() == "} else {" and kernel_lines[68].strip() == "", kernel_lines[66:71]
    for given in ("in.txt", "in2.txt"):
        assert_same_io(program, kernel_dir / "kernel", f"{scratch / given} {{workdir}}/dumps.bin {{workdir}}/log.txt",
                       level="mpiio")


def test_the_flags_come_from_a_compilation_database(scratch, capsys):
    """A source that needs an include directory and a macro parses with its compile_commands.json entry (relative
    -I made absolute against the entry's directory) and not without."""
    (scratch / "inc").mkdir()
    (scratch / "inc" / "sizes.h").write_text("#define CELLS 16\n")
    source = scratch / "tiny.c"
    source.write_text('#include <mpi.h>\n#include <unistd.h>\n#include "sizes.h"\nint main(int argc, char **argv)\n'
                      '{\n    MPI_Init(&argc, &argv);\n    char cells[CELLS * SCALE] = {0};\n'
                      '    write(1, cells, sizeof cells);\n    MPI_Finalize();\n    return 0;\n}\n')
    database = scratch / "compile_commands.json"
    database.write_text(json.dumps([{"directory": str(scratch), "file": "tiny.c",
                                     "command": "mpicc -Iinc -DSCALE=2 -c tiny.c -o tiny.o"}]))
    assert main(["extract", str(source), "-o", str(scratch / "k1"), "--no-build"]) == 2
    assert "does not parse" in capsys.readouterr().err
    assert main(["extract", str(source), "-o", str(scratch / "k2"), "--compile-commands", str(database)]) == 0
    out = capsys.readouterr().out
    assert "statements: 5 kept, 0 dropped" in out, out
    assert (scratch / "k2" / "kernel").is_file()


SUMS = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    long mine = atol(argv[2]) * (rank + 1);
    if (rank == 0) {
        long total = mine;
        for (int p = 1; p < ranks; p++) {
            long theirs;
            MPI_Recv(&theirs, 1, MPI_LONG, p, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += theirs;
        }
        char *bytes = calloc((size_t)total, 1);
        int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0 || write(fd, bytes, (size_t)total) != total || close(fd) != 0)
            MPI_Abort(MPI_COMM_WORLD, 2);
    } else {
        MPI_Send(&mine, 1, MPI_LONG, 0, 7, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
"""


def test_a_kept_receive_keeps_the_other_ranks_send(library, scratch, capsys):
    """Rank 0 writes as many bytes as the ranks tell it in messages: its receive is kept (the write's size needs
    it), so the send on the other ranks must be too, though nothing on their side reads what it sends."""
    source = scratch / "sums.c"
    source.write_text(SUMS)
    code = main(["extract", str(source), "-o", str(scratch / "sums-kernel"), "--run", "{workdir}/out 1000",
                 "--timeout", "60"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "posix: 3,000 B in 1 writes" in out.out, out.out  # 1000 x 1 + 1000 x 2
    assert "MPI_Send(&mine, 1, MPI_LONG, 0, 7, MPI_COMM_WORLD);" in (scratch / "sums-kernel" / "sums.c").read_text()


def test_a_call_through_a_function_pointer_keeps_the_pointer_and_what_it_may_read(scratch, capsys):
    source = scratch / "pointer.c"
    source.write_text("#include <fcntl.h>\n#include <mpi.h>\n#include <stdlib.h>\n#include <unistd.h>\n"
                      "typedef ssize_t (*writer_t)(int, const void *, size_t);\n"
                      "int main(int argc, char **argv)\n{\n    MPI_Init(&argc, &argv);\n    writer_t put = write;\n"
                      "    double *cells = calloc(1000, sizeof *cells);\n    for (int i = 0; i < 1000; i++)\n"
                      "        cells[i] = i * 0.5;\n    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);\n"
                      "    put(fd, cells, 1000 * sizeof *cells);\n    close(fd);\n    MPI_Finalize();\n"
                      "    return 0;\n}\n")
    code = main(["extract", str(source), "-o", str(scratch / "pointer-kernel"), "--", "-Wall", "-Werror"])
    out = capsys.readouterr()
    assert code == 0, out.err  # the previous slice dropped put's declaration: undefined reference to `put'
    assert "statements: 10 kept, 0 dropped" in out.out and "a call through a function pointer" in out.out, out.out


def test_the_extracted_kernel_is_checked_and_tuned_for_its_program(library, programs, scratch, monkeypatch, capsys):
    """iobo tune --via-kernel --kernel-command with the kernel iobo extract built (issue 29 item 4): the check
    against the program passes (its table printed and stored), the kernel is tuned as its own study (its trials
    run the kernel, not a replay) and its recommendation, unless it is the default, is re-measured on the program
    in the program's study. Two knobs that change little here, so the outcome is noise either way."""
    monkeypatch.chdir(scratch)
    kernel_dir, _ = extracted("checkpoint", scratch, capsys, "{workdir}/ck 2 1 4 1")
    args = "{workdir}/ck 3 1 4 300 collective"
    storage = f"sqlite:///{scratch / 'study.db'}"
    code = main(["tune", "--command", f"{programs['checkpoint']} {args}", "--via-kernel",
                 "--kernel-command", f"{kernel_dir / 'kernel'} {args}", "--ranks", str(RANKS), "--trials", "6",
                 "--confirm", "5", "--runner", "local", "--storage", storage, "--workdir", str(scratch / "work"),
                 "--study", "ck", "--seed", "1", "--no-minimize", "--params", "meta_block_size,romio_ds_write"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "PASS: bytes per level within 0.1%, operation counts within 2%, same datasets and layouts; saved " \
           f"{scratch / 'work' / 'kernel.check.json'}" in out, out
    assert not list((scratch / "work").glob("*.trace.json"))  # nothing recorded
    import optuna

    from iobo import trials

    kernel_study = optuna.load_study(study_name="ck-kernel", storage=storage)
    assert len(trials.tuning_trials(kernel_study)) == 6
    assert all(str(kernel_dir / "kernel") in t.user_attrs["command"] for t in trials.tuning_trials(kernel_study))
    assert "on the program: nothing to confirm" in out or (
        "on the program (study 'ck'): re-measuring the default and the kernel's" in out
        and "speedup on the program: " in out), out
    assert "time: check " in out and ", kernel tuning " in out

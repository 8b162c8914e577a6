"""iobo extract's options: ``--reduce-loops K`` (1 in K of a loop's I/O, the counts scaled back) and ``--redirect
DIR`` (the files the kernel creates go under DIR). Real libclang, real h5pcc/mpicc builds, real MPI runs on 2 and 3
ranks under the shim.

- checkpoint.c with ``--reduce-loops 4``: the checkpoint loop's I/O runs for
  checkpoints 0, 4, 8, ... (the program's own names), the kernel counts the
  runs reached and made, and its signature times reached/made, and the one
  extrapolated from a second run, equal the program's within iobo check's
  thresholds (bytes 0.1%, calls 2% per level) at N = 8, at N = 7 (not a
  multiple of 4) and at N = 10 on 3 ranks;
- mixed.c (a dump every EVERY steps, a counter of dumps beside it): only the
  dump is gated, the counter keeps counting, so the kept dump is at its own
  offset and the log says every dump; the extrapolated signature equals the
  program's (the file opens and the log outside the gate counted once);
- a loop whose next offset comes from what its write returned is not reduced
  (the note says why) and does all of its I/O;
- ``--redirect``: every file checkpoint.c and mixed.c write is under DIR
  (``find``; ``h5ls``/``h5dump -p`` read a checkpoint there), none at its own
  path, and mixed.c's input is read where it is.
"""

import json
import math
import os
import subprocess
from pathlib import Path

from iobo.cli import main
from iobo.extract.run import run_once, run_scaled
from iobo.replay.check import failures
from iobo.replay.signature import compare, render, signature
from support.programs import SOURCES, h5dump_layouts

MIXED = Path(__file__).with_name("mixed.c")


def cli(capsys, *words):
    code = main(["extract", *map(str, words)])
    out = capsys.readouterr()
    assert code == 0, out.err + out.out
    return out.out


def errors(rows):
    """The largest relative error of the bytes rows and of the calls rows (per level and direction)."""
    worst = {}
    for row in rows:
        kind = row["what"].rsplit(" ", 1)[-1]
        if kind in ("bytes", "calls") and row["error"] is not None:
            worst[kind] = max(worst.get(kind, 0.0), row["error"])
    return worst


def files_under(directory):
    found = subprocess.run(["find", str(directory), "-type", "f"], capture_output=True, text=True, check=True)
    return sorted(Path(line) for line in found.stdout.split())


def test_reduced_checkpoints_scale_back_to_the_programs_io(library, programs, scratch, capsys):
    kernel_dir = scratch / "reduced"
    out = cli(capsys, SOURCES / "checkpoint.c", "-o", kernel_dir, "--reduce-loops", 4, "--run",
              "{workdir}/ck 8 1 2 1", "--", "-Wall", "-Werror")
    assert "reduced: checkpoint.c:63 (I/O from line 72): 1 in 4 runs of that I/O" in out, out
    assert "I/O from checkpoint.c:72: reached 16 times on all ranks, run 4" in out, out  # 8 checkpoints x 2 ranks
    # 8 checkpoints x 2 ranks x 1 MiB in 2 slabs, as 2 of them written (4 MiB in 8 writes) times 4
    assert "hdf5: 16,777,216 B in 32 writes, 0 B in 0 reads, 16 files (4,194,304 B in 8 writes" in out, out
    kernel = (kernel_dir / "checkpoint.c").read_text()
    assert kernel.count("\n") == (SOURCES / "checkpoint.c").read_text().count("\n")
    assert "{ if (iobo_kernel_keep(0)) { hid_t file = H5Fcreate(path," in kernel
    for args, ranks in (("{workdir}/ck 8 1 2 1", 2), ("{workdir}/ck 7 2 4 1 collective", 2),
                        ("{workdir}/ck 10 1 2 1", 3)):
        checkpoints = int(args.split()[1])
        program = signature(run_once(f"{programs['checkpoint']} {args}", ranks)["report"])
        reduced = run_scaled(f"{kernel_dir / 'kernel'} {args}", ranks)
        made = math.ceil(checkpoints / 4)
        assert reduced["loops"] == {"checkpoint.c:72": {"gate": 0, "executed": checkpoints * ranks,
                                                        "kept": made * ranks}}
        assert reduced["scale"] == checkpoints / made
        assert reduced["signature"]["levels"]["hdf5"]["files"] == made * ranks  # the I/O of 1 in 4 checkpoints
        assert reduced["how"].startswith("extrapolated per gate"), reduced["how"]
        for how, rows in (("x reached/run", compare(program, reduced["signature"], reduced["scale"])),
                          ("extrapolated", compare(program, reduced["estimate"]))):
            worst = errors(rows)
            print(f"{args} on {ranks} ranks, {how} (x {reduced['scale']:g}): bytes {100 * worst['bytes']:.4f}%, "
                  f"calls {100 * worst['calls']:.4f}%")
            assert failures(rows) == [], f"{args}, {how}\n{render(rows)}"


def test_a_counter_beside_the_io_keeps_counting(library, scratch, capsys):
    """mixed.c dumps every EVERY steps and counts its dumps beside the write: the gate holds the write only, so
    with 1 in 2 the kept dumps 0 and 2 are at their own offsets and the log still says 4 dumps."""
    program = scratch / "mixed"
    subprocess.run(["mpicc.mpich", "-Wall", "-Wextra", "-Werror", "-o", str(program), str(MIXED)], check=True)
    (scratch / "in.txt").write_text("4096 400 100\n")
    (scratch / "run").mkdir()
    args = f"{scratch / 'in.txt'} {scratch / 'run' / 'dumps.bin'} {scratch / 'run' / 'log.txt'}"
    out = cli(capsys, MIXED, "-o", scratch / "mixed-kernel", "--reduce-loops", 2, "--run", args, "--", "-Wall",
              "-Wextra", "-Werror")
    assert "reduced: mixed.c:62 (I/O from line 65): 1 in 2 runs of that I/O" in out, out
    assert "I/O from mixed.c:65: reached 8 times on all ranks, run 4" in out, out
    dump = 2 * 4096 * 8  # both ranks' cells
    assert (scratch / "run" / "dumps.bin").stat().st_size == 3 * dump  # dumps 0 and 2 written, at dump 2's offset
    assert (scratch / "run" / "log.txt").read_text() == "dumps 4\n"
    theirs = signature(run_once(f"{program} {args}", 2)["report"])
    ours = run_scaled(f"{scratch / 'mixed-kernel' / 'kernel'} {args}", 2)
    assert ours["scale"] == 2.0 and ours["how"].startswith("extrapolated per gate"), ours["how"]
    rows = compare(theirs, ours["estimate"])
    worst = errors(rows)
    print(f"mixed, extrapolated: bytes {100 * worst['bytes']:.4f}%, calls {100 * worst['calls']:.4f}%")
    assert failures(rows) == [], render(rows)
    # the factor alone scales the file opens and the log outside the gate too
    factor = {row["what"]: row for row in compare(theirs, ours["signature"], ours["scale"])}
    print("mixed, x 2:", {what: (row["program"], row["kernel"]) for what, row in factor.items()
                          if what.startswith(("mpiio", "posix")) and row["error"]})
    assert factor["mpiio write bytes"]["error"] == 0 and factor["mpiio files"]["kernel"] == 4


TWO_OUTPUTS = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int steps = atoi(argv[3]), n = 1 << 16, dumps = 0;
    char *cells = calloc((size_t)n, 1), name[4096], line[64];
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    snprintf(name, sizeof name, "%s.%d", argv[2], rank);
    int log = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int step = 1; step <= steps; step++) {
        if (step % 2 == 0) {
            MPI_File_write_at_all(fh, ((MPI_Offset)dumps * ranks + rank) * n, cells, n, MPI_BYTE,
                                  MPI_STATUS_IGNORE);
            dumps++;
        }
        if (step % 3 == 0) {
            int length = snprintf(line, sizeof line, "step %6d\n", step);
            if (write(log, line, (size_t)length) != length)
                MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    close(log);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
"""


def test_two_outputs_of_different_sizes_are_extrapolated_apart(library, scratch, capsys):
    """A 64 KiB dump every 2 steps and a 12-byte log line every 3, in one loop: each gets its own gate (the dump
    apart from its counter), and the estimate from one more run per gate equals the program's counts, where the
    one factor reached/run over both gates cannot."""
    source = scratch / "two.c"
    source.write_text(TWO_OUTPUTS)
    program = scratch / "two"
    subprocess.run(["mpicc.mpich", "-Wall", "-Werror", "-o", str(program), str(source)], check=True)
    args = "{workdir}/dumps.bin {workdir}/log 20"
    out = cli(capsys, source, "-o", scratch / "two-kernel", "--reduce-loops", 4, "--run", args, "--", "-Wall",
              "-Werror")
    assert "reduced: two.c:20 (I/O from line 22, 28): 1 in 4 runs of that I/O" in out, out
    assert "I/O from two.c:22: reached 20 times on all ranks, run 6" in out, out  # 10 dumps, 3 kept per rank
    assert "I/O from two.c:28: reached 12 times on all ranks, run 4" in out, out  # 6 lines, 2 kept per rank
    theirs = signature(run_once(f"{program} {args}", 2)["report"])
    ours = run_scaled(f"{scratch / 'two-kernel' / 'kernel'} {args}", 2)
    rows = compare(theirs, ours["estimate"])
    worst = errors(rows)
    print(f"two outputs, extrapolated: bytes {100 * worst['bytes']:.4f}%, calls {100 * worst['calls']:.4f}%")
    assert failures(rows) == [], render(rows)
    factor = errors(compare(theirs, ours["signature"], ours["scale"]))
    print(f"two outputs, x {ours['scale']:g}: bytes {100 * factor['bytes']:.2f}%, calls {100 * factor['calls']:.2f}%")
    assert factor["bytes"] > 0.001  # x 32/10 for the dumps' 10/3 and the log's 6/2


CARRIED = r"""
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int steps = atoi(argv[2]), n = 4096, written = 0;
    char *buf = calloc((size_t)n, 1);
    MPI_File fh;
    MPI_File_open(MPI_COMM_SELF, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_Offset offset = 0;
    for (int i = 0; i < steps; i++) {
        MPI_Status status;
        MPI_File_write_at(fh, offset, buf, n, MPI_BYTE, &status);
        MPI_Get_count(&status, MPI_BYTE, &written);
        offset += written;
    }
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}
"""


def test_a_loop_whose_io_carries_its_offset_is_not_reduced(library, scratch, capsys):
    """The next offset is what the last write wrote: skipping a write would move every later one, so the loop
    keeps all of its I/O and the note says why."""
    source = scratch / "carried.c"
    source.write_text(CARRIED)
    out = cli(capsys, source, "-o", scratch / "carried-kernel", "--reduce-loops", 4, "--run",
              "{workdir}/out.bin 8", "--ranks", 1, "--", "-Wall", "-Werror")
    assert "carried.c:13: loop not reduced: line 15 reads the variable offset, which line 17 writes" in out, out
    assert "reduced: no loop" in out
    assert "iobo_kernel_keep" not in (scratch / "carried-kernel" / "carried.c").read_text()
    assert "mpiio: 32,768 B in 8 writes" in out, out  # all 8 writes of 4 KiB


def test_redirect_puts_every_checkpoint_under_the_directory(library, hdf5_tools, scratch, capsys):
    target, run = scratch / "fast", scratch / "run"
    run.mkdir()
    out = cli(capsys, SOURCES / "checkpoint.c", "-o", scratch / "redirected", "--redirect", target, "--run",
              f"{run / 'ck'} 3 1 2 1", "--", "-Wall", "-Werror")
    assert f"redirected into {target}: H5Fcreate checkpoint.c:72, open checkpoint.c:99" in out, out
    assert "hdf5: 6,291,456 B in 12 writes" in out, out  # 3 checkpoints x 2 ranks x 1 MiB in 2 slabs
    mirrored = Path(f"{target}{run}")
    assert files_under(target) == [mirrored / f"ck.{c}.h5" for c in range(3)]
    assert files_under(run) == []  # nothing where the program writes
    listing = subprocess.run(["h5ls", str(mirrored / "ck.1.h5")], capture_output=True, text=True, check=True).stdout
    assert "temperature" in listing and "Dataset {256, 1024}" in listing, listing  # 2 ranks x 128 rows
    assert h5dump_layouts(mirrored / "ck.1.h5") == {"temperature": ("contiguous", None)}


def test_redirect_keeps_the_input_where_it_is(library, scratch, capsys):
    target, run = scratch / "fast", scratch / "run"
    run.mkdir()
    (scratch / "in.txt").write_text("4096 400 100\n")
    out = cli(capsys, MIXED, "-o", scratch / "mixed-redirected", "--redirect", target, "--run",
              f"{scratch / 'in.txt'} {run / 'dumps.bin'} {run / 'log.txt'}", "--", "-Wall", "-Wextra", "-Werror")
    assert "fopen mixed.c:23, MPI_File_open mixed.c:59, open mixed.c:75" in out, out
    assert "mpiio: 262,144 B in 8 writes" in out, out  # the input's sizes were read: 4 dumps x 2 ranks x 4096 cells
    mirrored = Path(f"{target}{run}")
    assert files_under(target) == [mirrored / "dumps.bin", mirrored / "log.txt"]
    assert (mirrored / "log.txt").read_text() == "dumps 4\n"
    assert files_under(run) == []
    assert (scratch / "in.txt").read_text() == "4096 400 100\n" and not Path(f"{target}{scratch}/in.txt").exists()
    assert os.listdir(scratch / "mixed-redirected").count("iobo_kernel.c") == 1


SAVED = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void save(const double *data, int n, const char *name)
{
    int fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, (size_t)n * sizeof *data) < 0 || close(fd) != 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n = 1000;
    double *data = malloc((size_t)n * sizeof *data);
    char name[4096];
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < n; i++)
            data[i] = step * i;
        snprintf(name, sizeof name, "%s.%d.%d", argv[1], rank, step);
        save(data, n, name);
    }
    MPI_Finalize();
    return 0;
}
"""


def test_a_synthetic_writer_keeps_its_file_name_and_is_redirected(library, scratch, capsys):
    """save() is named --synthetic (its data may be synthetic): the data's computation is dropped, but the name it
    is given is a string, not data, so the snprintf that makes it is kept; and the open in save()'s body, kept
    whole, is redirected too."""
    source, target, run = scratch / "saved.c", scratch / "fast", scratch / "run"
    source.write_text(SAVED)
    run.mkdir()
    out = cli(capsys, source, "-o", scratch / "saved-kernel", "--synthetic", "save", "--redirect", target, "--run",
              run / "out", "--", "-Wall", "-Werror")
    assert f"redirected into {target}: open saved.c:10" in out, out
    assert "posix: 48,000 B in 6 writes" in out, out  # 3 steps x 2 ranks x 1000 doubles
    kernel = (scratch / "saved-kernel" / "saved.c").read_text()
    assert 'snprintf(name, sizeof name, "%s.%d.%d", argv[1], rank, step);' in kernel
    assert "data[i] = step * i;" not in kernel
    mirrored = Path(f"{target}{run}")
    assert files_under(target) == [mirrored / f"out.{rank}.{step}" for rank in range(2) for step in range(3)]
    assert files_under(run) == []


ROWS = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double **rows_of(int n, int m)
{
    double **a = malloc((size_t)n * sizeof *a);
    a[0] = calloc((size_t)n * (size_t)m, sizeof **a);
    for (int i = 1; i < n; i++)
        a[i] = a[0] + (size_t)i * (size_t)m;
    return a;
}

static void release(double **a)
{
    free(a[0]);
    free(a);
}

static void dump(double **field, int n, int m, const char *name)
{
    double **copy = rows_of(n, m);
    for (int i = 0; i < n; i++)
        memcpy(copy[i], field[i], (size_t)m * sizeof **copy);
    int fd = open(name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, copy[0], (size_t)n * (size_t)m * sizeof **copy) < 0 || close(fd) != 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
    release(copy);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n = 100, m = 100, steps = atoi(argv[2]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double **field = rows_of(n, m);
    char name[4096];
    for (int step = 1; step <= steps; step++) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++)
                field[i][j] += 0.5 * step;
        if (step % 10 == 0) {
            snprintf(name, sizeof name, "%s.%d.%d", argv[1], rank, step);
            dump(field, n, m, name);
        }
    }
    release(field);
    MPI_Finalize();
    return 0;
}
"""


def test_a_dump_through_its_own_rows_is_reduced(library, scratch, capsys):
    """dump() copies the field into rows it allocates (rows_of: malloc'd row pointers, as heat-restart's
    malloc_2d) and frees them: stores into memory allocated where they are made, and frees, do not touch the
    field's rows, so the dump is gated (before, its stores into double * memory looked like the field's)."""
    source = scratch / "rows.c"
    source.write_text(ROWS)
    program = scratch / "rows"
    subprocess.run(["mpicc.mpich", "-Wall", "-Werror", "-o", str(program), str(source)], check=True)
    out = cli(capsys, source, "-o", scratch / "rows-kernel", "--reduce-loops", 3, "--run", "{workdir}/out 100",
              "--", "-Wall", "-Werror")
    assert "reduced: rows.c:42 (I/O from line 48): 1 in 3 runs of that I/O" in out, out
    assert "I/O from rows.c:48: reached 20 times on all ranks, run 8" in out, out  # 10 dumps, 4 kept per rank
    assert "posix: 1,600,000 B in 20 writes" in out, out  # 10 dumps x 2 ranks x 80,000 B, estimated
    theirs = signature(run_once(f"{program} {{workdir}}/out 100", 2)["report"])
    ours = run_scaled(f"{scratch / 'rows-kernel' / 'kernel'} {{workdir}}/out 100", 2)
    rows = compare(theirs, ours["estimate"])
    assert failures(rows) == [], render(rows)


def test_a_reduced_kernel_passes_the_check_against_its_program(library, programs, scratch, capsys):
    """``iobo check --command P --kernel-command K`` on a kernel built with ``--reduce-loops``: its counts are
    estimated back to the program's (one more run per gate) before the signatures are compared, so 1 in 4
    checkpoints written stands for all 8; its wall time is the reduced run's."""
    kernel_dir = scratch / "reduced"
    cli(capsys, SOURCES / "checkpoint.c", "-o", kernel_dir, "--reduce-loops", 4, "--", "-Wall", "-Werror")
    args = "{workdir}/ck 8 1 2 1"
    out_file = scratch / "check.json"
    code = main(["check", "--command", f"{programs['checkpoint']} {args}", "--kernel-command",
                 f"{kernel_dir / 'kernel'} {args}", "--ranks", "2", "--configs", "1", "--repeats", "1",
                 "--workdir", str(scratch / "work"), "--out", str(out_file)])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "the kernel's counts are its reduced run's estimated back to the program's: extrapolated per gate" \
        in out, out
    assert "PASS: bytes per level within 0.1%, operation counts within 2%" in out, out
    stored = json.loads(out_file.read_text())
    rows = {row["what"]: row for row in stored["signature"]}
    assert rows["hdf5 files"]["program"] == 16 and rows["hdf5 files"]["kernel"] == 16

"""iobo extract on C++: real libclang, real mpicxx builds, real MPI ranks under the shim.

diffusion.cpp (ours: a class whose std::vector field is relaxed and written
to one parallel HDF5 file per checkpoint by another class's method, an
object made with new and used through a reference, a function template, an
std::ofstream log and std::cout): the kernel builds with mpicxx, keeps the
member calls, initialisers and the log, drops the stencil, the norm and the
console output, and does the program's I/O at its input and at another size
and rank count. A .c source that the program's C++ compiler builds (as
MACSio's are) is parsed as C++ when the compiler or the compilation database
says so, and refused as C with a hint otherwise.
"""

import json
import re
import subprocess
from pathlib import Path

from iobo.cli import main
from iobo.extract.build import hdf5_flags
from iobo.extract.run import run_once
from iobo.replay.check import failures
from iobo.replay.signature import compare, render, signature

DIFFUSION = Path(__file__).with_name("diffusion.cpp")


def view_marks(kernel_dir, name):
    """{program line text (stripped): mark} of the marked view of source ``name``."""
    found, current = {}, None
    for line in (kernel_dir / "view.txt").read_text().splitlines():
        if line.startswith("== "):
            current = Path(line.split()[1]).name
            continue
        match = re.match(r"^\s*\d+ ([ +~-]) \| (.*)$", line)
        if match and current == name:
            found.setdefault(match[2].strip(), match[1])
    return found


def signature_rows(program, kernel, args, ranks):
    program_run = run_once(f"{program} {args}", ranks)
    kernel_run = run_once(f"{kernel} {args}", ranks)
    rows = compare(signature(program_run["report"]), signature(kernel_run["report"]))
    return rows, program_run["wall_seconds"], kernel_run["wall_seconds"]


def test_a_cxx_program_gives_a_kernel_that_does_its_io_at_two_inputs(library, scratch, capsys):
    program = scratch / "diffusion"
    subprocess.run(["mpicxx.mpich", "-Wall", "-Wextra", "-Werror", "-O2", "-o", str(program), str(DIFFUSION),
                    *hdf5_flags()], check=True)
    kernel_dir = scratch / "diffusion-kernel"
    code = main(["extract", str(DIFFUSION), "-o", str(kernel_dir), "--run", "{workdir}/d 4096 3 50", "--ranks", "2",
                 "--", "-Wall", "-Wextra", "-Werror", "-O2"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "built: mpicxx.mpich" in out.out, out.out
    assert "hdf5: 196,608 B in 6 writes" in out.out, out.out  # 3 checkpoints x 2 ranks x 4096 doubles
    assert re.search(r"note: \S+diffusion.cpp:21: template at_least: not sliced, kept whole", out.out), out.out
    marks = view_marks(kernel_dir, "diffusion.cpp")
    for dropped in ("next_[i] = 0.5 * values_[i] + 0.25 * (values_[i - 1] + values_[i + 1]) + 1e-3 * (rank_ + 1);",
                    "double Field::norm() const", "norm += field.norm();", "bytes_ += count * sizeof(double);",
                    "delete state;", "std::cout << checkpoints << \" checkpoints, \" << checkpointer.bytes() << "
                                     "\" bytes from rank 0, norm \" << norm"):
        assert marks[dropped] == "-", (dropped, marks)
    for kept in (": cells_(cells), rank_(rank), ranks_(ranks), values_(cells + 2, 0.0), next_(cells + 2, 0.0)",
                 "values_.swap(next_);",  # which buffer data() gives: the slice cannot tell it is the same size
                 "hsize_t offset() const { return (hsize_t)rank_ * cells_; }",
                 "std::string name = prefix_ + \".\" + std::to_string(step) + \".h5\";",
                 "H5Dwrite(dset, H5T_NATIVE_DOUBLE, memspace, filespace, dxpl, field.interior());",
                 "sim::Field *state = new sim::Field(cells, rank, ranks);", "sim::Field &field = *state;",
                 "field.relax(sweeps);", "checkpointer.write(field, c);",
                 "std::ofstream log(std::string(argv[1]) + \".log\");",
                 "log << checkpoints << \" checkpoints of \" << cells * ranks << \" cells\\n\";"):
        assert marks[kept] == "+", (kept, marks)
    kernel = kernel_dir / "kernel"
    for args, ranks in (("{workdir}/d 4096 3 50", 2), ("{workdir}/d 10000 5 20", 3)):  # the second: unseen
        rows, _, _ = signature_rows(program, kernel, args, ranks)
        assert failures(rows) == [], f"{args} on {ranks} ranks\n{render(rows)}"
        by_what = {row["what"]: row for row in rows}
        assert by_what["hdf5 write bytes"]["kernel"] > 0 and by_what["posix write bytes"]["kernel"] > 0, render(rows)
    rows, program_s, kernel_s = signature_rows(program, kernel, "{workdir}/d 100000 2 6000", 2)
    assert failures(rows) == [], render(rows)
    print(f"program {program_s:.2f} s, kernel {kernel_s:.2f} s")
    assert program_s / kernel_s >= 3, (program_s, kernel_s)


MUTABLE = """\
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    int steps;
    mutable int reads; /* C++ only, as in MACSio's macsio_mif.c */
} plan_t;

static int steps_of(const plan_t &plan) { plan.reads++; return plan.steps; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    plan_t plan = {atoi(argv[2]), 0};
    double sum = 0;
    for (int i = 0; i < 1000; i++)
        sum += i * 0.5;
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int s = 0; s < steps_of(plan); s++) {
        char line[32];
        int length = snprintf(line, sizeof line, "step %d\\n", s);
        if (write(fd, line, (size_t)length) != length)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    close(fd);
    printf("%g\\n", sum);
    MPI_Finalize();
    return 0;
}
"""


def test_a_c_source_a_cxx_compiler_builds_is_parsed_as_cxx(library, scratch, capsys):
    source = scratch / "plan.c"
    source.write_text(MUTABLE)
    assert main(["extract", str(source), "-o", str(scratch / "k0"), "--no-build"]) == 2
    err = capsys.readouterr().err
    assert "does not parse as C" in err and "--cc mpicxx" in err, err
    assert main(["extract", str(source), "-o", str(scratch / "k1"), "--cc", "mpicxx.mpich", "--run",
                 "{workdir}/out.txt 7"]) == 0
    out = capsys.readouterr().out
    assert "built: mpicxx.mpich" in out and "posix: 98 B in 14 writes" in out, out  # 7 lines of 7 B on 2 ranks
    kernel = (scratch / "k1" / "plan.c").read_text()
    assert "sum += i * 0.5;" not in kernel and "for (int s = 0; s < steps_of(plan); s++) {" in kernel, kernel
    database = scratch / "compile_commands.json"
    database.write_text(json.dumps([{"directory": str(scratch), "file": "plan.c",
                                     "command": "/usr/bin/mpicxx.mpich -O2 -c plan.c -o plan.o"}]))
    assert main(["extract", str(source), "-o", str(scratch / "k2"), "--compile-commands", str(database)]) == 0
    out = capsys.readouterr().out
    assert "built: mpicxx.mpich" in out, out

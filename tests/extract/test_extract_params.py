"""iobo extract keeps what reaches the I/O through an array parameter and through a call by function pointer (found
on CitcomS, geodynamics/citcoms bc13ac63: its element residual, written through ``double Eres[9]``, was dropped and
the kernel's temperatures went to NaN): real libclang, a real mpicc build, 2 real ranks under the shim."""

from iobo.cli import main

SIZES = r"""
#include <fcntl.h>
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

static void plan(int n, long sizes[2])      /* an array parameter: a pointer to the caller's array */
{
    sizes[0] = 1000L * n;
    sizes[1] = 10L * n;
}

static long header_bytes(int n) { return 64L + n; }

typedef long (*measure_t)(int);

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = atoi(argv[2]);
    long sizes[2];
    plan(n, sizes);
    measure_t measure = header_bytes;
    long header = measure(n);                  /* its value comes back through the pointer's call */
    char *bytes = calloc((size_t)(sizes[0] + sizes[1] + header), 1);
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (write(fd, bytes, (size_t)header) != header || write(fd, bytes, (size_t)sizes[0]) != sizes[0] ||
        write(fd, bytes, (size_t)sizes[1]) != sizes[1])
        MPI_Abort(MPI_COMM_WORLD, 1);
    close(fd);
    MPI_Finalize();
    return 0;
}
"""


def test_an_array_parameter_and_a_pointer_calls_return_value_are_kept(library, scratch, capsys):
    source = scratch / "sizes.c"
    source.write_text(SIZES)
    code = main(["extract", str(source), "-o", str(scratch / "sizes-kernel"), "--run", "{workdir}/out 3",
                 "--", "-Wall", "-Werror", "-O2"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "posix: 6,194 B in 6 writes" in out.out, out.out  # 2 ranks x (67 + 3000 + 30)
    kernel = (scratch / "sizes-kernel" / "sizes.c").read_text()
    assert "sizes[0] = 1000L * n;" in kernel and "static long header_bytes(int n) { return 64L + n; }" in kernel

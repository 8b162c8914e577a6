/* A 1D relaxation that reads its sizes from an input file, dumps its cells
 * with MPI-IO every EVERY steps and writes a one-line log with POSIX calls:
 * the slice must keep the input's reads (through a struct), an offset a
 * function computes, the dump's branch (not its else) and the log, and drop
 * relax() and the norm.
 *
 * usage: mixed INPUT DUMPS LOG   (INPUT holds "CELLS STEPS EVERY")
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int n, steps, every;
    double *cells, *scratch;
} grid_t;

static void read_input(const char *path, grid_t *g)
{
    FILE *in = fopen(path, "r");
    if (!in || fscanf(in, "%d %d %d", &g->n, &g->steps, &g->every) != 3) {
        fprintf(stderr, "mixed: cannot read CELLS STEPS EVERY from %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fclose(in);
}

static void relax(grid_t *g)
{
    for (int i = 1; i + 1 < g->n; i++)
        g->scratch[i] = 0.5 * (g->cells[i - 1] + g->cells[i + 1]);
    memcpy(g->cells + 1, g->scratch + 1, (size_t)(g->n - 2) * sizeof(double));
}

static MPI_Offset offset_of(int rank, int ranks, int cells, int dump)
{
    return ((MPI_Offset)dump * ranks + rank) * cells * (MPI_Offset)sizeof(double);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 4)
        MPI_Abort(MPI_COMM_WORLD, 2);
    grid_t g;
    read_input(argv[1], &g);
    g.cells = malloc((size_t)g.n * sizeof(double));
    g.scratch = malloc((size_t)g.n * sizeof(double));
    for (int i = 0; i < g.n; i++)
        g.cells[i] = i == 0 ? 100.0 + rank : 0.0;

    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, argv[2], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    double norm = 0.0;
    int dumps = 0;
    for (int step = 1; step <= g.steps; step++) {
        relax(&g);
        if (step % g.every == 0) {
            MPI_File_write_at_all(fh, offset_of(rank, ranks, g.n, dumps), g.cells, g.n, MPI_DOUBLE,
                                  MPI_STATUS_IGNORE);
            dumps++;
        } else {
            norm += g.cells[1];
        }
    }
    MPI_File_close(&fh);
    if (rank == 0) {
        char line[64];
        int fd = open(argv[3], O_CREAT | O_WRONLY | O_TRUNC, 0644);
        int length = snprintf(line, sizeof line, "dumps %d\n", dumps);
        if (fd < 0 || write(fd, line, (size_t)length) != length || close(fd) != 0)
            MPI_Abort(MPI_COMM_WORLD, 3);
    }
    printf("{\"dumps\": %d, \"norm\": %g}\n", dumps, norm);
    free(g.cells);
    free(g.scratch);
    MPI_Finalize();
    return 0;
}

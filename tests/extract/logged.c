/* A solver that logs its residuals, as CitcomS and MACSio do: Jacobi sweeps
 * on each rank's block, the residual summed over the ranks (MPI_Allreduce)
 * and appended to PREFIX.log by rank 0 every step (a fixed-width line, POSIX
 * write), and every EVERY steps a collective HDF5 checkpoint of the blocks.
 * The log reads the solve's results, so the slice keeps the solve;
 * `iobo extract --drop sweep` empties it. With a TOLERANCE above 0 the run
 * stops once the residual falls below it: then the solve decides how much is
 * written, and an emptied sweep changes the I/O (iobo check shows it). Each
 * rank finds its first row with a for loop whose body is empty (`;`).
 *
 * usage: logged PREFIX [STEPS [EVERY [ROWS [TOLERANCE]]]]
 */
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COLS 1024

/* One Jacobi sweep of a ROWS x COLS block; returns the sum of the changes. */
static double sweep(double *grid, double *next, int rows)
{
    double change = 0.0;
    for (int i = 1; i + 1 < rows; i++)
        for (int j = 1; j + 1 < COLS; j++) {
            next[i * COLS + j] = 0.25 * (grid[(i - 1) * COLS + j] + grid[(i + 1) * COLS + j] +
                                         grid[i * COLS + j - 1] + grid[i * COLS + j + 1]);
            change += fabs(next[i * COLS + j] - grid[i * COLS + j]);
        }
    memcpy(grid + COLS, next + COLS, (size_t)(rows - 2) * COLS * sizeof *grid);
    return change;
}

static void checkpoint(const char *prefix, int step, const double *grid, int rows, int rank, int ranks)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.%d.h5", prefix, step);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t first = 0; /* this rank's first row; a loop whose body is empty, as MACSio writes them */
    for (int r = 0; r < rank; r++, first += (hsize_t)rows);
    hsize_t dims[2] = {(hsize_t)ranks * (hsize_t)rows, COLS}, start[2] = {first, 0};
    hsize_t count[2] = {(hsize_t)rows, COLS};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dset = H5Dcreate2(file, "temperature", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t memory = H5Screate_simple(2, count, NULL);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    H5Dwrite(dset, H5T_NATIVE_DOUBLE, memory, space, dxpl, grid);
    H5Pclose(dxpl);
    H5Sclose(memory);
    H5Dclose(dset);
    H5Sclose(space);
    H5Fclose(file);
    H5Pclose(fapl);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 2) {
        fprintf(stderr, "usage: logged PREFIX [STEPS [EVERY [ROWS [TOLERANCE]]]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int steps = argc > 2 ? atoi(argv[2]) : 20;
    int every = argc > 3 ? atoi(argv[3]) : 5;
    int rows = argc > 4 ? atoi(argv[4]) : 256;
    double tolerance = argc > 5 ? atof(argv[5]) : 0.0;

    double *grid = calloc((size_t)rows * COLS, sizeof *grid), *next = calloc((size_t)rows * COLS, sizeof *next);
    for (int j = 0; j < COLS; j++)
        grid[j] = 100.0 + rank; /* a hot edge */
    int log = -1;
    if (rank == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s.log", argv[1]);
        log = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    for (int step = 1; step <= steps; step++) {
        double change = sweep(grid, next, rows), total = 0.0;
        MPI_Allreduce(&change, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            char line[64];
            int length = snprintf(line, sizeof line, "step %6d residual %.6e\n", step, total);
            write(log, line, (size_t)length);
        }
        if (step % every == 0)
            checkpoint(argv[1], step, grid, rows, rank, ranks);
        if (total < tolerance)
            break;
    }
    if (rank == 0)
        close(log);
    free(grid);
    free(next);
    MPI_Finalize();
    return 0;
}

/* A simulation that writes HDF5 checkpoints and times its own I/O, as careful
 * codes do: a heat-diffusion sweep on each rank's block (real work outside
 * the I/O calls), then, every checkpoint, a barrier, the clock started,
 * H5Fcreate on the MPI-IO driver, one dataset of RANKS x ROWS rows of COLS
 * doubles written in SLABS hyperslab writes per rank (TRANSFER: independent,
 * the default, or collective),
 * H5Dclose, H5Fclose, and the file synced (open, fsync, close), the clock
 * stopped. The layout is the program's default (contiguous); the shim may
 * chunk it.
 *
 * usage: checkpoint OUTPUT_PREFIX [CHECKPOINTS [MIB_PER_RANK [SLABS [SWEEPS [TRANSFER]]]]]
 * prints one JSON line: {"bytes": written by all ranks, "io_seconds": the
 * slowest rank's seconds summed over its checkpoints, "mb_per_s": bytes over
 * io_seconds / 1e6, "checkpoints": ..., "layout": of the last file's dataset}
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <hdf5.h>
#include <unistd.h>

#include "common.h"

#define COLS 1024

/* One Jacobi sweep of a ROWS x COLS block; returns the sum, so the work is kept. */
static double sweep(double *grid, double *next, hsize_t rows)
{
    double sum = 0.0;
    for (hsize_t i = 1; i + 1 < rows; i++)
        for (hsize_t j = 1; j + 1 < COLS; j++) {
            double v = 0.25 * (grid[(i - 1) * COLS + j] + grid[(i + 1) * COLS + j] + grid[i * COLS + j - 1] +
                               grid[i * COLS + j + 1]);
            next[i * COLS + j] = v;
            sum += v;
        }
    memcpy(grid, next, rows * COLS * sizeof *grid);
    return sum;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    CHECK(argc >= 2, "usage: checkpoint OUTPUT_PREFIX [CHECKPOINTS [MIB_PER_RANK [SLABS [SWEEPS [TRANSFER]]]]]");
    int checkpoints = argc > 2 ? atoi(argv[2]) : 3;
    int mib = argc > 3 ? atoi(argv[3]) : 8;
    int slabs = argc > 4 ? atoi(argv[4]) : 8;
    int sweeps = argc > 5 ? atoi(argv[5]) : 5;
    bool collective = argc > 6 && !strcmp(argv[6], "collective");
    hsize_t rows = (hsize_t)mib * 1024 * 1024 / (COLS * sizeof(double));
    CHECK(checkpoints > 0 && mib > 0 && slabs > 0 && rows % (hsize_t)slabs == 0, "arguments");

    double *grid = calloc(rows * COLS, sizeof *grid), *next = calloc(rows * COLS, sizeof *next);
    CHECK(grid && next, "calloc");
    for (hsize_t j = 0; j < COLS; j++)
        grid[j] = 100.0 + rank; /* a hot edge */

    double io_seconds = 0.0, checksum = 0.0;
    char path[4096], layout[16] = "?";
    for (int c = 0; c < checkpoints; c++) {
        for (int s = 0; s < sweeps; s++)
            checksum += sweep(grid, next, rows);
        snprintf(path, sizeof path, "%s.%d.h5", argv[1], c);

        MPI_Barrier(MPI_COMM_WORLD);
        double started = MPI_Wtime();
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) >= 0, "H5Pset_fapl_mpio");
        hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        CHECK(file >= 0, "H5Fcreate");
        hsize_t dims[2] = {(hsize_t)ranks * rows, COLS};
        hid_t space = H5Screate_simple(2, dims, NULL);
        hid_t dset = H5Dcreate2(file, "temperature", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT);
        CHECK(dset >= 0, "H5Dcreate2");
        hsize_t slab_rows = rows / (hsize_t)slabs;
        hsize_t count[2] = {slab_rows, COLS};
        hid_t memory = H5Screate_simple(2, count, NULL);
        hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
        CHECK(H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT) >= 0, "dxpl");
        for (int s = 0; s < slabs; s++) {
            hsize_t start[2] = {(hsize_t)rank * rows + (hsize_t)s * slab_rows, 0};
            CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0, "select");
            CHECK(H5Dwrite(dset, H5T_NATIVE_DOUBLE, memory, space, dxpl, grid + s * slab_rows * COLS) >= 0,
                  "H5Dwrite");
        }
        hid_t dcpl = H5Dget_create_plist(dset);
        snprintf(layout, sizeof layout, "%s", H5Pget_layout(dcpl) == H5D_CHUNKED ? "chunked" : "contiguous");
        H5Pclose(dcpl);
        H5Pclose(dxpl);
        H5Sclose(memory);
        H5Sclose(space);
        CHECK(H5Dclose(dset) >= 0, "H5Dclose");
        CHECK(H5Fclose(file) >= 0, "H5Fclose");
        H5Pclose(fapl);
        int fd = open(path, O_WRONLY);
        CHECK(fd >= 0 && fsync(fd) == 0 && close(fd) == 0, "sync");
        io_seconds += MPI_Wtime() - started;
    }

    double slowest = 0.0;
    MPI_Reduce(&io_seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    uint64_t bytes = total((uint64_t)checkpoints * rows * COLS * sizeof(double));
    if (rank == 0)
        printf("{\"bytes\": %" PRIu64 ", \"io_seconds\": %.6f, \"mb_per_s\": %.3f, \"checkpoints\": %d, "
               "\"layout\": \"%s\", \"checksum\": %.3e}\n",
               bytes, slowest, (double)bytes / slowest / 1e6, checkpoints, layout, checksum);
    free(grid);
    free(next);
    MPI_Finalize();
    return 0;
}

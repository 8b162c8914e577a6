/*
 * A parallel HDF5 program written in the 1.6 API and built with
 * -DH5_USE_16_API, as older benchmarks are: H5Gcreate, H5Dcreate and H5Dopen
 * take their 1.6 arguments (the library's H5Gcreate1, H5Dcreate1, H5Dopen1).
 * It creates /g/grid (64 x 4096 floats, 32 rows per rank) and /g/line (1 MiB
 * of floats per rank), both contiguous by default, writes them through its
 * own transfer list (independent by default), reads them back and checks
 * them. Rank 0 prints one JSON line: the I/O mode HDF5 reports after each
 * write, and the bytes moved.
 */
#include <hdf5.h>

#include "common.h"

#if !defined(H5_USE_16_API)
#error "build with -DH5_USE_16_API"
#endif

#define ROWS 64
#define COLUMNS 4096
#define PER_RANK 262144

/* Write (then read back and check) rows [first, first + count) of a 2-D dataset. */
static uint64_t write_and_check(hid_t group, const char *name, int rank_of, hsize_t *dims, hsize_t *start,
                                hsize_t *count, int ndims, hid_t dxpl, int *mode, uint64_t *read)
{
    hid_t space = H5Screate_simple(ndims, dims, NULL);
    hid_t dataset = H5Dcreate(group, name, H5T_NATIVE_FLOAT, space, H5P_DEFAULT); /* H5Dcreate1 */
    CHECK(dataset >= 0, "H5Dcreate");
    hsize_t n = 1;
    for (int axis = 0; axis < ndims; axis++)
        n *= count[axis];
    float *data = malloc(n * sizeof *data);
    CHECK(data != NULL, "malloc");
    for (hsize_t j = 0; j < n; j++)
        data[j] = (float)(rank_of * 1000003 + (int)(j % 100000));
    hid_t memory = H5Screate_simple(1, &n, NULL);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    CHECK(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory, space, dxpl, data) >= 0, "H5Dwrite");
    H5D_mpio_actual_io_mode_t actual;
    CHECK(H5Pget_mpio_actual_io_mode(dxpl, &actual) >= 0, "H5Pget_mpio_actual_io_mode");
    *mode = (int)actual;
    H5Dclose(dataset);

    dataset = H5Dopen(group, name); /* H5Dopen1 */
    CHECK(dataset >= 0, "H5Dopen");
    memset(data, 0, n * sizeof *data);
    CHECK(H5Dread(dataset, H5T_NATIVE_FLOAT, memory, space, dxpl, data) >= 0, "H5Dread");
    for (hsize_t j = 0; j < n; j++)
        CHECK(data[j] == (float)(rank_of * 1000003 + (int)(j % 100000)), "the values read back");
    *read += n * sizeof *data;
    H5Dclose(dataset);
    H5Sclose(memory);
    H5Sclose(space);
    free(data);
    return n * sizeof(float);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc == 2, "usage: hdf5_16 FILE");
    CHECK(ROWS % size == 0, "ranks dividing 64");

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) >= 0, "H5Pset_fapl_mpio");
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file >= 0, "H5Fcreate");
    hid_t group = H5Gcreate(file, "/g", 0); /* H5Gcreate1 */
    CHECK(group >= 0, "H5Gcreate");
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);

    uint64_t written = 0, read = 0;
    int modes[2];
    hsize_t grid_dims[2] = {ROWS, COLUMNS}, grid_start[2] = {(hsize_t)(ROWS / size * rank), 0},
            grid_count[2] = {(hsize_t)(ROWS / size), COLUMNS};
    written += write_and_check(group, "grid", rank, grid_dims, grid_start, grid_count, 2, dxpl, &modes[0], &read);
    hsize_t line_dims = (hsize_t)PER_RANK * size, line_start = (hsize_t)PER_RANK * rank, line_count = PER_RANK;
    written += write_and_check(group, "line", rank, &line_dims, &line_start, &line_count, 1, dxpl, &modes[1], &read);

    uint64_t all_written = total(written), all_read = total(read);
    if (rank == 0) {
        printf("{\"actual_io_modes\":[%d,%d],\"bytes_written\":%llu,\"bytes_read\":%llu}\n", modes[0], modes[1],
               (unsigned long long)all_written, (unsigned long long)all_read);
        fflush(stdout);
    }
    H5Pclose(dxpl);
    H5Gclose(group);
    H5Pclose(fapl);
    CHECK(H5Fclose(file) >= 0, "H5Fclose");
    MPI_Finalize();
    return 0;
}

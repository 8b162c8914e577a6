/* A solver's checkpoint written from a buffer with ghost cells, as stencil
 * codes keep their fields: each rank owns ROWS x COLS floats of a
 * (RANKS * ROWS) x COLS dataset and holds them inside a (ROWS + 2) x
 * (COLS + 2) buffer; one collective H5Dwrite moves the interior (a memory
 * hyperslab at [1, 1]) to the rank's rows of the file. The memory layout
 * changes the MPI-IO and POSIX calls HDF5 and ROMIO make (a derived memory
 * datatype, read-modify-write in the collective buffer), so a replay that
 * writes from a flat buffer would not make the same calls.
 *
 * usage: halo OUTPUT [ROWS [COLS]]   (defaults 500 1000)
 */
#include <hdf5.h>

#include "common.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: halo OUTPUT [ROWS [COLS]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    hsize_t rows = argc > 2 ? strtoull(argv[2], NULL, 10) : 500, cols = argc > 3 ? strtoull(argv[3], NULL, 10) : 1000;
    hsize_t padded[2] = {rows + 2, cols + 2};
    float *field = calloc(padded[0] * padded[1], sizeof *field);
    for (hsize_t i = 0; i < padded[0] * padded[1]; i++)
        field[i] = (float)(rank + i % 97);

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hsize_t dims[2] = {rows * (hsize_t)ranks, cols};
    hid_t file_space = H5Screate_simple(2, dims, NULL);
    hid_t dset = H5Dcreate2(file, "T", H5T_NATIVE_FLOAT, file_space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t start[2] = {rows * (hsize_t)rank, 0}, count[2] = {rows, cols}, inner[2] = {1, 1};
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t mem_space = H5Screate_simple(2, padded, NULL);
    H5Sselect_hyperslab(mem_space, H5S_SELECT_SET, inner, NULL, count, NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    herr_t status = H5Dwrite(dset, H5T_NATIVE_FLOAT, mem_space, file_space, dxpl, field);
    H5Pclose(dxpl);
    H5Sclose(mem_space);
    H5Sclose(file_space);
    H5Dclose(dset);
    H5Fclose(file);
    H5Pclose(fapl);
    free(field);
    if (rank == 0)
        printf("{\"bytes\": %llu, \"ok\": %s}\n", (unsigned long long)(dims[0] * dims[1] * sizeof(float)),
               status < 0 ? "false" : "true");
    MPI_Finalize();
    return status < 0;
}

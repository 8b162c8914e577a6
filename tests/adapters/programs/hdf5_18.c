/*
 * A parallel HDF5 program in the 1.8 API that makes its own choices: MPI-IO
 * hints (cb_buffer_size 1 MiB, romio_cb_read disable) and alignment 1/4096
 * and a 4 KiB meta block on its file access list, independent transfer on
 * its own transfer list. Each rank writes 1 MiB into each of NDSETS 1-D
 * float datasets, reads it back and checks it. Rank 0 prints one JSON line
 * of what the program itself sees: the file's access settings, the I/O mode
 * HDF5 reports on its transfer list after each write, the MPI-IO hints of
 * the open file (H5Fget_vfd_handle + MPI_File_get_info) and the bytes it
 * moved. Built shared (h5pcc -shlib) and static (h5pcc).
 */
#include <hdf5.h>

#include "common.h"

#define NDSETS 3
#define PER_RANK 262144 /* floats per rank and dataset: 1 MiB */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc == 2, "usage: hdf5_18 FILE");

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "1048576");
    MPI_Info_set(info, "romio_cb_read", "disable");
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, info) >= 0, "H5Pset_fapl_mpio");
    CHECK(H5Pset_alignment(fapl, 1, 4096) >= 0, "H5Pset_alignment");
    CHECK(H5Pset_meta_block_size(fapl, 4096) >= 0, "H5Pset_meta_block_size");
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file >= 0, "H5Fcreate");

    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    CHECK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) >= 0, "H5Pset_dxpl_mpio");
    hsize_t dims = (hsize_t)PER_RANK * size, start = (hsize_t)PER_RANK * rank, count = PER_RANK;
    float *data = malloc(PER_RANK * sizeof *data);
    CHECK(data != NULL, "malloc");
    uint64_t written = 0, read = 0;
    int modes[NDSETS];
    hid_t memory = H5Screate_simple(1, &count, NULL);
    for (int i = 0; i < NDSETS; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        hid_t space = H5Screate_simple(1, &dims, NULL);
        hid_t dataset = H5Dcreate2(file, name, H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(dataset >= 0, "H5Dcreate2");
        H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL);
        for (int j = 0; j < PER_RANK; j++)
            data[j] = (float)(start + (hsize_t)j) + (float)i;
        CHECK(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory, space, dxpl, data) >= 0, "H5Dwrite");
        H5D_mpio_actual_io_mode_t mode;
        CHECK(H5Pget_mpio_actual_io_mode(dxpl, &mode) >= 0, "H5Pget_mpio_actual_io_mode");
        modes[i] = (int)mode;
        written += PER_RANK * sizeof *data;
        H5Sclose(space);
        H5Dclose(dataset);
    }
    for (int i = 0; i < NDSETS; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        hid_t dataset = H5Dopen2(file, name, H5P_DEFAULT);
        hid_t space = H5Dget_space(dataset);
        H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL);
        memset(data, 0, PER_RANK * sizeof *data);
        CHECK(H5Dread(dataset, H5T_NATIVE_FLOAT, memory, space, dxpl, data) >= 0, "H5Dread");
        for (int j = 0; j < PER_RANK; j++)
            CHECK(data[j] == (float)(start + (hsize_t)j) + (float)i, "the values read back");
        read += PER_RANK * sizeof *data;
        H5Sclose(space);
        H5Dclose(dataset);
    }

    hid_t access = H5Fget_access_plist(file); /* collective: every rank */
    hsize_t threshold = 0, interval = 0, meta_block = 0;
    H5Pget_alignment(access, &threshold, &interval);
    H5Pget_meta_block_size(access, &meta_block);
    MPI_File *handle = NULL;
    CHECK(H5Fget_vfd_handle(file, fapl, (void **)&handle) >= 0, "H5Fget_vfd_handle");
    MPI_Info hints;
    CHECK(MPI_File_get_info(*handle, &hints) == MPI_SUCCESS, "MPI_File_get_info");
    uint64_t all_written = total(written), all_read = total(read);
    if (rank == 0) {
        printf("{\"alignment\":[%llu,%llu],\"meta_block_size\":%llu,\"actual_io_modes\":[",
               (unsigned long long)threshold, (unsigned long long)interval, (unsigned long long)meta_block);
        for (int i = 0; i < NDSETS; i++)
            printf("%s%d", i ? "," : "", modes[i]);
        printf("],\"hints\":");
        print_hints(hints);
        printf(",\"bytes_written\":%llu,\"bytes_read\":%llu}\n", (unsigned long long)all_written,
               (unsigned long long)all_read);
        fflush(stdout);
    }
    MPI_Info_free(&hints);
    H5Pclose(access);
    H5Sclose(memory);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    MPI_Info_free(&info);
    CHECK(H5Fclose(file) >= 0, "H5Fclose");
    free(data);
    MPI_Finalize();
    return 0;
}

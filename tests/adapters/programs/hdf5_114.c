/*
 * A parallel HDF5 program in the 1.14 API: it creates its file and datasets
 * with H5Fcreate_async and H5Dcreate_async on an event set, writes NDSETS 1-D
 * float datasets (1 MiB per rank each) in one H5Dwrite_multi call and one more
 * with H5Dwrite_async, reads them all back with H5Dread_multi and checks
 * them, and closes with H5Dclose_async and H5Fclose_async. Its own choices:
 * independent transfer, contiguous datasets, no alignment. Rank 0 prints one
 * JSON line of what HDF5 tells the program itself: the file's alignment
 * (H5Fget_access_plist), each dataset's layout and chunk (H5Dget_create_plist),
 * the I/O mode HDF5 reports on its transfer list after the multi write, and
 * the bytes moved. Needs HDF5 1.14 or later.
 */
#include <hdf5.h>

#include "common.h"

#if !H5_VERSION_GE(1, 14, 0)
#error "hdf5_114.c needs HDF5 1.14 or later (H5Dwrite_multi, the _async API)"
#endif

#define NDSETS 3
#define PER_RANK 262144 /* floats per rank and dataset: 1 MiB */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc == 2, "usage: hdf5_114 FILE");

    hid_t events = H5EScreate();
    CHECK(events >= 0, "H5EScreate");
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) >= 0, "H5Pset_fapl_mpio");
    hid_t file = H5Fcreate_async(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl, events);
    CHECK(file >= 0, "H5Fcreate_async");

    hsize_t dims = (hsize_t)PER_RANK * size, start = (hsize_t)PER_RANK * rank, count = PER_RANK;
    hid_t datasets[NDSETS + 1], types[NDSETS], memories[NDSETS], spaces[NDSETS + 1];
    float *data[NDSETS + 1];
    for (int i = 0; i <= NDSETS; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        spaces[i] = H5Screate_simple(1, &dims, NULL);
        datasets[i] = H5Dcreate_async(file, name, H5T_NATIVE_FLOAT, spaces[i], H5P_DEFAULT, H5P_DEFAULT,
                                      H5P_DEFAULT, events);
        CHECK(datasets[i] >= 0, "H5Dcreate_async");
        H5Sselect_hyperslab(spaces[i], H5S_SELECT_SET, &start, NULL, &count, NULL);
        data[i] = malloc(PER_RANK * sizeof *data[i]);
        CHECK(data[i] != NULL, "malloc");
        for (int j = 0; j < PER_RANK; j++)
            data[i][j] = (float)(start + (hsize_t)j) + (float)i;
        if (i < NDSETS) {
            types[i] = H5T_NATIVE_FLOAT;
            memories[i] = H5Screate_simple(1, &count, NULL);
        }
    }
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    CHECK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) >= 0, "H5Pset_dxpl_mpio");
    CHECK(H5Dwrite_multi(NDSETS, datasets, types, memories, spaces, dxpl, (const void **)data) >= 0,
          "H5Dwrite_multi");
    H5D_mpio_actual_io_mode_t mode;
    CHECK(H5Pget_mpio_actual_io_mode(dxpl, &mode) >= 0, "H5Pget_mpio_actual_io_mode");
    CHECK(H5Dwrite_async(datasets[NDSETS], H5T_NATIVE_FLOAT, memories[0], spaces[NDSETS], dxpl, data[NDSETS],
                         events) >= 0, "H5Dwrite_async");
    size_t pending = 0;
    hbool_t failed = 0;
    CHECK(H5ESwait(events, H5ES_WAIT_FOREVER, &pending, &failed) >= 0 && !failed, "H5ESwait");
    uint64_t written = (NDSETS + 1) * (uint64_t)PER_RANK * sizeof(float);

    for (int i = 0; i < NDSETS; i++)
        memset(data[i], 0, PER_RANK * sizeof *data[i]);
    CHECK(H5Dread_multi(NDSETS, datasets, types, memories, spaces, dxpl, (void **)data) >= 0, "H5Dread_multi");
    for (int i = 0; i < NDSETS; i++)
        for (int j = 0; j < PER_RANK; j++)
            CHECK(data[i][j] == (float)(start + (hsize_t)j) + (float)i, "the values read back");
    uint64_t read = NDSETS * (uint64_t)PER_RANK * sizeof(float);

    hid_t access = H5Fget_access_plist(file);
    hsize_t threshold = 0, interval = 0;
    H5Pget_alignment(access, &threshold, &interval);
    uint64_t all_written = total(written), all_read = total(read);
    if (rank == 0)
        printf("{\"version\":\"%d.%d.%d\",\"alignment\":[%llu,%llu],\"actual_io_mode\":%d,\"layouts\":{", H5_VERS_MAJOR,
               H5_VERS_MINOR, H5_VERS_RELEASE, (unsigned long long)threshold, (unsigned long long)interval, (int)mode);
    for (int i = 0; i <= NDSETS; i++) {
        hid_t dcpl = H5Dget_create_plist(datasets[i]);
        H5D_layout_t layout = H5Pget_layout(dcpl);
        hsize_t chunk = 0;
        if (layout == H5D_CHUNKED)
            H5Pget_chunk(dcpl, 1, &chunk);
        if (rank == 0)
            printf("%s\"d%d\":[\"%s\",%llu]", i ? "," : "", i, layout == H5D_CHUNKED ? "chunked" : "contiguous",
                   (unsigned long long)chunk);
        H5Pclose(dcpl);
    }
    if (rank == 0) {
        printf("},\"bytes_written\":%llu,\"bytes_read\":%llu}\n", (unsigned long long)all_written,
               (unsigned long long)all_read);
        fflush(stdout);
    }
    H5Pclose(access);
    for (int i = 0; i <= NDSETS; i++) {
        CHECK(H5Dclose_async(datasets[i], events) >= 0, "H5Dclose_async");
        H5Sclose(spaces[i]);
        free(data[i]);
        if (i < NDSETS)
            H5Sclose(memories[i]);
    }
    CHECK(H5Fclose_async(file, events) >= 0, "H5Fclose_async");
    CHECK(H5ESwait(events, H5ES_WAIT_FOREVER, &pending, &failed) >= 0 && !failed, "H5ESwait");
    H5ESclose(events);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    MPI_Finalize();
    return 0;
}

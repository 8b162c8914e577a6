/*
 * h5write: a small parallel HDF5 writer for the experiments, standing in for
 * an application iobo did not write. Each rank writes MIB MiB of doubles in
 * H5Dwrite calls of TRANSFER KiB into one 1-D dataset "data": its own slab of
 * one shared file PATH (HDF5's MPI-IO driver on MPI_COMM_WORLD), or, with -F,
 * its own file PATH.<rank> (the MPI-IO driver on MPI_COMM_SELF), as IOR's -F.
 * It makes its own choices, as applications do: independent transfer, no
 * MPI-IO hints, default HDF5 settings. The values are checked after a read
 * back (-r) or not at all.
 *
 *   h5write [-F] [-s MIB] [-t TRANSFER_KIB] [-r] PATH
 *
 * Rank 0 prints one JSON line: what it did, the bytes written over all ranks,
 * the seconds from H5Fcreate to H5Fclose of the slowest rank (MPI_Wtime), the
 * CPU seconds the ranks spent in that span (CLOCK_PROCESS_CPUTIME_ID, summed:
 * less sensitive than wall time to other jobs on the cores), and what the
 * libraries tell it about its own file: the MPI-IO hints in effect
 * (H5Fget_vfd_handle + MPI_File_get_info), the file access settings
 * (H5Fget_access_plist: alignment, meta block, sieve buffer, collective
 * metadata; H5Fget_mdc_config: the metadata cache's initial size) and the
 * I/O mode HDF5 used for its last H5Dwrite (H5Pget_mpio_actual_io_mode on
 * its own transfer list: 0 independent, 2 chunk collective, 4 contiguous
 * collective).
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(ok, what)                                                       \
    do {                                                                      \
        if (!(ok)) {                                                          \
            fprintf(stderr, "h5write: %s failed\n", what);                    \
            MPI_Abort(MPI_COMM_WORLD, 2);                                     \
        }                                                                     \
    } while (0)

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void print_hints(MPI_Info info)
{
    int nkeys = 0;
    MPI_Info_get_nkeys(info, &nkeys);
    putchar('{');
    for (int i = 0; i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        MPI_Info_get_nthkey(info, i, key);
        MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag);
        printf("%s\"%s\":\"%s\"", i ? "," : "", key, flag ? value : "");
    }
    putchar('}');
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, per_process = 0, verify = 0, opt;
    long mib = 64, transfer_kib = 1024;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "Fs:t:r")) != -1) {
        if (opt == 'F')
            per_process = 1;
        else if (opt == 's')
            mib = atol(optarg);
        else if (opt == 't')
            transfer_kib = atol(optarg);
        else if (opt == 'r')
            verify = 1;
        else
            CHECK(0, "usage: h5write [-F] [-s MIB] [-t TRANSFER_KIB] [-r] PATH");
    }
    CHECK(optind == argc - 1 && mib > 0 && transfer_kib > 0 && (mib * 1024) % transfer_kib == 0,
          "usage: h5write [-F] [-s MIB] [-t TRANSFER_KIB] [-r] PATH (MIB MiB a whole number of transfers)");

    char path[4096];
    if (per_process)
        snprintf(path, sizeof path, "%s.%d", argv[optind], rank);
    else
        snprintf(path, sizeof path, "%s", argv[optind]);
    MPI_Comm comm = per_process ? MPI_COMM_SELF : MPI_COMM_WORLD;
    int writers = per_process ? 1 : size, me = per_process ? 0 : rank;
    hsize_t per_rank = (hsize_t)mib * 1024 * 1024 / sizeof(double);
    hsize_t count = (hsize_t)transfer_kib * 1024 / sizeof(double);
    hsize_t dims = per_rank * writers;
    double *data = malloc(count * sizeof *data);
    CHECK(data != NULL, "malloc");

    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime(), cpu_start = cpu_seconds();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    CHECK(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0, "H5Pset_fapl_mpio");
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(file >= 0, "H5Fcreate");
    hid_t space = H5Screate_simple(1, &dims, NULL);
    hid_t dataset = H5Dcreate2(file, "data", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(dataset >= 0, "H5Dcreate2");
    hid_t memory = H5Screate_simple(1, &count, NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    CHECK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) >= 0, "H5Pset_dxpl_mpio");
    for (hsize_t done = 0; done < per_rank; done += count) {
        hsize_t offset = (hsize_t)me * per_rank + done;
        for (hsize_t j = 0; j < count; j++)
            data[j] = (double)(offset + j);
        CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, &offset, NULL, &count, NULL) >= 0, "select");
        CHECK(H5Dwrite(dataset, H5T_NATIVE_DOUBLE, memory, space, dxpl, data) >= 0, "H5Dwrite");
    }
    H5D_mpio_actual_io_mode_t mode = H5D_MPIO_NO_COLLECTIVE;
    CHECK(H5Pget_mpio_actual_io_mode(dxpl, &mode) >= 0, "H5Pget_mpio_actual_io_mode");
    hid_t access = H5Fget_access_plist(file);
    hsize_t threshold = 0, interval = 0, meta_block = 0;
    size_t sieve = 0;
    hbool_t coll_ops = 0, coll_write = 0;
    H5Pget_alignment(access, &threshold, &interval);
    H5Pget_meta_block_size(access, &meta_block);
    H5Pget_sieve_buf_size(access, &sieve);
    H5Pget_all_coll_metadata_ops(access, &coll_ops);
    H5Pget_coll_metadata_write(access, &coll_write);
    H5AC_cache_config_t mdc = {.version = H5AC__CURR_CACHE_CONFIG_VERSION};
    CHECK(H5Fget_mdc_config(file, &mdc) >= 0, "H5Fget_mdc_config");
    H5Pclose(access);
    MPI_File *handle = NULL;
    MPI_Info hints = MPI_INFO_NULL;
    CHECK(H5Fget_vfd_handle(file, fapl, (void **)&handle) >= 0, "H5Fget_vfd_handle");
    CHECK(MPI_File_get_info(*handle, &hints) == MPI_SUCCESS, "MPI_File_get_info");
    if (verify) {
        for (hsize_t done = 0; done < per_rank; done += count) {
            hsize_t offset = (hsize_t)me * per_rank + done;
            CHECK(H5Sselect_hyperslab(space, H5S_SELECT_SET, &offset, NULL, &count, NULL) >= 0, "select");
            CHECK(H5Dread(dataset, H5T_NATIVE_DOUBLE, memory, space, dxpl, data) >= 0, "H5Dread");
            for (hsize_t j = 0; j < count; j++)
                CHECK(data[j] == (double)(offset + j), "the values read back");
        }
    }
    H5Pclose(dxpl);
    H5Sclose(memory);
    H5Sclose(space);
    H5Dclose(dataset);
    CHECK(H5Fclose(file) >= 0, "H5Fclose");
    double mine = MPI_Wtime() - start, slowest = 0, cpu = cpu_seconds() - cpu_start, cpu_all = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        unsigned long long bytes = (unsigned long long)per_rank * sizeof(double) * size;
        printf("{\"files\":\"%s\",\"bytes_written\":%llu,\"seconds\":%.6f,\"cpu_seconds\":%.6f,"
               "\"mb_per_s\":%.3f,\"alignment\":[%llu,%llu],\"meta_block_size\":%llu,\"sieve_buf_size\":%zu,"
               "\"mdc_initial_size\":%zu,\"coll_metadata\":[%d,%d],\"actual_io_mode\":%d,\"hints\":",
               per_process ? "per_process" : "shared", bytes, slowest, cpu_all, bytes / slowest / 1e6,
               (unsigned long long)threshold, (unsigned long long)interval, (unsigned long long)meta_block, sieve,
               mdc.initial_size, (int)coll_ops, (int)coll_write, (int)mode);
        print_hints(hints);
        printf("}\n");
        fflush(stdout);
    }
    MPI_Info_free(&hints);
    H5Pclose(fapl);
    free(data);
    MPI_Finalize();
    return 0;
}

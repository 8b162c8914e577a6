/*
 * An MPI-IO program (no HDF5) that passes its own hints (cb_buffer_size
 * 1 MiB, romio_cb_read disable, romio_ds_read enable) and prints, on rank 0,
 * MPI_File_get_info right after the open. Each rank then writes WRITES
 * blocks of 1 MiB collectively (MPI_File_write_at_all), 4 KiB independently
 * (MPI_File_write_at, 1024 ints) and 8 KiB non-blocking (MPI_File_iwrite_at,
 * 2048 floats), reads the 1 MiB blocks back collectively and checks them.
 * The JSON line also carries the bytes moved, summed over ranks.
 */
#include "common.h"

#define BLOCK 1048576
#define WRITES 4

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc == 2, "usage: mpiio FILE");

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "cb_buffer_size", "1048576");
    MPI_Info_set(info, "romio_cb_read", "disable");
    MPI_Info_set(info, "romio_ds_read", "enable");
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh) == MPI_SUCCESS,
          "MPI_File_open");
    MPI_Info hints;
    CHECK(MPI_File_get_info(fh, &hints) == MPI_SUCCESS, "MPI_File_get_info");

    char *block = malloc(BLOCK);
    CHECK(block != NULL, "malloc");
    uint64_t written = 0, read = 0;
    MPI_Status status;
    for (int k = 0; k < WRITES; k++) {
        memset(block, 'a' + (rank + k) % 26, BLOCK);
        MPI_Offset offset = ((MPI_Offset)k * size + rank) * BLOCK;
        CHECK(MPI_File_write_at_all(fh, offset, block, BLOCK, MPI_BYTE, &status) == MPI_SUCCESS, "write_at_all");
        written += BLOCK;
    }
    MPI_Offset tail = (MPI_Offset)WRITES * size * BLOCK;
    int ints[1024];
    float floats[2048];
    for (int i = 0; i < 1024; i++)
        ints[i] = rank * 1024 + i;
    for (int i = 0; i < 2048; i++)
        floats[i] = (float)(rank + i);
    CHECK(MPI_File_write_at(fh, tail + (MPI_Offset)rank * 4096, ints, 1024, MPI_INT, &status) == MPI_SUCCESS,
          "write_at");
    written += sizeof ints;
    MPI_Request request;
    MPI_Offset after = tail + (MPI_Offset)size * 4096 + (MPI_Offset)rank * 8192;
    CHECK(MPI_File_iwrite_at(fh, after, floats, 2048, MPI_FLOAT, &request) == MPI_SUCCESS, "iwrite_at");
    MPI_Wait(&request, &status);
    written += sizeof floats;

    for (int k = 0; k < WRITES; k++) {
        MPI_Offset offset = ((MPI_Offset)k * size + rank) * BLOCK;
        memset(block, 0, BLOCK);
        CHECK(MPI_File_read_at_all(fh, offset, block, BLOCK, MPI_BYTE, &status) == MPI_SUCCESS, "read_at_all");
        for (int j = 0; j < BLOCK; j++)
            CHECK(block[j] == 'a' + (rank + k) % 26, "the bytes read back");
        read += BLOCK;
    }
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS, "MPI_File_close");

    uint64_t all_written = total(written), all_read = total(read);
    if (rank == 0) {
        printf("{\"hints\":");
        print_hints(hints);
        printf(",\"bytes_written\":%llu,\"bytes_read\":%llu}\n", (unsigned long long)all_written,
               (unsigned long long)all_read);
        fflush(stdout);
    }
    MPI_Info_free(&hints);
    MPI_Info_free(&info);
    free(block);
    MPI_Finalize();
    return 0;
}

/*
 * A program that only writes, as IOR -w is: MPI-IO with no HDF5 and no read.
 * Each rank writes BLOCKS blocks of 1 MiB collectively (MPI_File_write_at_all)
 * to FILE; rank 0 prints one JSON line with the bytes written, summed over
 * ranks. For the tests of knobs with no call to act on (iobo.stack.inert_knobs).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 1048576
#define BLOCKS 4

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2) {
        fprintf(stderr, "usage: write_only FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
        fprintf(stderr, "write_only: cannot create %s\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *block = malloc(BLOCK);
    memset(block, 'a' + rank % 26, BLOCK);
    MPI_Status status;
    for (int k = 0; k < BLOCKS; k++)
        MPI_File_write_at_all(fh, ((MPI_Offset)k * size + rank) * BLOCK, block, BLOCK, MPI_BYTE, &status);
    MPI_File_close(&fh);
    free(block);
    long long mine = (long long)BLOCKS * BLOCK, all = 0;
    MPI_Reduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("{\"bytes_written\":%lld,\"bytes_read\":0}\n", all);
    MPI_Finalize();
    return 0;
}

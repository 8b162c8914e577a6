/*
 * A program that fails as many do: rank 0 prints LINES lines of progress to
 * stderr, then the line that says why it stops ("ERROR: ..."), and calls
 * MPI_Abort with code 3; the other ranks wait in a barrier the abort ends.
 */
#include "common.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(argc == 2, "usage: last_words LINES");
    if (rank == 0) {
        for (int i = 0; i < atoi(argv[1]); i++)
            fprintf(stderr, "step %d of the work before the failure\n", i);
        fprintf(stderr, "ERROR: the input deck names no mesh\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}

/*
 * A POSIX writer, as IOR's POSIX back end is: MPI only to start the ranks
 * and add up, file per process through open/write/pwrite/read/pread. Each
 * rank writes BLOCKS blocks of 64 KiB with write() and 4 KiB with pwrite(),
 * then reads them back with read() and pread() and checks them. Rank 0
 * prints one JSON line with the bytes moved, summed over ranks.
 */
#include <fcntl.h>
#include <unistd.h>

#include "common.h"

#define BLOCK 65536
#define BLOCKS 8
#define SMALL 4096

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(argc == 2, "usage: posix PREFIX");
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);

    static char block[BLOCK], back[BLOCK];
    memset(block, 'a' + rank % 26, sizeof block);
    uint64_t written = 0, read_bytes = 0;
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0, "open for writing");
    for (int k = 0; k < BLOCKS; k++) {
        CHECK(write(fd, block, BLOCK) == BLOCK, "write");
        written += BLOCK;
    }
    CHECK(pwrite(fd, block, SMALL, (off_t)BLOCKS * BLOCK) == SMALL, "pwrite");
    written += SMALL;
    CHECK(close(fd) == 0, "close");

    fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "open for reading");
    for (int k = 0; k < BLOCKS; k++) {
        CHECK(read(fd, back, BLOCK) == BLOCK, "read");
        CHECK(memcmp(back, block, BLOCK) == 0, "the bytes read back");
        read_bytes += BLOCK;
    }
    CHECK(pread(fd, back, SMALL, (off_t)BLOCKS * BLOCK) == SMALL, "pread");
    read_bytes += SMALL;
    CHECK(close(fd) == 0, "close");

    print_bytes_moved(written, read_bytes);
    MPI_Finalize();
    return 0;
}

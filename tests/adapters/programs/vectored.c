/*
 * A POSIX writer through the vectored calls, as a program gathering a header
 * and its data into one system call does: MPI only to start the ranks and add
 * up, a file per process. Each rank writes BLOCKS records with writev() (a
 * 64-byte header, a 16 KiB and a 48 KiB-64 B part: 64 KiB, 3 buffers), then
 * 4 KiB in 2 buffers with pwritev() at the end and 4 KiB in 2 buffers with
 * pwritev2() at offset -1 (the file position: after the records), then reads
 * it all back with readv() and preadv() and checks it. Rank 0 prints one
 * JSON line with the bytes moved, summed over ranks.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common.h"

#define HEADER 64
#define PART 16384
#define RECORD 65536
#define BLOCKS 8
#define SMALL 4096

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(argc == 2, "usage: vectored PREFIX");
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], rank);

    static char record[RECORD], back[RECORD];
    for (int i = 0; i < RECORD; i++)
        record[i] = (char)('a' + (i + rank) % 26);
    struct iovec parts[3] = {{record, HEADER}, {record + HEADER, PART}, {record + HEADER + PART, RECORD - HEADER - PART}};
    struct iovec halves[2] = {{record, SMALL / 2}, {record + SMALL / 2, SMALL / 2}};
    uint64_t written = 0, read_bytes = 0;

    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0, "open for writing");
    for (int k = 0; k < BLOCKS; k++) {
        CHECK(writev(fd, parts, 3) == RECORD, "writev");
        written += RECORD;
    }
    CHECK(pwritev(fd, halves, 2, (off_t)BLOCKS * RECORD + SMALL) == SMALL, "pwritev");
    CHECK(pwritev2(fd, halves, 2, -1, 0) == SMALL, "pwritev2 at the file position");
    written += 2 * SMALL;
    CHECK(close(fd) == 0, "close");

    fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "open for reading");
    struct iovec into[3] = {{back, HEADER}, {back + HEADER, PART}, {back + HEADER + PART, RECORD - HEADER - PART}};
    for (int k = 0; k < BLOCKS; k++) {
        CHECK(readv(fd, into, 3) == RECORD, "readv");
        CHECK(memcmp(back, record, RECORD) == 0, "the bytes read back");
        read_bytes += RECORD;
    }
    struct iovec tail[2] = {{back, SMALL / 2}, {back + SMALL / 2, SMALL / 2}};
    CHECK(preadv(fd, tail, 2, (off_t)BLOCKS * RECORD) == SMALL, "preadv");
    CHECK(memcmp(back, record, SMALL) == 0, "the tail read back");
    read_bytes += SMALL;
    CHECK(close(fd) == 0, "close");

    print_bytes_moved(written, read_bytes);
    MPI_Finalize();
    return 0;
}

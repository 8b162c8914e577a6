/* Helpers shared by the test programs: stop on a failed call, print JSON. */
#ifndef PROGRAMS_COMMON_H
#define PROGRAMS_COMMON_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(ok, what)                                                         \
    do {                                                                        \
        if (!(ok)) {                                                            \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, what);    \
            MPI_Abort(MPI_COMM_WORLD, 2);                                       \
        }                                                                       \
    } while (0)

static inline void print_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

/* Every hint of `info` as a JSON object. */
static inline void print_hints(MPI_Info info)
{
    int nkeys = 0;
    MPI_Info_get_nkeys(info, &nkeys);
    putchar('{');
    for (int i = 0; i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        MPI_Info_get_nthkey(info, i, key);
        MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag);
        if (i)
            putchar(',');
        print_string(key);
        putchar(':');
        print_string(flag ? value : "");
    }
    putchar('}');
}

/* The sum over ranks of a per-rank byte count (the same on every rank). */
static inline uint64_t total(uint64_t mine)
{
    uint64_t sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

/* Rank 0 prints the bytes written and read, summed over ranks, as one JSON line (every rank must call it). */
static inline void print_bytes_moved(uint64_t written, uint64_t read_bytes)
{
    uint64_t all_written = total(written), all_read = total(read_bytes);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        printf("{\"bytes_written\":%llu,\"bytes_read\":%llu}\n", (unsigned long long)all_written,
               (unsigned long long)all_read);
        fflush(stdout);
    }
}

#endif

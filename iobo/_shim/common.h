/*
 * libiobo_preload.so: apply an iobo configuration to an unmodified program,
 * and report what took effect and what I/O the program did.
 *
 * Loaded with LD_PRELOAD (as H5Tuner's preloaded library, SC13), it reads the
 * IOBO_* variables of iobo.config.IOConfig.env() once, each a JSON scalar
 * (integer, true/false, "string", null), and interposes:
 *
 *   H5Fcreate, H5Fopen  file access settings on a copy of the program's fapl:
 *                       alignment, meta block, sieve buffer, metadata cache
 *                       initial size, collective metadata (MPI-IO driver only)
 *   H5Dcreate2, H5Dcreate1 (the 1.6 API), H5Dcreate_anon
 *                       chunked layout of about IOBO_CHUNK_SIZE bytes for a
 *                       dataset the program made contiguous (on a copy)
 *   H5Dwrite            collective MPI-IO transfer for files on the MPI-IO driver
 *   MPI_File_open       MPI-IO / Lustre hints added to a duplicate of the
 *                       program's MPI_Info (iobo's value wins over the program's)
 *
 * After each of these it reads back what is in effect (H5Fget_access_plist,
 * H5Dget_create_plist, H5Pget_mpio_actual_io_mode, MPI_File_get_info), so the
 * log and the report say what the libraries actually use.
 *
 * It also counts, per process and per level, the calls, bytes and seconds
 * (CLOCK_MONOTONIC) inside reads and writes: HDF5 (H5Dwrite, H5Dread), MPI-IO
 * (MPI_File_write*, MPI_File_read*, MPI_File_iwrite*, ...) and POSIX (write,
 * pwrite, read, pread and their vectored forms on regular files). The levels nest (an H5Dwrite ends in
 * MPI-IO calls, which end in POSIX calls): they are reported side by side,
 * never added up.
 *
 * At exit (MPI_Finalize, or process exit without MPI) it warns on stderr
 * about requested settings that never found a call to act on or did not take
 * effect, and about HDF5 linked statically; with IOBO_PRELOAD_REPORT=prefix
 * each process writes prefix.<rank>.json (format in adapters/README.md).
 *
 * A variable that is not set (or is null) leaves the program's own setting.
 * A malformed variable is ignored with one warning naming it, its value and
 * what is allowed; the program is never stopped by the shim.
 * IOBO_PRELOAD_VERBOSE=1 logs, on stderr, what is in effect for each file.
 *
 * Built against Debian's MPICH and parallel HDF5 1.10.8 (see the Makefile);
 * the program must use those same libraries. Sizes are in bytes.
 *
 * The source is split by level, as Darshan's runtime is (darshan-hdf5.c,
 * darshan-mpiio.c, darshan-posix.c beside its common parts):
 *
 *   common.h   what the levels share: settings, REAL(), accounting, notes of
 *              what took effect, file records, the JSON writer
 *   common.c   settings and init, output, accounting state, outcome of the
 *              settings, file records, how the program has HDF5, and at exit
 *              the warnings, the report, MPI_Finalize, MPI_Abort (lets the
 *              launcher read the program's last words) and the destructor
 *   hdf5.c     H5Fcreate, H5Fopen, H5Fclose, H5Fflush, H5Dcreate2/1/anon,
 *              H5Dopen2, H5Dclose, H5Dwrite, H5Dread; the report's datasets
 *              and transfer modes
 *   mpiio.c    MPI_File_open/close/set_view/set_info (hints), the MPI_File_
 *              reads and writes, sync, set_size, preallocate
 *   posix.c    open, creat, close, read, write, pread, pwrite, readv, writev,
 *              preadv, pwritev (and their 64, 2 and 64v2 forms), fsync, fdatasync
 *              on regular files
 *
 * The library exports the wrapped functions only. Whatever the files share
 * is declared below between `#pragma GCC visibility push(hidden)` and `pop`,
 * so it stays inside the library (a program defining its own `say` or
 * `ensure_init` does not interpose it); helpers of one file stay static.
 */
#ifndef IOBO_PRELOAD_COMMON_H
#define IOBO_PRELOAD_COMMON_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>
#include <hdf5.h>

/* Everything declared from here to the `pop` is internal to the library. */
#pragma GCC visibility push(hidden)

#define TAG "iobo_preload"
#define LINE_MAX_CHARS 2048
#define NAME_CHARS 512

/* ------------------------------------------------------------------------ */
/* settings                                                                  */

enum kind { SIZE, BOOLEAN, CHOICE, TEXT };

struct setting {
    const char *env;        /* variable name */
    enum kind kind;
    uint64_t min, max;      /* SIZE: allowed range */
    const char *unit;       /* SIZE: " (bytes)" or "" */
    const char *choices[4]; /* CHOICE: allowed strings */
    const char *hint;       /* MPI_Info key, or NULL for an HDF5 setting */
    /* parsed */
    bool set;
    uint64_t number;        /* SIZE, BOOLEAN (0/1) */
    char text[256];         /* the value as text: decimal, true/false, or the string */
    /* outcome, counted over the calls that could take the setting */
    uint64_t considered;    /* calls where it could act */
    uint64_t acted;         /* calls where the shim set it */
    uint64_t in_effect;     /* ... and reading back showed the requested value */
    uint64_t differs;       /* ... and reading back showed another value */
};

enum {
    ALIGN_THRESHOLD, ALIGN_INTERVAL, META_BLOCK, SIEVE_BUF, MDC_INITIAL, COLL_METADATA,
    LAYOUT, CHUNK_SIZE, TRANSFER_MODE,
    CB_BUFFER_SIZE, CB_NODES, ROMIO_CB_WRITE, ROMIO_DS_WRITE, ROMIO_CB_READ, ROMIO_DS_READ, CB_CONFIG_LIST,
    STRIPING_FACTOR, STRIPING_UNIT,
    N_SETTINGS
};

extern struct setting settings[N_SETTINGS];
extern bool verbose;

/* The settings are read on the first call of any wrapper that acts on them. */
void ensure_init(void);

static inline bool is_set(int which)
{
    return settings[which].set;
}

static inline bool choice_is(int which, const char *value)
{
    return settings[which].set && strcmp(settings[which].text, value) == 0;
}

/* The setting's name in iobo's space: IOBO_CB_NODES -> cb_nodes. */
void setting_name(int which, char *out, size_t size);

/* ------------------------------------------------------------------------ */
/* the wrapped functions: the next definition after the shim                 */

/* The next definition of `name` after the shim (another preloaded tool, else
 * the library), looked up on first use; NULL when there is none. */
static inline void *resolved(void **slot, const char *name)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

/* Each file declares `typedef ... (*name_fn)(...)` and `static name_fn real_name`. */
#define REAL(name) ((name##_fn)resolved((void **)&real_##name, #name))

/* ------------------------------------------------------------------------ */
/* output                                                                    */

/* Set while the shim does its own file I/O (the report, reading the
 * executable): the POSIX counters leave it out. */
extern __thread bool quiet __attribute__((tls_model("initial-exec")));

/* True where a message for every rank should appear: rank 0 of
 * MPI_COMM_WORLD, or any process that is not (or no longer) in MPI. */
bool world_rank_zero(void);

/* One line "iobo_preload: ..." on stderr. */
void say(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* A growing "key=value key=value" list for a log line. */
struct note {
    char text[LINE_MAX_CHARS];
    size_t used;
};

void note_add(struct note *n, const char *format, ...) __attribute__((format(printf, 2, 3)));

static inline uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* accounting: calls, bytes, seconds and access sizes per level              */

enum level { HDF5_LEVEL, MPIIO_LEVEL, POSIX_LEVEL, N_LEVELS };
enum direction { WRITE, READ, N_DIRECTIONS };
extern const char *const direction_names[N_DIRECTIONS];

#define N_BINS 65 /* bin 0: 0 bytes; bin k >= 1: [2^(k-1), 2^k) bytes */

struct traffic {
    uint64_t calls, bytes, nanoseconds;
    uint64_t requested; /* POSIX only: bytes the calls asked for (a read at a file's end returns fewer) */
    uint64_t collective_calls, independent_calls; /* MPI-IO only */
    uint64_t histogram[N_BINS];
};

struct level_counters {
    uint64_t files_opened;
    struct traffic traffic[N_DIRECTIONS];
};

/* Updated with relaxed atomic adds: no lock, no allocation on the I/O path. */
extern struct level_counters counters[N_LEVELS];
extern uint64_t hdf5_calls; /* every intercepted HDF5 call */

static inline void add(uint64_t *counter, uint64_t amount)
{
    __atomic_fetch_add(counter, amount, __ATOMIC_RELAXED);
}

static inline uint64_t load(const uint64_t *counter)
{
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

static inline unsigned size_bin(uint64_t bytes)
{
    return bytes ? 64u - (unsigned)__builtin_clzll(bytes) : 0u;
}

static inline void account(enum level level, enum direction direction, uint64_t bytes, uint64_t nanoseconds)
{
    struct traffic *t = &counters[level].traffic[direction];
    add(&t->calls, 1);
    add(&t->bytes, bytes);
    add(&t->nanoseconds, nanoseconds);
    add(&t->histogram[size_bin(bytes)], 1);
}

/* I/O phases: the wall time a process spends inside I/O calls of every kind
 * (open, create, read, write, flush, sync, close), each call counted once, at
 * the level of the outermost wrapped call (an H5Fclose's MPI-IO and POSIX
 * calls are inside its time). A library's own I/O outside the program's
 * calls (h5py closing a dataset through H5Idec_ref flushes its chunks with
 * MPI-IO writes) is outermost at the lower level. POSIX time is also kept
 * apart for files opened for writing (a sync of the output, not a read of
 * an input or of Python's modules). Threads doing I/O at once each count. */
enum phase_part { PHASE_HDF5, PHASE_MPIIO, PHASE_POSIX, PHASE_POSIX_OUTPUTS, N_PHASE_PARTS };
extern uint64_t phase_ns[N_PHASE_PARTS];
extern __thread unsigned phase_depth __attribute__((tls_model("initial-exec")));

/* Enter a wrapped I/O call: its start time when it is the outermost, else 0. */
static inline uint64_t phase_enter(void)
{
    return phase_depth++ == 0 ? now_ns() : 0;
}

/* Leave it: the outermost call's seconds go to `part`. */
static inline void phase_leave(enum phase_part part, uint64_t start)
{
    if (--phase_depth == 0 && start)
        add(&phase_ns[part], now_ns() - start);
}

/* ------------------------------------------------------------------------ */
/* outcome of each requested setting                                         */

/* A call where the setting could act but the shim left it (why: `reason`;
 * the program's own value: `in_effect`). */
void note_skipped(int which, const char *in_effect, const char *reason, const char *where);

/* A call where the shim set it. */
void note_acted(int which);

/* What reading back showed after the shim acted: `in_effect` NULL when the
 * requested value holds, else the value found and why. */
void note_effect(int which, const char *in_effect, const char *reason, const char *where);

/* ------------------------------------------------------------------------ */
/* files: what is in effect for each, and how long it was open               */

/* HDF5 file access settings read back from an open file. */
struct fapl_values {
    bool ok;
    hsize_t threshold, interval, meta_block;
    size_t sieve_buf, mdc_initial;
    bool mdc_ok, coll_ok;
    hbool_t coll_ops, coll_write;
};

struct file_record {
    enum level level; /* HDF5_LEVEL or MPIIO_LEVEL */
    char name[NAME_CHARS];      /* as the program gave it */
    char path[NAME_CHARS];      /* absolute, ROMIO's "ufs:"-style prefix removed; "" when unknown */
    char fs_type[32];           /* of the file system the file is on, from statfs(2) */
    uint64_t opens;
    uint64_t first_open_ns, last_close_ns; /* last_close_ns 0: not closed */
    char *hints;      /* MPI-IO: the hints of the last open, "key\0value\0..." */
    size_t hints_size;
    bool mpio;        /* HDF5: the MPI-IO driver */
    struct fapl_values fapl; /* HDF5 */
};

extern struct file_record *records;
extern pthread_mutex_t records_lock;

/* Index of the record of (level, name), added when new; -1 when full. Call with records_lock held. */
long record_for(enum level level, const char *name);

/* The file of record `index` (-1: none) was closed now. */
void record_close(long index);

/* ------------------------------------------------------------------------ */
/* the report: a JSON document grown in memory (written once, at exit)       */

struct json {
    char *text;
    size_t used, capacity;
    bool comma;
};

/* Open an object or array ("{" or "["), as the value of `key` inside an object (NULL in an array). */
void j_open(struct json *j, const char *key, const char *bracket);
void j_close(struct json *j, const char *bracket);
void j_string(struct json *j, const char *key, const char *value);
void j_u64(struct json *j, const char *key, uint64_t value);
void j_bool(struct json *j, const char *key, bool value);

void j_i64(struct json *j, const char *key, int64_t value);
void j_seconds(struct json *j, const char *key, uint64_t nanoseconds);
void j_key(struct json *j, const char *key);
void j_raw(struct json *j, const char *text, size_t length);
void j_printf(struct json *j, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* The report's "datasets", "datasets_created" and "transfer" (hdf5.c). */
void report_datasets(struct json *j);

/* ------------------------------------------------------------------------ */
/* the process, for the report and the trace (common.c)                      */

extern uint64_t start_ns; /* when the shim was loaded */

/* Rank in MPI_COMM_WORLD; before MPI_Init or after MPI_Finalize, PMI_RANK, else 0. */
int world_rank(void);

/* Size of MPI_COMM_WORLD; before MPI_Init or after MPI_Finalize, PMI_SIZE, else 1. */
int world_size(void);

/* Whether this process takes part (initialized MPI, called HDF5, opened a file with MPI-IO). */
bool took_part(void);

/* The executable's path. */
void program_path(char *out, size_t size);

/* "dynamic", "static" or "none": how the program has HDF5, given the HDF5 calls intercepted. */
const char *hdf5_linked(uint64_t calls);

/* The absolute path of a file name as an HDF5 or MPI-IO open was given it; "" when unresolved. */
void absolute_path(const char *name, char *out, size_t size);

/* ------------------------------------------------------------------------ */
/* the trace (trace.c): with IOBO_PRELOAD_TRACE=prefix, every outermost I/O   */
/* call as one JSON line in prefix.<rank>.trace.jsonl                         */

/* Whether IOBO_PRELOAD_TRACE asks for a trace. */
bool trace_active(void);

/* A line for the call `op` started at `t0` (phase_enter's value: 0 when the
 * call is not the outermost); NULL when there is nothing to record. The
 * caller adds the call's fields, then trace_done. */
struct json *trace_start(const char *op, uint64_t t0);

/* End the line (t0, t1 now, ok) and write it. */
void trace_done(struct json *j, uint64_t t0, bool ok);

/* The same for a call that ended at `t1` (ns, CLOCK_MONOTONIC). */
void trace_done_at(struct json *j, uint64_t t0, uint64_t t1, bool ok);

/* Something the shim saw but cannot record (once per text), for the end line. */
void trace_unwrapped(const char *what);

/* At MPI_Finalize or exit: the end line, then the file is complete. */
void trace_finish(int rank, int ranks, const char *linked);

/* A handle list as a JSON array of integers (dims, starts...). */
void j_dims(struct json *j, const char *key, int rank, const hsize_t *values, bool unlimited_as_minus_one);

#pragma GCC visibility pop

#endif /* IOBO_PRELOAD_COMMON_H */

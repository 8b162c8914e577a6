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
 * pwrite, read, pread on regular files). The levels nest (an H5Dwrite ends in
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
 */
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
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>
#include <hdf5.h>

#define TAG "iobo_preload"

/* H5C__MIN_MAX_CACHE_SIZE and H5C__MAX_MAX_CACHE_SIZE (private in HDF5 1.10) */
#define MDC_MIN_BYTES ((uint64_t)1024)
#define MDC_MAX_BYTES ((uint64_t)128 * 1024 * 1024)
/* HDF5 1.10: a chunk holds fewer than 2^32 elements and 4 GiB */
#define CHUNK_MAX_BYTES ((uint64_t)UINT32_MAX)
#define DEFAULT_CHUNK_BYTES ((uint64_t)1024 * 1024) /* iobo's chunk_size default */
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

#define BYTES(name, lo, hi, key) {.env = name, .kind = SIZE, .min = lo, .max = hi, .unit = " (bytes)", .hint = key}
#define COUNT(name, lo, hi, key) {.env = name, .kind = SIZE, .min = lo, .max = hi, .unit = "", .hint = key}
#define ROMIO_SWITCH(name, key) \
    {.env = name, .kind = CHOICE, .choices = {"automatic", "enable", "disable"}, .hint = key}

static struct setting settings[N_SETTINGS] = {
    [ALIGN_THRESHOLD] = BYTES("IOBO_ALIGNMENT_THRESHOLD", 0, UINT64_MAX, NULL),
    [ALIGN_INTERVAL] = BYTES("IOBO_ALIGNMENT_INTERVAL", 1, UINT64_MAX, NULL),
    [META_BLOCK] = BYTES("IOBO_META_BLOCK_SIZE", 0, UINT64_MAX, NULL),
    [SIEVE_BUF] = BYTES("IOBO_SIEVE_BUF_SIZE", 0, SIZE_MAX, NULL),
    [MDC_INITIAL] = BYTES("IOBO_MDC_INITIAL_SIZE", MDC_MIN_BYTES, MDC_MAX_BYTES, NULL),
    [COLL_METADATA] = {.env = "IOBO_COLL_METADATA", .kind = BOOLEAN},
    [LAYOUT] = {.env = "IOBO_LAYOUT", .kind = CHOICE, .choices = {"contiguous", "chunked"}},
    [CHUNK_SIZE] = BYTES("IOBO_CHUNK_SIZE", 1, CHUNK_MAX_BYTES, NULL),
    [TRANSFER_MODE] = {.env = "IOBO_TRANSFER_MODE", .kind = CHOICE, .choices = {"independent", "collective"}},
    [CB_BUFFER_SIZE] = BYTES("IOBO_CB_BUFFER_SIZE", 1, INT_MAX, "cb_buffer_size"),
    [CB_NODES] = COUNT("IOBO_CB_NODES", 1, INT_MAX, "cb_nodes"),
    [ROMIO_CB_WRITE] = ROMIO_SWITCH("IOBO_ROMIO_CB_WRITE", "romio_cb_write"),
    [ROMIO_DS_WRITE] = ROMIO_SWITCH("IOBO_ROMIO_DS_WRITE", "romio_ds_write"),
    [ROMIO_CB_READ] = ROMIO_SWITCH("IOBO_ROMIO_CB_READ", "romio_cb_read"),
    [ROMIO_DS_READ] = ROMIO_SWITCH("IOBO_ROMIO_DS_READ", "romio_ds_read"),
    [CB_CONFIG_LIST] = {.env = "IOBO_CB_CONFIG_LIST", .kind = TEXT, .hint = "cb_config_list"},
    [STRIPING_FACTOR] = COUNT("IOBO_STRIPING_FACTOR", 1, INT_MAX, "striping_factor"),
    [STRIPING_UNIT] = BYTES("IOBO_STRIPING_UNIT", 1, INT_MAX, "striping_unit"),
};

static bool verbose;
static char report_prefix[PATH_MAX]; /* IOBO_PRELOAD_REPORT, "" when not set */

/* ------------------------------------------------------------------------ */
/* the wrapped functions: the next definition after the shim                 */

/* The next definition of `name` after the shim (another preloaded tool, else
 * the library), looked up on first use; NULL when there is none. */
static void *resolved(void **slot, const char *name)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!fn) {
        fn = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

#define REAL(name) ((name##_fn)resolved((void **)&real_##name, #name))

typedef hid_t (*H5Fcreate_fn)(const char *, unsigned, hid_t, hid_t);
typedef hid_t (*H5Fopen_fn)(const char *, unsigned, hid_t);
typedef herr_t (*H5Fclose_fn)(hid_t);
typedef hid_t (*H5Dcreate2_fn)(hid_t, const char *, hid_t, hid_t, hid_t, hid_t, hid_t);
typedef hid_t (*H5Dcreate1_fn)(hid_t, const char *, hid_t, hid_t, hid_t);
typedef hid_t (*H5Dcreate_anon_fn)(hid_t, hid_t, hid_t, hid_t, hid_t);
typedef herr_t (*H5Dwrite_fn)(hid_t, hid_t, hid_t, hid_t, hid_t, const void *);
typedef herr_t (*H5Dread_fn)(hid_t, hid_t, hid_t, hid_t, hid_t, void *);
typedef int (*MPI_File_open_fn)(MPI_Comm, const char *, int, MPI_Info, MPI_File *);
typedef int (*MPI_File_close_fn)(MPI_File *);
typedef int (*MPI_File_set_view_fn)(MPI_File, MPI_Offset, MPI_Datatype, MPI_Datatype, const char *, MPI_Info);
typedef int (*MPI_File_set_info_fn)(MPI_File, MPI_Info);
typedef int (*MPI_Finalize_fn)(void);

static H5Fcreate_fn real_H5Fcreate;
static H5Fopen_fn real_H5Fopen;
static H5Fclose_fn real_H5Fclose;
static H5Dcreate2_fn real_H5Dcreate2;
static H5Dcreate1_fn real_H5Dcreate1;
static H5Dcreate_anon_fn real_H5Dcreate_anon;
static H5Dwrite_fn real_H5Dwrite;
static H5Dread_fn real_H5Dread;
static MPI_File_open_fn real_MPI_File_open;
static MPI_File_close_fn real_MPI_File_close;
static MPI_File_set_view_fn real_MPI_File_set_view;
static MPI_File_set_info_fn real_MPI_File_set_info;
static MPI_Finalize_fn real_MPI_Finalize;

/* ------------------------------------------------------------------------ */
/* output                                                                    */

/* Set while the shim does its own file I/O (the report, reading the
 * executable): the POSIX counters leave it out. */
static __thread bool quiet __attribute__((tls_model("initial-exec")));

/* This process's rank in MPI_COMM_WORLD; without MPI (not yet, or never
 * initialized) the rank the process manager gave it (PMI_RANK), else 0. */
static int world_rank(void)
{
    int initialized = 0, finalized = 0, rank = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (initialized && !finalized) {
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        return rank;
    }
    const char *pmi = getenv("PMI_RANK");
    return pmi ? atoi(pmi) : 0;
}

/* True where a message for every rank should appear: rank 0 of
 * MPI_COMM_WORLD, or any process that is not (or no longer) in MPI. */
static bool world_rank_zero(void)
{
    int initialized = 0, finalized = 0, rank = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (!initialized || finalized)
        return true;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0;
}

static void say(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *format, ...)
{
    char line[LINE_MAX_CHARS];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    bool was_quiet = quiet;
    quiet = true;
    fprintf(stderr, TAG ": %s\n", line); /* one call: lines of ranks do not interleave */
    quiet = was_quiet;
}

/* A growing "key=value key=value" list for a log line. */
struct note {
    char text[LINE_MAX_CHARS];
    size_t used;
};

static void note_add(struct note *n, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void note_add(struct note *n, const char *format, ...)
{
    if (n->used >= sizeof n->text - 1)
        return;
    if (n->used)
        n->text[n->used++] = ' ';
    va_list args;
    va_start(args, format);
    int written = vsnprintf(n->text + n->used, sizeof n->text - n->used, format, args);
    va_end(args);
    if (written > 0)
        n->used += (size_t)written < sizeof n->text - n->used ? (size_t)written : sizeof n->text - n->used - 1;
    n->text[n->used] = '\0';
}

/* ------------------------------------------------------------------------ */
/* reading the environment                                                   */

static void describe_allowed(const struct setting *s, char *out, size_t size)
{
    switch (s->kind) {
    case SIZE:
        if (s->max == UINT64_MAX || s->max == SIZE_MAX)
            snprintf(out, size, "a JSON integer >= %" PRIu64 "%s, or null", s->min, s->unit);
        else
            snprintf(out, size, "a JSON integer from %" PRIu64 " to %" PRIu64 "%s, or null", s->min, s->max, s->unit);
        break;
    case BOOLEAN:
        snprintf(out, size, "true, false or null");
        break;
    case CHOICE: {
        size_t used = 0;
        for (int i = 0; s->choices[i] && used < size; i++)
            used += (size_t)snprintf(out + used, size - used, "%s\"%s\"", i ? ", " : "", s->choices[i]);
        if (used < size)
            snprintf(out + used, size - used, " (JSON strings, with the quotes), or null");
        break;
    }
    case TEXT:
        snprintf(out, size, "a non-empty JSON string without escapes, e.g. \"*:1\", or null");
        break;
    }
}

static void warn_ignored(const struct setting *s, const char *value, const char *why)
{
    char allowed[256];
    describe_allowed(s, allowed, sizeof allowed);
    if (world_rank_zero())
        say("warning: ignoring %s='%s': %s; allowed: %s", s->env, value, why, allowed);
}

/* The text between a pair of double quotes, or NULL (why set) when it is not a simple JSON string. */
static bool json_string(const char *value, char *out, size_t size, const char **why)
{
    size_t length = strlen(value);
    if (length < 2 || value[0] != '"' || value[length - 1] != '"') {
        *why = "not a JSON string (write it in double quotes)";
        return false;
    }
    if (length - 2 >= size) {
        *why = "too long";
        return false;
    }
    for (size_t i = 1; i + 1 < length; i++) {
        if (value[i] == '"' || value[i] == '\\' || (unsigned char)value[i] < 0x20) {
            *why = "a JSON string with quotes, escapes or control characters";
            return false;
        }
    }
    memcpy(out, value + 1, length - 2);
    out[length - 2] = '\0';
    return true;
}

static void parse_setting(struct setting *s)
{
    const char *raw = getenv(s->env);
    if (!raw)
        return;
    /* trim surrounding white space */
    char value[512];
    while (*raw == ' ' || *raw == '\t' || *raw == '\n' || *raw == '\r')
        raw++;
    snprintf(value, sizeof value, "%s", raw);
    size_t length = strlen(value);
    while (length && (value[length - 1] == ' ' || value[length - 1] == '\t' || value[length - 1] == '\n' ||
                      value[length - 1] == '\r'))
        value[--length] = '\0';
    if (strcmp(value, "null") == 0)
        return; /* "leave unset" */

    const char *why = NULL;
    switch (s->kind) {
    case SIZE: {
        bool digits = length > 0 && length <= 20;
        for (size_t i = 0; i < length && digits; i++)
            digits = value[i] >= '0' && value[i] <= '9';
        if (!digits) {
            warn_ignored(s, value, value[0] == '-' ? "negative" : "not a JSON integer");
            return;
        }
        errno = 0;
        unsigned long long number = strtoull(value, NULL, 10);
        if (errno == ERANGE || number < s->min || number > s->max) {
            warn_ignored(s, value, "out of range");
            return;
        }
        s->number = number;
        snprintf(s->text, sizeof s->text, "%" PRIu64, s->number);
        break;
    }
    case BOOLEAN:
        if (strcmp(value, "true") == 0)
            s->number = 1;
        else if (strcmp(value, "false") == 0)
            s->number = 0;
        else {
            warn_ignored(s, value, "not a JSON boolean");
            return;
        }
        snprintf(s->text, sizeof s->text, "%s", s->number ? "true" : "false");
        break;
    case CHOICE: {
        if (!json_string(value, s->text, sizeof s->text, &why)) {
            warn_ignored(s, value, why);
            return;
        }
        bool known = false;
        for (int i = 0; s->choices[i]; i++)
            known = known || strcmp(s->text, s->choices[i]) == 0;
        if (!known) {
            warn_ignored(s, value, "not one of the allowed values");
            return;
        }
        break;
    }
    case TEXT:
        if (!json_string(value, s->text, sizeof s->text, &why)) {
            warn_ignored(s, value, why);
            return;
        }
        if (!s->text[0]) {
            warn_ignored(s, value, "empty");
            return;
        }
        break;
    }
    s->set = true;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static uint64_t start_ns; /* when the shim was loaded */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void init(void)
{
    const char *flag = getenv("IOBO_PRELOAD_VERBOSE");
    if (flag && (!strcmp(flag, "1") || !strcmp(flag, "true")))
        verbose = true;
    else if (flag && *flag && strcmp(flag, "0") && strcmp(flag, "false") && world_rank_zero())
        say("warning: ignoring IOBO_PRELOAD_VERBOSE='%s'; allowed: 1 or true (log), 0 or false (quiet)", flag);

    const char *prefix = getenv("IOBO_PRELOAD_REPORT");
    if (prefix && *prefix) {
        if (strlen(prefix) + 32 < sizeof report_prefix)
            snprintf(report_prefix, sizeof report_prefix, "%s", prefix);
        else if (world_rank_zero())
            say("warning: ignoring IOBO_PRELOAD_REPORT: longer than %zu characters", sizeof report_prefix - 32);
    }

    for (int i = 0; i < N_SETTINGS; i++)
        parse_setting(&settings[i]);
}

static void ensure_init(void)
{
    pthread_once(&init_once, init);
}

__attribute__((constructor)) static void loaded(void)
{
    start_ns = now_ns();
}

static bool is_set(int which)
{
    return settings[which].set;
}

static bool choice_is(int which, const char *value)
{
    return settings[which].set && strcmp(settings[which].text, value) == 0;
}

static bool is_hdf5_setting(int which)
{
    return settings[which].hint == NULL;
}

/* The setting's name in iobo's space: IOBO_CB_NODES -> cb_nodes. */
static void setting_name(int which, char *out, size_t size)
{
    const char *env = settings[which].env + strlen("IOBO_");
    size_t i = 0;
    for (; env[i] && i + 1 < size; i++)
        out[i] = (char)(env[i] >= 'A' && env[i] <= 'Z' ? env[i] - 'A' + 'a' : env[i]);
    out[i] = '\0';
}

/* ------------------------------------------------------------------------ */
/* accounting: calls, bytes, seconds and access sizes per level              */

enum level { HDF5_LEVEL, MPIIO_LEVEL, POSIX_LEVEL, N_LEVELS };
enum direction { WRITE, READ, N_DIRECTIONS };
static const char *const level_names[N_LEVELS] = {"hdf5", "mpiio", "posix"};
static const char *const direction_names[N_DIRECTIONS] = {"write", "read"};

#define N_BINS 65 /* bin 0: 0 bytes; bin k >= 1: [2^(k-1), 2^k) bytes */

struct traffic {
    uint64_t calls, bytes, nanoseconds;
    uint64_t collective_calls, independent_calls; /* MPI-IO only */
    uint64_t histogram[N_BINS];
};

struct level_counters {
    uint64_t files_opened;
    struct traffic traffic[N_DIRECTIONS];
};

/* Updated with relaxed atomic adds: no lock, no allocation on the I/O path. */
static struct level_counters counters[N_LEVELS];
static uint64_t hdf5_calls; /* every intercepted HDF5 call */

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
static const char *const phase_names[N_PHASE_PARTS] = {"hdf5", "mpiio", "posix", "posix_outputs"};
static uint64_t phase_ns[N_PHASE_PARTS];
static __thread unsigned phase_depth __attribute__((tls_model("initial-exec")));

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

/* A requested setting that did not take effect somewhere, once per
 * (setting, value in effect, reason); `where` is the first file or dataset. */
struct mismatch {
    int which;
    char in_effect[128];
    char reason[256];
    char where[NAME_CHARS];
    uint64_t count;
};

#define MAX_MISMATCHES 64
static struct mismatch mismatches[MAX_MISMATCHES];
static size_t n_mismatches;
static pthread_mutex_t mismatch_lock = PTHREAD_MUTEX_INITIALIZER;

static void record_mismatch(int which, const char *in_effect, const char *reason, const char *where)
{
    pthread_mutex_lock(&mismatch_lock);
    size_t i = 0;
    for (; i < n_mismatches; i++) {
        const struct mismatch *m = &mismatches[i];
        if (m->which == which && !strcmp(m->in_effect, in_effect) && !strcmp(m->reason, reason))
            break;
    }
    if (i == n_mismatches && n_mismatches < MAX_MISMATCHES) {
        struct mismatch *m = &mismatches[n_mismatches++];
        m->which = which;
        snprintf(m->in_effect, sizeof m->in_effect, "%s", in_effect);
        snprintf(m->reason, sizeof m->reason, "%s", reason);
        snprintf(m->where, sizeof m->where, "%s", where ? where : "");
        m->count = 0;
    }
    if (i < n_mismatches)
        mismatches[i].count++;
    pthread_mutex_unlock(&mismatch_lock);
}

/* The first mismatch recorded for a setting (copied), or false. */
static bool first_mismatch(int which, struct mismatch *out)
{
    bool found = false;
    pthread_mutex_lock(&mismatch_lock);
    for (size_t i = 0; i < n_mismatches && !found; i++) {
        if (mismatches[i].which == which) {
            *out = mismatches[i];
            found = true;
        }
    }
    pthread_mutex_unlock(&mismatch_lock);
    return found;
}

/* A call where the setting could act but the shim left it (why: `reason`;
 * the program's own value: `in_effect`). */
static void note_skipped(int which, const char *in_effect, const char *reason, const char *where)
{
    add(&settings[which].considered, 1);
    record_mismatch(which, in_effect, reason, where);
}

static void note_acted(int which)
{
    add(&settings[which].considered, 1);
    add(&settings[which].acted, 1);
}

/* What reading back showed after the shim acted: `in_effect` NULL when the
 * requested value holds, else the value found and why. */
static void note_effect(int which, const char *in_effect, const char *reason, const char *where)
{
    if (!in_effect)
        add(&settings[which].in_effect, 1);
    else {
        add(&settings[which].differs, 1);
        record_mismatch(which, in_effect, reason, where);
    }
}

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

#define MAX_RECORDS 256
static struct file_record *records;
static size_t n_records, records_capacity;
static uint64_t records_dropped; /* files beyond MAX_RECORDS: counted, not listed */
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;

/* The file system type of `path` by its statfs(2) magic, named as /proc/mounts names it. */
static void file_system_name(const char *path, char *out, size_t size)
{
    static const struct { unsigned long magic; const char *name; } known[] = {
        {0x0BD00BD0UL, "lustre"}, {0x01021994UL, "tmpfs"}, {0xEF53UL, "ext4"}, {0x58465342UL, "xfs"},
        {0x6969UL, "nfs"}, {0x47504653UL, "gpfs"}, {0x9123683EUL, "btrfs"}, {0x794C7630UL, "overlay"},
        {0x19830326UL, "beegfs"}, {0x858458F6UL, "ramfs"},
    };
    struct statfs fs;
    if (!path[0] || statfs(path, &fs) != 0) {
        snprintf(out, size, "unknown");
        return;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if ((unsigned long)fs.f_type == known[i].magic) {
            snprintf(out, size, "%s", known[i].name);
            return;
        }
    }
    snprintf(out, size, "unknown:0x%lx", (unsigned long)fs.f_type);
}

/* The absolute path of a file name an HDF5 or MPI-IO open was given (ROMIO's
 * "ufs:", "lustre:"... prefix removed); "" when it cannot be resolved. */
static void absolute_path(const char *name, char *out, size_t size)
{
    const char *colon = strchr(name, ':'), *slash = strchr(name, '/');
    if (colon && colon - name > 1 && (!slash || colon < slash))
        name = colon + 1;
    char resolved_path[PATH_MAX];
    size_t length = realpath(name, resolved_path) ? strlen(resolved_path) : size;
    if (length < size)
        memcpy(out, resolved_path, length + 1);
    else
        out[0] = '\0'; /* unresolved, or longer than the record holds */
}

/* Index of the record of (level, name), added when new; -1 when full. Call with records_lock held. */
static long record_for(enum level level, const char *name)
{
    for (size_t i = 0; i < n_records; i++)
        if (records[i].level == level && !strcmp(records[i].name, name))
            return (long)i;
    if (n_records == MAX_RECORDS) {
        records_dropped++;
        return -1;
    }
    if (n_records == records_capacity) {
        size_t capacity = records_capacity ? 2 * records_capacity : 16;
        struct file_record *grown = realloc(records, capacity * sizeof *grown);
        if (!grown)
            return -1;
        records = grown;
        records_capacity = capacity;
    }
    struct file_record *r = &records[n_records];
    memset(r, 0, sizeof *r);
    r->level = level;
    snprintf(r->name, sizeof r->name, "%s", name);
    absolute_path(name, r->path, sizeof r->path);
    file_system_name(r->path, r->fs_type, sizeof r->fs_type);
    return (long)n_records++;
}

static void record_close(long index)
{
    if (index < 0)
        return;
    pthread_mutex_lock(&records_lock);
    records[index].last_close_ns = now_ns();
    pthread_mutex_unlock(&records_lock);
}

/* ------------------------------------------------------------------------ */
/* HDF5 files opened through the shim: driver and the rank that logs for them */

struct file_entry {
    hid_t id;
    bool mpio;
    bool logs;          /* this process logs for the file (rank 0 of its communicator) */
    bool transfer_said; /* the collective transfer line was logged */
    long record;        /* index in records, or -1 */
};

static struct file_entry *files;
static size_t n_files, files_capacity;
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember_file(hid_t id, bool mpio, bool logs, long record)
{
    pthread_mutex_lock(&files_lock);
    for (size_t i = 0; i < n_files; i++) {
        if (files[i].id == id) { /* the same id again (HDF5 ids are not reused) */
            files[i] = (struct file_entry){id, mpio, logs, false, record};
            pthread_mutex_unlock(&files_lock);
            return;
        }
    }
    if (n_files == files_capacity) {
        size_t capacity = files_capacity ? 2 * files_capacity : 16;
        struct file_entry *grown = realloc(files, capacity * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&files_lock);
            return;
        }
        files = grown;
        files_capacity = capacity;
    }
    files[n_files++] = (struct file_entry){id, mpio, logs, false, record};
    pthread_mutex_unlock(&files_lock);
}

/* The entry of file id `file` (copied out), or false. */
static bool file_entry_of(hid_t file, struct file_entry *out, bool mark_transfer_said)
{
    bool found = false;
    pthread_mutex_lock(&files_lock);
    for (size_t i = 0; i < n_files; i++) {
        if (files[i].id == file) {
            *out = files[i];
            if (mark_transfer_said)
                files[i].transfer_said = true;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&files_lock);
    return found;
}

/* The entry of the file holding object `object` (copied out), or false when
 * the file was not opened through the shim. */
static bool file_of(hid_t object, struct file_entry *out, bool mark_transfer_said)
{
    hid_t file = H5I_INVALID_HID;
    H5E_BEGIN_TRY { file = H5Iget_file_id(object); } H5E_END_TRY;
    if (file < 0)
        return false;
    bool found = file_entry_of(file, out, mark_transfer_said);
    H5E_BEGIN_TRY { H5Idec_ref(file); } H5E_END_TRY;
    return found;
}

static bool uses_mpio(hid_t fapl)
{
    if (fapl == H5P_DEFAULT)
        return false;
    hid_t driver = H5I_INVALID_HID;
    H5E_BEGIN_TRY { driver = H5Pget_driver(fapl); } H5E_END_TRY;
    return driver >= 0 && driver == H5FD_MPIO;
}

/* Whether this process logs for a file opened with `fapl`: rank 0 of the
 * file's communicator for the MPI-IO driver, every process otherwise (each
 * then opens its own file). Only asked when verbose: H5Pget_fapl_mpio
 * duplicates the communicator, which is collective, as H5Fcreate/H5Fopen are. */
static bool logs_for(hid_t fapl, bool mpio)
{
    if (!mpio)
        return true;
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Info info = MPI_INFO_NULL;
    int rank = 0;
    herr_t status = -1;
    H5E_BEGIN_TRY { status = H5Pget_fapl_mpio(fapl, &comm, &info); } H5E_END_TRY;
    if (status < 0)
        return world_rank_zero();
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_free(&comm);
    if (info != MPI_INFO_NULL)
        PMPI_Info_free(&info);
    return rank == 0;
}

/* ------------------------------------------------------------------------ */
/* H5Fcreate / H5Fopen / H5Fclose                                            */

static const int fapl_settings[] = {ALIGN_THRESHOLD, ALIGN_INTERVAL, META_BLOCK, SIEVE_BUF, MDC_INITIAL,
                                    COLL_METADATA};
#define N_FAPL_SETTINGS (sizeof fapl_settings / sizeof fapl_settings[0])

static bool any_fapl_setting(void)
{
    for (size_t i = 0; i < N_FAPL_SETTINGS; i++)
        if (is_set(fapl_settings[i]))
            return true;
    return false;
}

static void refused(const char *what, const struct setting *s)
{
    if (s)
        say("warning: HDF5 refused %s from %s=%" PRIu64 "; left the program's setting", what, s->env, s->number);
    else
        say("warning: HDF5 refused %s; left the program's setting", what);
}

/* A copy of `fapl` (a new list for H5P_DEFAULT) with the IOBO_* file access
 * settings, or `fapl` itself when there is nothing to set or copying fails.
 * `acted[setting]` tells which settings were put on the copy. */
static hid_t tuned_fapl(hid_t fapl, bool *copied, bool *acted)
{
    *copied = false;
    if (!any_fapl_setting())
        return fapl;
    hid_t copy = H5I_INVALID_HID;
    H5E_BEGIN_TRY { copy = fapl == H5P_DEFAULT ? H5Pcreate(H5P_FILE_ACCESS) : H5Pcopy(fapl); } H5E_END_TRY;
    if (copy < 0) {
        say("warning: cannot copy the file access property list; nothing applied");
        return fapl;
    }
    *copied = true;

    H5E_BEGIN_TRY {
        if (is_set(ALIGN_THRESHOLD) || is_set(ALIGN_INTERVAL)) {
            hsize_t threshold = 1, interval = 1;
            if (H5Pget_alignment(copy, &threshold, &interval) >= 0) {
                if (is_set(ALIGN_THRESHOLD))
                    threshold = settings[ALIGN_THRESHOLD].number;
                if (is_set(ALIGN_INTERVAL))
                    interval = settings[ALIGN_INTERVAL].number;
                if (H5Pset_alignment(copy, threshold, interval) >= 0)
                    acted[ALIGN_THRESHOLD] = acted[ALIGN_INTERVAL] = true;
                else
                    refused("the alignment", NULL);
            }
        }
        if (is_set(META_BLOCK)) {
            if (H5Pset_meta_block_size(copy, settings[META_BLOCK].number) >= 0)
                acted[META_BLOCK] = true;
            else
                refused("the meta block size", &settings[META_BLOCK]);
        }
        if (is_set(SIEVE_BUF)) {
            if (H5Pset_sieve_buf_size(copy, (size_t)settings[SIEVE_BUF].number) >= 0)
                acted[SIEVE_BUF] = true;
            else
                refused("the sieve buffer size", &settings[SIEVE_BUF]);
        }
        if (is_set(MDC_INITIAL)) {
            H5AC_cache_config_t config;
            memset(&config, 0, sizeof config);
            config.version = H5AC__CURR_CACHE_CONFIG_VERSION;
            size_t size = (size_t)settings[MDC_INITIAL].number;
            bool ok = H5Pget_mdc_config(copy, &config) >= 0;
            if (ok) {
                config.set_initial_size = true;
                config.initial_size = size;
                if (config.min_size > size) /* keep min <= initial <= max */
                    config.min_size = size;
                if (config.max_size < size)
                    config.max_size = size;
                ok = H5Pset_mdc_config(copy, &config) >= 0;
            }
            if (ok)
                acted[MDC_INITIAL] = true;
            else
                refused("the metadata cache initial size", &settings[MDC_INITIAL]);
        }
        if (is_set(COLL_METADATA) && uses_mpio(copy)) {
            hbool_t on = settings[COLL_METADATA].number != 0;
            if (H5Pset_all_coll_metadata_ops(copy, on) >= 0 && H5Pset_coll_metadata_write(copy, on) >= 0)
                acted[COLL_METADATA] = true;
            else
                refused("collective metadata", &settings[COLL_METADATA]);
        }
    } H5E_END_TRY;
    return copy;
}

static void close_plist(hid_t plist)
{
    H5E_BEGIN_TRY { H5Pclose(plist); } H5E_END_TRY;
}

/* The file access settings in effect for an open file. H5Fget_access_plist
 * duplicates the communicator of an MPI-IO file (collective): called by every
 * rank right after the collective H5Fcreate/H5Fopen. */
static void read_fapl(hid_t file, bool mpio, struct fapl_values *v)
{
    memset(v, 0, sizeof *v);
    hid_t fapl = H5I_INVALID_HID;
    H5E_BEGIN_TRY {
        fapl = H5Fget_access_plist(file);
        if (fapl >= 0) {
            v->ok = H5Pget_alignment(fapl, &v->threshold, &v->interval) >= 0 &&
                    H5Pget_meta_block_size(fapl, &v->meta_block) >= 0 &&
                    H5Pget_sieve_buf_size(fapl, &v->sieve_buf) >= 0;
            H5AC_cache_config_t config;
            memset(&config, 0, sizeof config);
            config.version = H5AC__CURR_CACHE_CONFIG_VERSION;
            if (H5Pget_mdc_config(fapl, &config) >= 0) {
                v->mdc_ok = true;
                v->mdc_initial = config.initial_size;
            }
            v->coll_ok = mpio && H5Pget_all_coll_metadata_ops(fapl, &v->coll_ops) >= 0 &&
                         H5Pget_coll_metadata_write(fapl, &v->coll_write) >= 0;
            H5Pclose(fapl);
        }
    } H5E_END_TRY;
}

/* The value of a file access setting in `v`, as text; false when unknown. */
static bool fapl_value(int which, const struct fapl_values *v, char *out, size_t size)
{
    switch (which) {
    case ALIGN_THRESHOLD:
        snprintf(out, size, "%llu", (unsigned long long)v->threshold);
        return v->ok;
    case ALIGN_INTERVAL:
        snprintf(out, size, "%llu", (unsigned long long)v->interval);
        return v->ok;
    case META_BLOCK:
        snprintf(out, size, "%llu", (unsigned long long)v->meta_block);
        return v->ok;
    case SIEVE_BUF:
        snprintf(out, size, "%zu", v->sieve_buf);
        return v->ok;
    case MDC_INITIAL:
        snprintf(out, size, "%zu", v->mdc_initial);
        return v->mdc_ok;
    case COLL_METADATA:
        if (v->coll_ok && v->coll_ops == v->coll_write)
            snprintf(out, size, "%s", v->coll_ops ? "true" : "false");
        else
            snprintf(out, size, "ops=%s write=%s", v->coll_ops ? "true" : "false", v->coll_write ? "true" : "false");
        return v->coll_ok;
    }
    return false;
}

static void after_file_open(const char *call, const char *name, hid_t file, hid_t fapl, const bool *acted,
                            uint64_t opened_ns)
{
    const char *label = name ? name : "?";
    bool mpio = uses_mpio(fapl);
    bool logs = verbose ? logs_for(fapl, mpio) : false;
    struct fapl_values effective;
    read_fapl(file, mpio, &effective);

    add(&counters[HDF5_LEVEL].files_opened, 1);
    pthread_mutex_lock(&records_lock);
    long record = record_for(HDF5_LEVEL, label);
    if (record >= 0) {
        struct file_record *r = &records[record];
        if (!r->opens++)
            r->first_open_ns = opened_ns;
        r->mpio = mpio;
        r->fapl = effective;
    }
    pthread_mutex_unlock(&records_lock);
    remember_file(file, mpio, logs, record);

    struct note line = {.used = 0, .text = ""};
    for (size_t i = 0; i < N_FAPL_SETTINGS; i++) {
        int which = fapl_settings[i];
        const struct setting *s = &settings[which];
        char name_of[64], value[128];
        if (!s->set)
            continue;
        setting_name(which, name_of, sizeof name_of);
        if (which == COLL_METADATA && !mpio) {
            note_skipped(which, "false", "the file is not opened with the MPI-IO driver", label);
            note_add(&line, "coll_metadata=skipped(not the MPI-IO driver)");
            continue;
        }
        if (!acted[which]) { /* HDF5 refused it: warned already */
            note_skipped(which, "the program's value", "HDF5 refused the value on the file access list", label);
            continue;
        }
        note_acted(which);
        if (!fapl_value(which, &effective, value, sizeof value)) {
            note_effect(which, "unknown", "HDF5 did not report the value back", label);
            note_add(&line, "%s: requested %s, in effect unknown", name_of, s->text);
        } else if (strcmp(value, s->text) != 0) {
            note_effect(which, value, "HDF5 reports another value on the open file", label);
            note_add(&line, "%s: requested %s, in effect %s", name_of, s->text, value);
        } else {
            note_effect(which, NULL, NULL, label);
            note_add(&line, "%s=%s", name_of, value);
        }
    }
    if (verbose && logs)
        say("%s %s (%s driver): %s", call, label, mpio ? "MPI-IO" : "non-MPI",
            line.used ? line.text : "nothing to apply");
}

hid_t H5Fcreate(const char *name, unsigned flags, hid_t fcpl_id, hid_t fapl_id)
{
    ensure_init();
    H5Fcreate_fn real = REAL(H5Fcreate);
    if (!real)
        return H5I_INVALID_HID;
    add(&hdf5_calls, 1);
    bool copied, acted[N_SETTINGS] = {false};
    hid_t fapl = tuned_fapl(fapl_id, &copied, acted);
    uint64_t opened = now_ns(), phase = phase_enter();
    hid_t file = real(name, flags, fcpl_id, fapl);
    phase_leave(PHASE_HDF5, phase);
    if (file >= 0)
        after_file_open("H5Fcreate", name, file, fapl, acted, opened);
    if (copied)
        close_plist(fapl);
    return file;
}

hid_t H5Fopen(const char *name, unsigned flags, hid_t fapl_id)
{
    ensure_init();
    H5Fopen_fn real = REAL(H5Fopen);
    if (!real)
        return H5I_INVALID_HID;
    add(&hdf5_calls, 1);
    bool copied, acted[N_SETTINGS] = {false};
    hid_t fapl = tuned_fapl(fapl_id, &copied, acted);
    uint64_t opened = now_ns(), phase = phase_enter();
    hid_t file = real(name, flags, fapl);
    phase_leave(PHASE_HDF5, phase);
    if (file >= 0)
        after_file_open("H5Fopen", name, file, fapl, acted, opened);
    if (copied)
        close_plist(fapl);
    return file;
}

herr_t H5Fclose(hid_t file_id)
{
    ensure_init();
    H5Fclose_fn real = REAL(H5Fclose);
    if (!real)
        return -1;
    add(&hdf5_calls, 1);
    struct file_entry entry = {.id = H5I_INVALID_HID, .mpio = false, .logs = false, .transfer_said = false,
                               .record = -1};
    bool known = file_entry_of(file_id, &entry, false);
    uint64_t phase = phase_enter();
    herr_t status = real(file_id);
    phase_leave(PHASE_HDF5, phase);
    if (status >= 0 && known)
        record_close(entry.record);
    return status;
}

/* Calls that change nothing and count in the I/O phases only: flushes, opens
 * and closes of datasets (a chunked dataset's cache is written at H5Dclose). */
#define HDF5_PHASE_WRAPPER(name, type, failed, PARAMS, ARGS) \
    typedef type(*name##_fn) PARAMS;                          \
    static name##_fn real_##name;                             \
    type name PARAMS                                          \
    {                                                         \
        name##_fn real = REAL(name);                          \
        if (!real)                                            \
            return failed;                                    \
        add(&hdf5_calls, 1);                                  \
        uint64_t phase = phase_enter();                       \
        type result = real ARGS;                              \
        phase_leave(PHASE_HDF5, phase);                       \
        return result;                                        \
    }

HDF5_PHASE_WRAPPER(H5Fflush, herr_t, -1, (hid_t object_id, H5F_scope_t scope), (object_id, scope))
HDF5_PHASE_WRAPPER(H5Dopen2, hid_t, H5I_INVALID_HID, (hid_t loc_id, const char *name, hid_t dapl_id),
                   (loc_id, name, dapl_id))
HDF5_PHASE_WRAPPER(H5Dclose, herr_t, -1, (hid_t dset_id), (dset_id))

/* ------------------------------------------------------------------------ */
/* H5Dcreate2 / H5Dcreate1 / H5Dcreate_anon: chunked layout                  */

/* Chunk of at most `bytes` bytes (at least one element) in row-major order:
 * whole trailing dimensions while they fit, then part of the next one, 1
 * along the leading ones; never larger than the dataset. */
static void chunk_shape(uint64_t bytes, size_t itemsize, int rank, const hsize_t *dims, hsize_t *chunk)
{
    uint64_t budget = bytes / itemsize;
    if (budget < 1)
        budget = 1;
    for (int axis = 0; axis < rank; axis++)
        chunk[axis] = 1;
    for (int axis = rank - 1; axis >= 0; axis--) {
        chunk[axis] = dims[axis] < budget ? dims[axis] : budget;
        if (chunk[axis] < dims[axis])
            break;
        budget /= dims[axis];
        if (budget < 1)
            break;
    }
}

/* What the shim does to one dataset creation: a chunked copy of the
 * program's creation list, or why not. */
struct layout_plan {
    hid_t dcpl;       /* the copy, or H5I_INVALID_HID */
    int rank;
    hsize_t chunk[H5S_MAX_RANK];
    const char *skip; /* why the layout was left, or NULL */
};

/* Plan chunks of about IOBO_CHUNK_SIZE bytes for a dataset the program
 * creates contiguous (or with the default layout). */
static void plan_layout(hid_t type_id, hid_t space_id, hid_t dcpl_id, struct layout_plan *plan)
{
    hsize_t dims[H5S_MAX_RANK], maxdims[H5S_MAX_RANK];
    plan->dcpl = H5I_INVALID_HID;
    plan->skip = NULL;
    plan->rank = -1;
    if (!choice_is(LAYOUT, "chunked"))
        return;
    H5E_BEGIN_TRY {
        if (H5Sget_simple_extent_type(space_id) != H5S_SIMPLE)
            plan->skip = "scalar or null dataspace";
        else if ((plan->rank = H5Sget_simple_extent_ndims(space_id)) < 1 ||
                 H5Sget_simple_extent_dims(space_id, dims, maxdims) < 0)
            plan->skip = "unreadable dataspace";
        for (int axis = 0; !plan->skip && axis < plan->rank; axis++) {
            if (dims[axis] == 0)
                plan->skip = "a zero dimension";
            else if (maxdims[axis] == H5S_UNLIMITED)
                plan->skip = "an unlimited dimension";
        }
        size_t itemsize = plan->skip ? 0 : H5Tget_size(type_id);
        if (!plan->skip && itemsize == 0)
            plan->skip = "unknown element size";
        if (!plan->skip) {
            bool program_default = dcpl_id == H5P_DEFAULT || dcpl_id == H5P_DATASET_CREATE_DEFAULT;
            if (!program_default && H5Pget_layout(dcpl_id) != H5D_CONTIGUOUS)
                plan->skip = "the program chose a non-contiguous layout";
            else if (!program_default && H5Pget_external_count(dcpl_id) > 0)
                plan->skip = "external storage";
            else if ((plan->dcpl = program_default ? H5Pcreate(H5P_DATASET_CREATE) : H5Pcopy(dcpl_id)) < 0)
                plan->skip = "cannot copy the creation property list";
            else {
                uint64_t bytes = is_set(CHUNK_SIZE) ? settings[CHUNK_SIZE].number : DEFAULT_CHUNK_BYTES;
                chunk_shape(bytes, itemsize, plan->rank, dims, plan->chunk);
                if (H5Pset_chunk(plan->dcpl, plan->rank, plan->chunk) < 0) {
                    plan->skip = "H5Pset_chunk refused the chunk shape";
                    H5Pclose(plan->dcpl);
                    plan->dcpl = H5I_INVALID_HID;
                }
            }
        }
    } H5E_END_TRY;
}

static const char *layout_name(H5D_layout_t layout)
{
    switch (layout) {
    case H5D_COMPACT:
        return "compact";
    case H5D_CONTIGUOUS:
        return "contiguous";
    case H5D_CHUNKED:
        return "chunked";
    case H5D_VIRTUAL:
        return "virtual";
    default:
        return "unknown";
    }
}

struct dataset_record {
    char name[256];
    H5D_layout_t layout;
    int rank; /* of the chunk; 0 when not chunked */
    hsize_t chunk[H5S_MAX_RANK];
    bool by_shim;
};

#define MAX_DATASETS 64
static struct dataset_record datasets[MAX_DATASETS];
static size_t n_datasets;
static uint64_t datasets_created;
static pthread_mutex_t datasets_lock = PTHREAD_MUTEX_INITIALIZER;

static void shape_text(int rank, const hsize_t *chunk, struct note *out)
{
    for (int axis = 0; axis < rank; axis++)
        note_add(out, "%llu", (unsigned long long)chunk[axis]);
}

/* Read back the layout of a new dataset, record it, and note what took effect. */
static void after_dataset_create(const char *call, hid_t loc_id, hid_t dataset, const char *name,
                                 const struct layout_plan *plan)
{
    struct dataset_record d = {.layout = H5D_LAYOUT_ERROR, .rank = 0, .by_shim = plan->dcpl >= 0};
    snprintf(d.name, sizeof d.name, "%s", name ? name : "(anonymous)");
    H5E_BEGIN_TRY {
        if (name)
            H5Iget_name(dataset, d.name, sizeof d.name);
        hid_t dcpl = H5Dget_create_plist(dataset);
        if (dcpl >= 0) {
            d.layout = H5Pget_layout(dcpl);
            if (d.layout == H5D_CHUNKED)
                d.rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, d.chunk);
            if (d.rank < 0)
                d.rank = 0;
            H5Pclose(dcpl);
        }
    } H5E_END_TRY;
    add(&datasets_created, 1);
    pthread_mutex_lock(&datasets_lock);
    if (n_datasets < MAX_DATASETS)
        datasets[n_datasets++] = d;
    pthread_mutex_unlock(&datasets_lock);

    if (!is_set(LAYOUT))
        return;
    struct note effective = {.used = 0, .text = ""}, planned = {.used = 0, .text = ""};
    shape_text(d.rank, d.chunk, &effective);
    shape_text(plan->rank, plan->chunk, &planned);
    const char *in_effect = layout_name(d.layout);
    struct note line = {.used = 0, .text = ""};
    if (choice_is(LAYOUT, "contiguous")) {
        note_acted(LAYOUT);
        if (d.layout == H5D_CONTIGUOUS)
            note_effect(LAYOUT, NULL, NULL, d.name);
        else
            note_effect(LAYOUT, in_effect, "the program chose this layout; the shim only turns contiguous into chunked",
                        d.name);
        note_add(&line, "layout=%s", in_effect);
    } else if (plan->dcpl >= 0) {
        note_acted(LAYOUT);
        if (is_set(CHUNK_SIZE))
            note_acted(CHUNK_SIZE);
        bool same = d.layout == H5D_CHUNKED && d.rank == plan->rank && !strcmp(effective.text, planned.text);
        if (same) {
            note_effect(LAYOUT, NULL, NULL, d.name);
            if (is_set(CHUNK_SIZE))
                note_effect(CHUNK_SIZE, NULL, NULL, d.name);
            note_add(&line, "layout=chunked chunk_shape=[%s]", effective.text);
        } else {
            char value[160];
            snprintf(value, sizeof value, "%s [%s]", in_effect, effective.text);
            note_effect(LAYOUT, value, "HDF5 created the dataset with another layout", d.name);
            if (is_set(CHUNK_SIZE))
                note_effect(CHUNK_SIZE, value, "HDF5 created the dataset with another layout", d.name);
            note_add(&line, "requested layout=chunked chunk_shape=[%s], in effect layout=%s chunk_shape=[%s]",
                     planned.text, in_effect, effective.text);
        }
    } else {
        note_skipped(LAYOUT, in_effect, plan->skip ? plan->skip : "not planned", d.name);
        if (is_set(CHUNK_SIZE))
            note_skipped(CHUNK_SIZE, in_effect, plan->skip ? plan->skip : "not planned", d.name);
    }
    if (!verbose)
        return;
    struct file_entry entry;
    if (!(file_of(loc_id, &entry, false) ? entry.logs : world_rank_zero()))
        return;
    if (line.used)
        say("%s %s: %s", call, name ? name : "(anonymous dataset)", line.text);
    else if (plan->skip)
        say("%s %s: layout left as the program set it (%s)", call, name ? name : "(anonymous dataset)", plan->skip);
}

hid_t H5Dcreate2(hid_t loc_id, const char *name, hid_t type_id, hid_t space_id, hid_t lcpl_id, hid_t dcpl_id,
                 hid_t dapl_id)
{
    ensure_init();
    H5Dcreate2_fn real = REAL(H5Dcreate2);
    if (!real)
        return H5I_INVALID_HID;
    add(&hdf5_calls, 1);
    struct layout_plan plan;
    plan_layout(type_id, space_id, dcpl_id, &plan);
    uint64_t phase = phase_enter();
    hid_t dataset = real(loc_id, name, type_id, space_id, lcpl_id, plan.dcpl >= 0 ? plan.dcpl : dcpl_id, dapl_id);
    phase_leave(PHASE_HDF5, phase);
    if (dataset >= 0)
        after_dataset_create("H5Dcreate2", loc_id, dataset, name ? name : "?", &plan);
    if (plan.dcpl >= 0)
        close_plist(plan.dcpl);
    return dataset;
}

/* The 1.6 API (programs built with -DH5_USE_16_API call it as H5Dcreate). */
hid_t H5Dcreate1(hid_t loc_id, const char *name, hid_t type_id, hid_t space_id, hid_t dcpl_id)
{
    ensure_init();
    H5Dcreate1_fn real = REAL(H5Dcreate1);
    if (!real)
        return H5I_INVALID_HID;
    add(&hdf5_calls, 1);
    struct layout_plan plan;
    plan_layout(type_id, space_id, dcpl_id, &plan);
    uint64_t phase = phase_enter();
    hid_t dataset = real(loc_id, name, type_id, space_id, plan.dcpl >= 0 ? plan.dcpl : dcpl_id);
    phase_leave(PHASE_HDF5, phase);
    if (dataset >= 0)
        after_dataset_create("H5Dcreate1", loc_id, dataset, name ? name : "?", &plan);
    if (plan.dcpl >= 0)
        close_plist(plan.dcpl);
    return dataset;
}

/* h5py's `group[name] = array` creates an anonymous dataset, then links it. */
hid_t H5Dcreate_anon(hid_t loc_id, hid_t type_id, hid_t space_id, hid_t dcpl_id, hid_t dapl_id)
{
    ensure_init();
    H5Dcreate_anon_fn real = REAL(H5Dcreate_anon);
    if (!real)
        return H5I_INVALID_HID;
    add(&hdf5_calls, 1);
    struct layout_plan plan;
    plan_layout(type_id, space_id, dcpl_id, &plan);
    uint64_t phase = phase_enter();
    hid_t dataset = real(loc_id, type_id, space_id, plan.dcpl >= 0 ? plan.dcpl : dcpl_id, dapl_id);
    phase_leave(PHASE_HDF5, phase);
    if (dataset >= 0)
        after_dataset_create("H5Dcreate_anon", loc_id, dataset, NULL, &plan);
    if (plan.dcpl >= 0)
        close_plist(plan.dcpl);
    return dataset;
}

/* ------------------------------------------------------------------------ */
/* H5Dwrite / H5Dread: collective transfer, accounting, actual I/O mode      */

/* H5D_mpio_actual_io_mode_t values 0..4, then transfers on the default list */
#define N_IO_MODES 6
#define DEFAULT_LIST_MODE 5
static const char *const io_mode_names[N_IO_MODES] = {
    "no_collective", "chunk_independent", "chunk_collective", "chunk_mixed", "contiguous_collective", "default_list",
};
static uint64_t io_modes[N_DIRECTIONS][N_IO_MODES];
static uint32_t no_collective_causes[N_DIRECTIONS]; /* H5D_mpio_no_collective_cause_t bits, OR over calls */

static const struct {
    uint32_t bit;
    const char *text;
} cause_texts[] = {
    {H5D_MPIO_SET_INDEPENDENT, "the transfer list asks for independent I/O"},
    {H5D_MPIO_DATATYPE_CONVERSION, "datatype conversion"},
    {H5D_MPIO_DATA_TRANSFORMS, "a data transform"},
    {H5D_MPIO_MPI_OPT_TYPES_ENV_VAR_DISABLED, "HDF5_MPI_OPT_TYPES disables MPI derived types"},
    {H5D_MPIO_NOT_SIMPLE_OR_SCALAR_DATASPACES, "a dataspace neither simple nor scalar"},
    {H5D_MPIO_NOT_CONTIGUOUS_OR_CHUNKED_DATASET, "a dataset neither contiguous nor chunked"},
    {H5D_MPIO_PARALLEL_FILTERED_WRITES_DISABLED, "filters (parallel filtered writes disabled)"},
    {H5D_MPIO_ERROR_WHILE_CHECKING_COLLECTIVE_POSSIBLE, "an error while HDF5 checked"},
};
#define N_CAUSES (sizeof cause_texts / sizeof cause_texts[0])

static void causes_text(uint32_t causes, struct note *out)
{
    for (size_t i = 0; i < N_CAUSES; i++)
        if (causes & cause_texts[i].bit)
            note_add(out, "%s;", cause_texts[i].text);
    if (out->used && out->text[out->used - 1] == ';')
        out->text[--out->used] = '\0';
}

/* Bytes the transfer moves: the selected elements times the memory element size. */
static uint64_t transfer_bytes(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id)
{
    hssize_t points = -1;
    size_t itemsize = 0;
    H5E_BEGIN_TRY {
        itemsize = H5Tget_size(mem_type_id);
        if (mem_space_id != H5S_ALL)
            points = H5Sget_select_npoints(mem_space_id);
        else if (file_space_id != H5S_ALL)
            points = H5Sget_select_npoints(file_space_id);
        else {
            hid_t space = H5Dget_space(dset_id);
            if (space >= 0) {
                points = H5Sget_select_npoints(space);
                H5Sclose(space);
            }
        }
    } H5E_END_TRY;
    return points > 0 ? (uint64_t)points * itemsize : 0;
}

/* Tally the I/O mode HDF5 used for a transfer on `dxpl` (H5P_DEFAULT: the
 * default list, not asked: HDF5 records on the default list too); the mode. */
static int tally_io_mode(enum direction direction, hid_t dxpl)
{
    if (dxpl == H5P_DEFAULT || dxpl == H5P_DATASET_XFER_DEFAULT) {
        add(&io_modes[direction][DEFAULT_LIST_MODE], 1);
        return DEFAULT_LIST_MODE;
    }
    H5D_mpio_actual_io_mode_t mode = H5D_MPIO_NO_COLLECTIVE;
    herr_t status = -1;
    H5E_BEGIN_TRY { status = H5Pget_mpio_actual_io_mode(dxpl, &mode); } H5E_END_TRY;
    if (status < 0 || (int)mode < 0 || (int)mode >= DEFAULT_LIST_MODE)
        return -1;
    add(&io_modes[direction][mode], 1);
    if (mode == H5D_MPIO_NO_COLLECTIVE) {
        uint32_t local = 0, global = 0;
        H5E_BEGIN_TRY { status = H5Pget_mpio_no_collective_cause(dxpl, &local, &global); } H5E_END_TRY;
        if (status >= 0)
            __atomic_fetch_or(&no_collective_causes[direction], local | global, __ATOMIC_RELAXED);
    }
    return (int)mode;
}

/*
 * Collective transfer assumes the program's writes are collective-capable:
 * every rank of the file's communicator calls H5Dwrite on the dataset the
 * same number of times (a rank with nothing to write selects nothing). A
 * program whose ranks write independently (different datasets or counts)
 * would hang; leave IOBO_TRANSFER_MODE unset for it.
 *
 * The mode is set on the program's own transfer list for the call and then
 * restored, so that what HDF5 reports back on that list
 * (H5Pget_mpio_actual_io_mode) stays true for the program; H5P_DEFAULT gets
 * a new list.
 */
herr_t H5Dwrite(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t plist_id,
                const void *buf)
{
    ensure_init();
    H5Dwrite_fn real = REAL(H5Dwrite);
    if (!real)
        return -1;
    add(&hdf5_calls, 1);
    struct file_entry entry = {.id = H5I_INVALID_HID, .mpio = false, .logs = false, .transfer_said = false,
                               .record = -1};
    bool tuned = is_set(TRANSFER_MODE) && file_of(dset_id, &entry, true) && entry.mpio;
    bool collective = tuned && choice_is(TRANSFER_MODE, "collective");

    hid_t dxpl = plist_id;
    bool created = false, restore = false;
    H5FD_mpio_xfer_t previous = H5FD_MPIO_INDEPENDENT;
    if (collective) {
        H5E_BEGIN_TRY {
            if (plist_id == H5P_DEFAULT || plist_id == H5P_DATASET_XFER_DEFAULT) {
                hid_t fresh = H5Pcreate(H5P_DATASET_XFER);
                if (fresh >= 0 && H5Pset_dxpl_mpio(fresh, H5FD_MPIO_COLLECTIVE) >= 0) {
                    dxpl = fresh;
                    created = true;
                } else if (fresh >= 0)
                    H5Pclose(fresh);
            } else if (H5Pget_dxpl_mpio(plist_id, &previous) >= 0 && previous != H5FD_MPIO_COLLECTIVE) {
                restore = H5Pset_dxpl_mpio(plist_id, H5FD_MPIO_COLLECTIVE) >= 0;
            }
        } H5E_END_TRY;
    }

    uint64_t bytes = transfer_bytes(dset_id, mem_type_id, mem_space_id, file_space_id);
    uint64_t start = now_ns(), phase = phase_enter();
    herr_t status = real(dset_id, mem_type_id, mem_space_id, file_space_id, dxpl, buf);
    phase_leave(PHASE_HDF5, phase);
    uint64_t elapsed = now_ns() - start;
    if (status >= 0)
        account(HDF5_LEVEL, WRITE, bytes, elapsed);
    int mode = status >= 0 ? tally_io_mode(WRITE, dxpl) : -1;

    if (tuned && status >= 0) {
        bool set_collective = created || restore || (collective && previous == H5FD_MPIO_COLLECTIVE);
        const char *wanted = settings[TRANSFER_MODE].text;
        const char *in_effect = mode < 0 ? "unknown" : io_mode_names[mode];
        bool holds = collective ? (mode == H5D_MPIO_CHUNK_COLLECTIVE || mode == H5D_MPIO_CHUNK_MIXED ||
                                   mode == H5D_MPIO_CONTIGUOUS_COLLECTIVE)
                                : (mode == H5D_MPIO_NO_COLLECTIVE || mode == H5D_MPIO_CHUNK_INDEPENDENT ||
                                   mode == DEFAULT_LIST_MODE);
        struct note why = {.used = 0, .text = ""};
        if (!collective)
            note_add(&why, "the program asked for collective transfer; the shim only turns independent into "
                           "collective");
        else if (!set_collective)
            note_add(&why, "the shim could not set collective transfer on the transfer list");
        else if (mode == H5D_MPIO_NO_COLLECTIVE) {
            uint32_t local = 0, global = 0;
            H5E_BEGIN_TRY { H5Pget_mpio_no_collective_cause(dxpl, &local, &global); } H5E_END_TRY;
            note_add(&why, "HDF5 did independent I/O:");
            causes_text(local | global, &why);
        } else
            note_add(&why, "HDF5 reports another I/O mode");
        note_acted(TRANSFER_MODE);
        char where[NAME_CHARS] = "?";
        H5E_BEGIN_TRY { H5Iget_name(dset_id, where, sizeof where); } H5E_END_TRY;
        note_effect(TRANSFER_MODE, holds ? NULL : in_effect, why.text, where);
        if (verbose && entry.logs && !entry.transfer_said) {
            char file_name[NAME_CHARS] = "?";
            H5E_BEGIN_TRY { H5Fget_name(dset_id, file_name, sizeof file_name); } H5E_END_TRY;
            if (holds)
                say("H5Dwrite %s: transfer_mode=%s (HDF5 did %s)", file_name, wanted, in_effect);
            else
                say("H5Dwrite %s: transfer_mode: requested %s, in effect %s (%s)", file_name, wanted, in_effect,
                    why.text);
        }
    }
    if (created)
        close_plist(dxpl);
    if (restore) {
        H5E_BEGIN_TRY { H5Pset_dxpl_mpio(plist_id, previous); } H5E_END_TRY;
    }
    return status;
}

/* Reads are counted, not changed. */
herr_t H5Dread(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t plist_id, void *buf)
{
    H5Dread_fn real = REAL(H5Dread);
    if (!real)
        return -1;
    add(&hdf5_calls, 1);
    uint64_t bytes = transfer_bytes(dset_id, mem_type_id, mem_space_id, file_space_id);
    uint64_t start = now_ns(), phase = phase_enter();
    herr_t status = real(dset_id, mem_type_id, mem_space_id, file_space_id, plist_id, buf);
    phase_leave(PHASE_HDF5, phase);
    uint64_t elapsed = now_ns() - start;
    if (status >= 0) {
        account(HDF5_LEVEL, READ, bytes, elapsed);
        tally_io_mode(READ, plist_id);
    }
    return status;
}

/* ------------------------------------------------------------------------ */
/* MPI_File_open / MPI_File_close: hints, and the hints in effect            */

struct open_handle {
    MPI_File fh;
    long record;
};

static struct open_handle *handles;
static size_t n_handles, handles_capacity;

/* The value of `key` in hints "key\0value\0...", or NULL. */
static const char *hint_value(const char *hints, size_t size, const char *key)
{
    for (size_t at = 0; at < size;) {
        const char *k = hints + at;
        const char *v = k + strlen(k) + 1;
        if (!strcmp(k, key))
            return v;
        at = (size_t)(v + strlen(v) + 1 - hints);
    }
    return NULL;
}

/* The hints in effect on an open file as "key\0value\0..." (malloc'd), or NULL. */
static char *effective_hints(MPI_File fh, size_t *size)
{
    MPI_Info info = MPI_INFO_NULL;
    int nkeys = 0;
    *size = 0;
    if (PMPI_File_get_info(fh, &info) != MPI_SUCCESS || info == MPI_INFO_NULL)
        return NULL;
    PMPI_Info_get_nkeys(info, &nkeys);
    size_t capacity = (size_t)nkeys * 64 + 1, used = 0;
    char *hints = malloc(capacity);
    for (int i = 0; hints && i < nkeys; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        if (PMPI_Info_get_nthkey(info, i, key) != MPI_SUCCESS ||
            PMPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag) != MPI_SUCCESS || !flag)
            continue;
        size_t need = strlen(key) + strlen(value) + 2;
        if (used + need > capacity) {
            capacity = 2 * (used + need);
            char *grown = realloc(hints, capacity);
            if (!grown) {
                free(hints);
                hints = NULL;
                break;
            }
            hints = grown;
        }
        memcpy(hints + used, key, strlen(key) + 1);
        used += strlen(key) + 1;
        memcpy(hints + used, value, strlen(value) + 1);
        used += strlen(value) + 1;
    }
    PMPI_Info_free(&info);
    *size = hints ? used : 0;
    return hints;
}

/* Why a hint reads back as `value` (NULL: not reported) after iobo set it. */
/* Why a requested hint reads back with another value; `processes`: how many
 * opened the file (its communicator's size; 0 unknown). */
static void hint_reason(int which, const char *value, const char *hints, size_t size, int processes, char *out,
                        size_t out_size)
{
    if (!value && (which == STRIPING_FACTOR || which == STRIPING_UNIT))
        snprintf(out, out_size, "MPI_File_get_info does not report it: striping takes effect only on Lustre");
    else if (!value)
        snprintf(out, out_size, "MPI_File_get_info does not report it: the MPI-IO driver ignores it");
    else if (which == CB_NODES && processes > 0 && (uint64_t)processes < settings[CB_NODES].number)
        snprintf(out, out_size, "ROMIO lowered it to the %d process(es) that opened the file: a file opened by "
                 "fewer ranks (MPI_COMM_SELF, a subcommunicator) has at most one aggregator per process", processes);
    else if (which == CB_NODES) {
        const char *list = hint_value(hints, size, "cb_config_list");
        if (list && !strcmp(list, "*:*"))
            snprintf(out, out_size, "ROMIO lowered it to what the hosts and processes that opened the file allow "
                     "(cb_config_list=*:* already allows every process)");
        else
            snprintf(out, out_size, "ROMIO lowered it to what cb_config_list=%s allows (*:1 is one aggregator per "
                     "host; cb_config_list=*:* allows every process)", list ? list : "?");
    } else
        snprintf(out, out_size, "MPI_File_get_info after the open reports another value");
}

static bool any_hint_setting(void)
{
    for (int i = 0; i < N_SETTINGS; i++)
        if (settings[i].hint && settings[i].set)
            return true;
    return false;
}

/*
 * The info to pass on instead of the program's `info`: a duplicate with
 * iobo's hints (`*duplicated`, to be freed), or `info` itself when nothing
 * is to change. At open every requested hint is set (`every`); later
 * (MPI_File_set_view, MPI_File_set_info) only the keys the program's info
 * carries with another value are replaced, so its hints cannot undo iobo's.
 * `replaced` names the program's values replaced, `acted` the hints set.
 */
static MPI_Info tuned_info(MPI_Info info, bool every, bool *duplicated, struct note *replaced, bool *acted)
{
    *duplicated = false;
    bool change[N_SETTINGS] = {false}, any = false;
    for (int i = 0; i < N_SETTINGS; i++) {
        const struct setting *s = &settings[i];
        if (!s->hint || !s->set)
            continue;
        char old[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        if (info != MPI_INFO_NULL)
            PMPI_Info_get(info, s->hint, MPI_MAX_INFO_VAL, old, &flag);
        bool differs = flag && strcmp(old, s->text) != 0;
        if (differs)
            note_add(replaced, "%s=%s", s->hint, old);
        change[i] = every || differs;
        any = any || change[i];
    }
    if (!any)
        return info;
    MPI_Info tuned = MPI_INFO_NULL;
    int status = info == MPI_INFO_NULL ? PMPI_Info_create(&tuned) : PMPI_Info_dup(info, &tuned);
    if (status != MPI_SUCCESS) {
        if (world_rank_zero())
            say("warning: cannot create an MPI_Info; iobo's hints not applied");
        return info;
    }
    *duplicated = true;
    for (int i = 0; i < N_SETTINGS; i++) {
        if (!change[i])
            continue;
        if (PMPI_Info_set(tuned, settings[i].hint, settings[i].text) == MPI_SUCCESS)
            acted[i] = true;
        else if (world_rank_zero())
            say("warning: MPI_Info_set refused %s=%s (from %s)", settings[i].hint, settings[i].text, settings[i].env);
    }
    return tuned;
}

/* Compare the hints in effect with the requested ones: note each outcome and
 * describe it on `line`. `when` qualifies the reason ("" at open). */
static void check_hints(const bool *acted, const char *hints, size_t size, int processes, const char *label,
                        const char *when, struct note *line)
{
    for (int i = 0; i < N_SETTINGS; i++) {
        const struct setting *s = &settings[i];
        if (!acted[i])
            continue;
        const char *value = hints ? hint_value(hints, size, s->hint) : NULL;
        if (value && !strcmp(value, s->text)) {
            note_effect(i, NULL, NULL, label);
            note_add(line, "%s=%s", s->hint, value);
        } else {
            char reason[320];
            hint_reason(i, value, hints, size, processes, reason, sizeof reason);
            if (*when) {
                char qualified[384];
                snprintf(qualified, sizeof qualified, "%s: %s", when, reason);
                note_effect(i, value ? value : "(not reported)", qualified, label);
            } else
                note_effect(i, value ? value : "(not reported)", reason, label);
            note_add(line, "%s: requested %s, in effect %s", s->hint, s->text, value ? value : "(not reported)");
        }
    }
}

/*
 * iobo's hints win over the program's: a key the program also set is
 * replaced (the verbose line names the program's value). ROMIO itself ranks
 * the program's MPI_Info above the ROMIO_HINTS file, so with the shim the
 * tuned value holds even for a program that passes its own hints. After the
 * open, MPI_File_get_info says what is in effect.
 */
int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    ensure_init();
    MPI_File_open_fn real = REAL(MPI_File_open);
    if (!real)
        real = PMPI_File_open;
    const char *label = filename ? filename : "?";
    bool any = any_hint_setting(), duplicated = false, acted[N_SETTINGS] = {false};
    struct note replaced = {.used = 0, .text = ""};
    MPI_Info tuned = any ? tuned_info(info, true, &duplicated, &replaced, acted) : info;

    uint64_t opened = now_ns(), phase = phase_enter();
    int status = real(comm, filename, amode, tuned, fh);
    phase_leave(PHASE_MPIIO, phase);
    if (duplicated)
        PMPI_Info_free(&tuned);
    if (status != MPI_SUCCESS)
        return status;

    add(&counters[MPIIO_LEVEL].files_opened, 1);
    size_t size = 0;
    char *hints = effective_hints(*fh, &size);
    struct note line = {.used = 0, .text = ""};
    for (int i = 0; i < N_SETTINGS; i++)
        if (acted[i])
            note_acted(i);
    int processes = 0;
    PMPI_Comm_size(comm, &processes);
    check_hints(acted, hints, size, processes, label, "", &line);

    pthread_mutex_lock(&records_lock);
    long record = record_for(MPIIO_LEVEL, label);
    if (record >= 0) {
        struct file_record *r = &records[record];
        if (!r->opens++)
            r->first_open_ns = opened;
        free(r->hints);
        r->hints = hints;
        r->hints_size = size;
        hints = NULL;
    }
    if (n_handles == handles_capacity) {
        size_t capacity = handles_capacity ? 2 * handles_capacity : 16;
        struct open_handle *grown = realloc(handles, capacity * sizeof *grown);
        if (grown) {
            handles = grown;
            handles_capacity = capacity;
        }
    }
    if (n_handles < handles_capacity)
        handles[n_handles++] = (struct open_handle){*fh, record};
    pthread_mutex_unlock(&records_lock);
    free(hints);

    if (verbose && any) {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        if (rank == 0)
            say("MPI_File_open %s: hints in effect %s%s%s%s", label, line.text,
                replaced.used ? " (replaced the program's " : "", replaced.text, replaced.used ? ")" : "");
    }
    return status;
}

/* HDF5's MPI-IO driver passes the program's MPI_Info again at every
 * collective transfer (MPI_File_set_view), and ROMIO applies it: without
 * this, the program's hints would quietly undo iobo's after the open. */
int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char *datarep,
                      MPI_Info info)
{
    MPI_File_set_view_fn real = REAL(MPI_File_set_view);
    if (!real)
        real = PMPI_File_set_view;
    ensure_init();
    if (info == MPI_INFO_NULL || !any_hint_setting()) {
        uint64_t phase = phase_enter();
        int status = real(fh, disp, etype, filetype, datarep, info);
        phase_leave(PHASE_MPIIO, phase);
        return status;
    }
    bool duplicated = false, acted[N_SETTINGS] = {false};
    struct note replaced = {.used = 0, .text = ""};
    MPI_Info tuned = tuned_info(info, false, &duplicated, &replaced, acted);
    uint64_t phase = phase_enter();
    int status = real(fh, disp, etype, filetype, datarep, tuned);
    phase_leave(PHASE_MPIIO, phase);
    if (duplicated)
        PMPI_Info_free(&tuned);
    return status;
}

int MPI_File_set_info(MPI_File fh, MPI_Info info)
{
    MPI_File_set_info_fn real = REAL(MPI_File_set_info);
    if (!real)
        real = PMPI_File_set_info;
    ensure_init();
    if (info == MPI_INFO_NULL || !any_hint_setting())
        return real(fh, info);
    bool duplicated = false, acted[N_SETTINGS] = {false};
    struct note replaced = {.used = 0, .text = ""};
    MPI_Info tuned = tuned_info(info, false, &duplicated, &replaced, acted);
    int status = real(fh, tuned);
    if (duplicated)
        PMPI_Info_free(&tuned);
    return status;
}

/* At close the hints are read once more: what held until the end is what
 * the report keeps, and a requested hint changed since the open is noted. */
int MPI_File_close(MPI_File *fh)
{
    MPI_File_close_fn real = REAL(MPI_File_close);
    if (!real)
        real = PMPI_File_close;
    ensure_init();
    long record = -1;
    MPI_File handle = fh ? *fh : MPI_FILE_NULL;
    pthread_mutex_lock(&records_lock);
    for (size_t i = 0; i < n_handles; i++) {
        if (handles[i].fh == handle) {
            record = handles[i].record;
            handles[i] = handles[--n_handles];
            break;
        }
    }
    pthread_mutex_unlock(&records_lock);

    if (record >= 0 && handle != MPI_FILE_NULL) {
        size_t size = 0;
        char *hints = effective_hints(handle, &size);
        bool changed[N_SETTINGS] = {false};
        struct note line = {.used = 0, .text = ""};
        pthread_mutex_lock(&records_lock);
        const struct file_record *r = &records[record];
        for (int i = 0; i < N_SETTINGS; i++) { /* requested, and another value than at the open */
            const struct setting *s = &settings[i];
            if (!s->hint || !s->set || !hints || !r->hints)
                continue;
            const char *now = hint_value(hints, size, s->hint), *then = hint_value(r->hints, r->hints_size, s->hint);
            changed[i] = now && strcmp(now, s->text) != 0 && (!then || strcmp(now, then) != 0);
        }
        int processes = 0;
        MPI_Group group;
        if (PMPI_File_get_group(handle, &group) == MPI_SUCCESS) {
            PMPI_Group_size(group, &processes);
            PMPI_Group_free(&group);
        }
        check_hints(changed, hints, size, processes, r->name, "changed after the open", &line);
        free(records[record].hints);
        records[record].hints = hints;
        records[record].hints_size = size;
        pthread_mutex_unlock(&records_lock);
    }
    uint64_t phase = phase_enter();
    int status = real(fh);
    phase_leave(PHASE_MPIIO, phase);
    if (status == MPI_SUCCESS)
        record_close(record);
    return status;
}

/* ------------------------------------------------------------------------ */
/* MPI-IO reads and writes: accounting                                       */

static inline void account_mpiio(enum direction direction, bool collective, MPI_Count count, MPI_Datatype datatype,
                                 uint64_t nanoseconds)
{
    MPI_Count size = 0;
    PMPI_Type_size_x(datatype, &size);
    uint64_t bytes = count > 0 && size > 0 ? (uint64_t)count * (uint64_t)size : 0;
    account(MPIIO_LEVEL, direction, bytes, nanoseconds);
    struct traffic *t = &counters[MPIIO_LEVEL].traffic[direction];
    add(collective ? &t->collective_calls : &t->independent_calls, 1);
}

/* One wrapper: the next definition's result, with the bytes requested
 * (count x datatype size) and the seconds inside the call counted on success.
 * Non-blocking and split-collective calls count at their start (their
 * seconds are the initiation only). */
#define MPIIO_WRAPPER(name, direction, collective, PARAMS, ARGS)                   \
    typedef int(*name##_fn) PARAMS;                                                \
    static name##_fn real_##name;                                                  \
    int name PARAMS                                                                \
    {                                                                              \
        name##_fn real = REAL(name);                                               \
        if (!real)                                                                 \
            return MPI_ERR_INTERN;                                                 \
        uint64_t start = now_ns(), phase = phase_enter();                          \
        int status = real ARGS;                                                    \
        phase_leave(PHASE_MPIIO, phase);                                           \
        if (status == MPI_SUCCESS)                                                 \
            account_mpiio(direction, collective, count, datatype, now_ns() - start); \
        return status;                                                             \
    }

#define PLAIN(BUF, COUNT, LAST) (MPI_File fh, BUF buf, COUNT count, MPI_Datatype datatype, LAST last)
#define AT(BUF, COUNT, LAST) (MPI_File fh, MPI_Offset offset, BUF buf, COUNT count, MPI_Datatype datatype, LAST last)
#define BEGIN(BUF, COUNT) (MPI_File fh, BUF buf, COUNT count, MPI_Datatype datatype)
#define AT_BEGIN(BUF, COUNT) (MPI_File fh, MPI_Offset offset, BUF buf, COUNT count, MPI_Datatype datatype)
#define PLAIN_ARGS (fh, buf, count, datatype, last)
#define AT_ARGS (fh, offset, buf, count, datatype, last)
#define BEGIN_ARGS (fh, buf, count, datatype)
#define AT_BEGIN_ARGS (fh, offset, buf, count, datatype)

/* the MPI-3 calls (int count) and their MPI-4 large-count twins (_c) */
#define MPIIO_FAMILY(suffix, COUNT)                                                                              \
    MPIIO_WRAPPER(MPI_File_write##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Status *), PLAIN_ARGS)    \
    MPIIO_WRAPPER(MPI_File_write_all##suffix, WRITE, true, PLAIN(const void *, COUNT, MPI_Status *), PLAIN_ARGS) \
    MPIIO_WRAPPER(MPI_File_write_shared##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Status *),         \
                  PLAIN_ARGS)                                                                                    \
    MPIIO_WRAPPER(MPI_File_write_ordered##suffix, WRITE, true, PLAIN(const void *, COUNT, MPI_Status *),         \
                  PLAIN_ARGS)                                                                                    \
    MPIIO_WRAPPER(MPI_File_write_at##suffix, WRITE, false, AT(const void *, COUNT, MPI_Status *), AT_ARGS)       \
    MPIIO_WRAPPER(MPI_File_write_at_all##suffix, WRITE, true, AT(const void *, COUNT, MPI_Status *), AT_ARGS)    \
    MPIIO_WRAPPER(MPI_File_iwrite##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Request *), PLAIN_ARGS)  \
    MPIIO_WRAPPER(MPI_File_iwrite_all##suffix, WRITE, true, PLAIN(const void *, COUNT, MPI_Request *),           \
                  PLAIN_ARGS)                                                                                    \
    MPIIO_WRAPPER(MPI_File_iwrite_shared##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Request *),       \
                  PLAIN_ARGS)                                                                                    \
    MPIIO_WRAPPER(MPI_File_iwrite_at##suffix, WRITE, false, AT(const void *, COUNT, MPI_Request *), AT_ARGS)     \
    MPIIO_WRAPPER(MPI_File_iwrite_at_all##suffix, WRITE, true, AT(const void *, COUNT, MPI_Request *), AT_ARGS)  \
    MPIIO_WRAPPER(MPI_File_write_all_begin##suffix, WRITE, true, BEGIN(const void *, COUNT), BEGIN_ARGS)         \
    MPIIO_WRAPPER(MPI_File_write_ordered_begin##suffix, WRITE, true, BEGIN(const void *, COUNT), BEGIN_ARGS)     \
    MPIIO_WRAPPER(MPI_File_write_at_all_begin##suffix, WRITE, true, AT_BEGIN(const void *, COUNT), AT_BEGIN_ARGS) \
    MPIIO_WRAPPER(MPI_File_read##suffix, READ, false, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS)            \
    MPIIO_WRAPPER(MPI_File_read_all##suffix, READ, true, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS)         \
    MPIIO_WRAPPER(MPI_File_read_shared##suffix, READ, false, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS)     \
    MPIIO_WRAPPER(MPI_File_read_ordered##suffix, READ, true, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS)     \
    MPIIO_WRAPPER(MPI_File_read_at##suffix, READ, false, AT(void *, COUNT, MPI_Status *), AT_ARGS)               \
    MPIIO_WRAPPER(MPI_File_read_at_all##suffix, READ, true, AT(void *, COUNT, MPI_Status *), AT_ARGS)            \
    MPIIO_WRAPPER(MPI_File_iread##suffix, READ, false, PLAIN(void *, COUNT, MPI_Request *), PLAIN_ARGS)          \
    MPIIO_WRAPPER(MPI_File_iread_all##suffix, READ, true, PLAIN(void *, COUNT, MPI_Request *), PLAIN_ARGS)       \
    MPIIO_WRAPPER(MPI_File_iread_shared##suffix, READ, false, PLAIN(void *, COUNT, MPI_Request *), PLAIN_ARGS)   \
    MPIIO_WRAPPER(MPI_File_iread_at##suffix, READ, false, AT(void *, COUNT, MPI_Request *), AT_ARGS)             \
    MPIIO_WRAPPER(MPI_File_iread_at_all##suffix, READ, true, AT(void *, COUNT, MPI_Request *), AT_ARGS)          \
    MPIIO_WRAPPER(MPI_File_read_all_begin##suffix, READ, true, BEGIN(void *, COUNT), BEGIN_ARGS)                 \
    MPIIO_WRAPPER(MPI_File_read_ordered_begin##suffix, READ, true, BEGIN(void *, COUNT), BEGIN_ARGS)             \
    MPIIO_WRAPPER(MPI_File_read_at_all_begin##suffix, READ, true, AT_BEGIN(void *, COUNT), AT_BEGIN_ARGS)

MPIIO_FAMILY(, int)
MPIIO_FAMILY(_c, MPI_Count)

/* MPI-IO calls that move no data of the program's and count in the I/O phases only. */
#define MPIIO_PHASE_WRAPPER(name, PARAMS, ARGS) \
    typedef int(*name##_fn) PARAMS;              \
    static name##_fn real_##name;                \
    int name PARAMS                              \
    {                                            \
        name##_fn real = REAL(name);             \
        if (!real)                               \
            return MPI_ERR_INTERN;               \
        uint64_t phase = phase_enter();          \
        int status = real ARGS;                  \
        phase_leave(PHASE_MPIIO, phase);         \
        return status;                           \
    }

MPIIO_PHASE_WRAPPER(MPI_File_sync, (MPI_File fh), (fh))
MPIIO_PHASE_WRAPPER(MPI_File_set_size, (MPI_File fh, MPI_Offset size), (fh, size))
MPIIO_PHASE_WRAPPER(MPI_File_preallocate, (MPI_File fh, MPI_Offset size), (fh, size))

/* ------------------------------------------------------------------------ */
/* POSIX reads and writes on regular files: accounting                       */

/* What each descriptor is, set at open and cleared at close: a regular
 * file opened through the wrappers below counts (FILE_UNUSED until its first
 * read or write, then FILE_USED); anything else they opened (a pipe, a
 * device, a file of /proc, /sys or a cgroup) does not, nor does a descriptor
 * they did not open (inherited stdin, stdout and stderr, sockets, dup(),
 * libc's own fopen). */
enum fd_kind { FD_UNKNOWN, FD_OTHER, FILE_UNUSED, FILE_USED };
#define FD_KIND_MASK 0x0f
#define FD_OUTPUT 0x10 /* flag: the file was opened for writing */
#define FD_KINDS 65536
static uint8_t fd_kinds[FD_KINDS];
/* The seconds (ns) of the outermost open of each counted file: they join the
 * I/O phases at the file's first read, write or sync (MPI's shared-memory
 * files are opened, never read or written). */
static uint64_t open_phase_ns[FD_KINDS];

static enum fd_kind classify_fd(int fd)
{
    struct stat st;
    struct statfs fs;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return FD_OTHER;
    if (fstatfs(fd, &fs) == 0 && (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC ||
                                  fs.f_type == CGROUP_SUPER_MAGIC || fs.f_type == CGROUP2_SUPER_MAGIC))
        return FD_OTHER;
    return FILE_UNUSED;
}

/* Whether I/O on `fd` counts; the first on a file counts the file as used
 * (the POSIX level's files_opened: MPI's shared-memory files are opened and
 * mapped, never read or written). */
static inline bool counted_fd(int fd)
{
    if (fd < 0 || fd >= FD_KINDS)
        return false;
    uint8_t kind = __atomic_load_n(&fd_kinds[fd], __ATOMIC_RELAXED);
    if ((kind & FD_KIND_MASK) == FILE_UNUSED) {
        uint8_t expected = kind;
        if (__atomic_compare_exchange_n(&fd_kinds[fd], &expected, (uint8_t)((kind & FD_OUTPUT) | FILE_USED), false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            add(&counters[POSIX_LEVEL].files_opened, 1);
            uint64_t opening = __atomic_exchange_n(&open_phase_ns[fd], 0, __ATOMIC_RELAXED);
            add(&phase_ns[PHASE_POSIX], opening);
            if (kind & FD_OUTPUT)
                add(&phase_ns[PHASE_POSIX_OUTPUTS], opening);
        }
        return true;
    }
    return (kind & FD_KIND_MASK) == FILE_USED;
}

/* The I/O phase of an outermost POSIX call on a counted file. */
static inline void posix_phase(int fd, uint64_t start)
{
    if (!start)
        return;
    uint64_t elapsed = now_ns() - start;
    add(&phase_ns[PHASE_POSIX], elapsed);
    if (__atomic_load_n(&fd_kinds[fd], __ATOMIC_RELAXED) & FD_OUTPUT)
        add(&phase_ns[PHASE_POSIX_OUTPUTS], elapsed);
}

/* After an open: what the descriptor is, and the open's seconds when it was
 * the outermost I/O call (`start`, else 0). */
static void opened_fd(int fd, int flags, uint64_t start)
{
    if (fd < 0 || fd >= FD_KINDS || quiet) /* beyond FD_KINDS: not counted */
        return;
    uint8_t kind = (uint8_t)classify_fd(fd);
    if (kind == FILE_UNUSED && (flags & O_ACCMODE) != O_RDONLY)
        kind |= FD_OUTPUT;
    __atomic_store_n(&open_phase_ns[fd], kind == FD_OTHER || !start ? 0 : now_ns() - start, __ATOMIC_RELAXED);
    __atomic_store_n(&fd_kinds[fd], kind, __ATOMIC_RELAXED);
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite64_fn)(int, const void *, size_t, off64_t);
typedef ssize_t (*pread64_fn)(int, void *, size_t, off64_t);
typedef int (*open_fn)(const char *, int, ...);
typedef int (*open64_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*openat64_fn)(int, const char *, int, ...);
typedef int (*creat_fn)(const char *, mode_t);
typedef int (*creat64_fn)(const char *, mode_t);
typedef int (*close_fn)(int);

static write_fn real_write;
static read_fn real_read;
static pwrite_fn real_pwrite;
static pread_fn real_pread;
static pwrite64_fn real_pwrite64;
static pread64_fn real_pread64;
static open_fn real_open;
static open64_fn real_open64;
static openat_fn real_openat;
static openat64_fn real_openat64;
static creat_fn real_creat;
static creat64_fn real_creat64;
static close_fn real_close;

/* The call `expr` (returning bytes moved or -1), counted for a regular file. */
#define POSIX_TRANSFER(direction, fd, expr)                              \
    do {                                                                 \
        if (quiet || !counted_fd(fd))                                    \
            return expr;                                                 \
        uint64_t start = now_ns(), phase = phase_enter();                \
        ssize_t moved = expr;                                            \
        uint64_t elapsed = now_ns() - start;                             \
        phase_depth--;                                                   \
        posix_phase(fd, phase);                                          \
        if (moved >= 0)                                                  \
            account(POSIX_LEVEL, direction, (uint64_t)moved, elapsed);   \
        return moved;                                                    \
    } while (0)

ssize_t write(int fd, const void *buf, size_t count)
{
    write_fn real = REAL(write);
    POSIX_TRANSFER(WRITE, fd, real(fd, buf, count));
}

ssize_t read(int fd, void *buf, size_t count)
{
    read_fn real = REAL(read);
    POSIX_TRANSFER(READ, fd, real(fd, buf, count));
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    pwrite_fn real = REAL(pwrite);
    POSIX_TRANSFER(WRITE, fd, real(fd, buf, count, offset));
}

ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    pread_fn real = REAL(pread);
    POSIX_TRANSFER(READ, fd, real(fd, buf, count, offset));
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset)
{
    pwrite64_fn real = REAL(pwrite64);
    POSIX_TRANSFER(WRITE, fd, real(fd, buf, count, offset));
}

ssize_t pread64(int fd, void *buf, size_t count, off64_t offset)
{
    pread64_fn real = REAL(pread64);
    POSIX_TRANSFER(READ, fd, real(fd, buf, count, offset));
}

/* The mode argument open() takes only when it creates a file. */
static bool needs_mode(int flags)
{
#ifdef O_TMPFILE
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
#else
    return (flags & O_CREAT) != 0;
#endif
}

#define OPEN_MODE(flags, mode)                  \
    do {                                        \
        if (needs_mode(flags)) {                \
            va_list args;                       \
            va_start(args, flags);              \
            mode = (mode_t)va_arg(args, int);   \
            va_end(args);                       \
        }                                       \
    } while (0)

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(open)(path, flags, mode);
    phase_depth--;
    opened_fd(fd, flags, phase);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(open64)(path, flags, mode);
    phase_depth--;
    opened_fd(fd, flags, phase);
    return fd;
}

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(openat)(dirfd, path, flags, mode);
    phase_depth--;
    opened_fd(fd, flags, phase);
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(openat64)(dirfd, path, flags, mode);
    phase_depth--;
    opened_fd(fd, flags, phase);
    return fd;
}

int creat(const char *path, mode_t mode)
{
    uint64_t phase = phase_enter();
    int fd = REAL(creat)(path, mode);
    phase_depth--;
    opened_fd(fd, O_WRONLY, phase);
    return fd;
}

int creat64(const char *path, mode_t mode)
{
    uint64_t phase = phase_enter();
    int fd = REAL(creat64)(path, mode);
    phase_depth--;
    opened_fd(fd, O_WRONLY, phase);
    return fd;
}

int close(int fd)
{
    bool used = !quiet && fd >= 0 && fd < FD_KINDS &&
                (__atomic_load_n(&fd_kinds[fd], __ATOMIC_RELAXED) & FD_KIND_MASK) == FILE_USED;
    uint64_t phase = used ? phase_enter() : 0;
    int status = REAL(close)(fd);
    if (used) {
        phase_depth--;
        posix_phase(fd, phase);
    }
    if (fd >= 0 && fd < FD_KINDS)
        __atomic_store_n(&fd_kinds[fd], FD_UNKNOWN, __ATOMIC_RELAXED);
    return status;
}

typedef int (*fsync_fn)(int);
typedef int (*fdatasync_fn)(int);
static fsync_fn real_fsync;
static fdatasync_fn real_fdatasync;

/* A sync of a counted file is part of the I/O phases (and uses the file). */
#define POSIX_SYNC(fd, expr)                                  \
    do {                                                      \
        if (quiet || !counted_fd(fd))                         \
            return expr;                                      \
        uint64_t phase = phase_enter();                       \
        int status = expr;                                    \
        phase_depth--;                                        \
        posix_phase(fd, phase);                               \
        return status;                                        \
    } while (0)

int fsync(int fd)
{
    fsync_fn real = REAL(fsync);
    POSIX_SYNC(fd, real(fd));
}

int fdatasync(int fd)
{
    fdatasync_fn real = REAL(fdatasync);
    POSIX_SYNC(fd, real(fd));
}

/* ------------------------------------------------------------------------ */
/* how the program has HDF5: dynamic (the shim can act), static, none        */

/* Whether a loaded object other than the shim lists libhdf5 as a dependency. */
static int needs_hdf5(struct dl_phdr_info *info, size_t size, void *shim_path)
{
    (void)size;
    if (!strcmp(info->dlpi_name, (const char *)shim_path) || !strncmp(info->dlpi_name, "linux-vdso", 10))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        uintptr_t strtab = 0;
        for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_STRTAB)
                strtab = d->d_un.d_ptr;
        if (!strtab)
            continue;
        if (strtab < info->dlpi_addr) /* not relocated by the loader */
            strtab += info->dlpi_addr;
        for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_NEEDED && strstr((const char *)strtab + d->d_un.d_val, "libhdf5"))
                return 1;
    }
    return 0;
}

/* Whether the program's executable carries HDF5's version string: the
 * library linked into it. Read once, only when no HDF5 call was seen. */
static bool executable_has_hdf5(void)
{
    static const char marker[] = "HDF5 library version:";
    const size_t keep = sizeof marker - 1;
    bool found = false;
    quiet = true;
    FILE *exe = fopen("/proc/self/exe", "rb");
    if (exe) {
        size_t block = 1 << 20;
        char *buffer = malloc(block + keep);
        size_t carried = 0;
        while (buffer && !found) {
            size_t got = fread(buffer + carried, 1, block, exe);
            if (!got)
                break;
            found = memmem(buffer, carried + got, marker, keep) != NULL;
            size_t total = carried + got;
            carried = total < keep ? total : keep;
            memmove(buffer, buffer + total - carried, carried);
        }
        free(buffer);
        fclose(exe);
    }
    quiet = false;
    return found;
}

static void program_path(char *out, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    out[n > 0 ? (size_t)n : 0] = '\0';
    if (n <= 0)
        snprintf(out, size, "%s", program_invocation_name);
}

/* "dynamic" when HDF5 calls were intercepted (or a loaded library needs a
 * shared libhdf5), "static" when the executable contains HDF5, else "none". */
static const char *hdf5_linked(uint64_t calls)
{
    if (calls)
        return "dynamic";
    if (executable_has_hdf5())
        return "static";
    Dl_info self;
    const char *shim = dladdr((void *)&hdf5_linked, &self) && self.dli_fname ? self.dli_fname : "";
    return dl_iterate_phdr(needs_hdf5, (void *)shim) ? "dynamic" : "none";
}

/* ------------------------------------------------------------------------ */
/* at exit: warnings and the report                                          */

/* Counts summed over ranks (at MPI_Finalize) or of this process alone. */
struct totals {
    uint64_t hdf5_calls;
    uint64_t considered[N_SETTINGS], acted[N_SETTINGS], in_effect[N_SETTINGS], differs[N_SETTINGS];
};

static void local_totals(struct totals *t)
{
    t->hdf5_calls = load(&hdf5_calls);
    for (int i = 0; i < N_SETTINGS; i++) {
        t->considered[i] = load(&settings[i].considered);
        t->acted[i] = load(&settings[i].acted);
        t->in_effect[i] = load(&settings[i].in_effect);
        t->differs[i] = load(&settings[i].differs);
    }
}

#define STATIC_TEXT                                                                                    \
    "HDF5 is linked statically into %s: the shim cannot change its HDF5 calls; relink with `h5pcc -shlib` " \
    "(or -lhdf5 shared)"

/* Why a requested setting never acted, given the totals. */
static void unused_reason(int which, const struct totals *t, const char *linked, const char *program, char *out,
                          size_t size)
{
    struct mismatch m;
    if (is_hdf5_setting(which) && !strcmp(linked, "static")) {
        snprintf(out, size, STATIC_TEXT, program);
    } else if (which == CHUNK_SIZE && !choice_is(LAYOUT, "chunked")) {
        snprintf(out, size, "IOBO_CHUNK_SIZE acts only with IOBO_LAYOUT=\"chunked\"");
    } else if (t->considered[which] && first_mismatch(which, &m)) {
        snprintf(out, size, "none of the %" PRIu64 " calls that could take it did (%s: %s)", t->considered[which],
                 m.where, m.reason);
    } else if (t->considered[which]) {
        snprintf(out, size, "none of the %" PRIu64 " calls that could take it did", t->considered[which]);
    } else {
        const char *stage = "no MPI_File_open call was intercepted";
        if (which == LAYOUT || which == CHUNK_SIZE)
            stage = "no H5Dcreate2, H5Dcreate1 or H5Dcreate_anon call was intercepted";
        else if (which == TRANSFER_MODE)
            stage = "no H5Dwrite was intercepted on a file opened through the shim with the MPI-IO driver";
        else if (is_hdf5_setting(which))
            stage = "no H5Fcreate or H5Fopen call was intercepted";
        snprintf(out, size, "%s%s", stage,
                 is_hdf5_setting(which) && !strcmp(linked, "none") ? " (the program does not use HDF5)" : "");
    }
}

#define MAX_WARNINGS 48
static char *warnings[MAX_WARNINGS];
static size_t n_warnings;

static void warn_at_exit(bool print, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void warn_at_exit(bool print, const char *format, ...)
{
    char text[LINE_MAX_CHARS];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    if (print)
        say("warning: %s", text);
    if (n_warnings < MAX_WARNINGS)
        warnings[n_warnings++] = strdup(text);
}

/* The warnings about requested settings, from totals over every rank. */
static void exit_warnings(const struct totals *t, const char *linked, const char *program, bool print)
{
    struct note statically = {.used = 0, .text = ""};
    for (int i = 0; i < N_SETTINGS; i++) {
        const struct setting *s = &settings[i];
        if (!s->set)
            continue;
        if (is_hdf5_setting(i) && !strcmp(linked, "static")) {
            note_add(&statically, "%s,", s->env);
            continue;
        }
        if (!t->acted[i]) {
            char reason[LINE_MAX_CHARS / 2];
            unused_reason(i, t, linked, program, reason, sizeof reason);
            warn_at_exit(print, "%s=%s was never applied: %s", s->env, s->text, reason);
        } else if (!t->in_effect[i] && t->differs[i]) {
            struct mismatch m;
            if (first_mismatch(i, &m))
                warn_at_exit(print, "%s=%s did not take effect: in effect %s on %s (%s)", s->env, s->text, m.in_effect,
                             m.where, m.reason);
            else
                warn_at_exit(print, "%s=%s did not take effect on any of %" PRIu64 " calls (see the report)", s->env,
                             s->text, t->differs[i]);
        }
    }
    if (statically.used) {
        statically.text[--statically.used] = '\0'; /* the last comma */
        char text[LINE_MAX_CHARS];
        snprintf(text, sizeof text, STATIC_TEXT, program);
        warn_at_exit(print, "%s (not applied: %s)", text, statically.text);
    }
}

/* A JSON document grown in memory (written once, at exit). */
struct json {
    char *text;
    size_t used, capacity;
    bool comma;
};

static void j_raw(struct json *j, const char *text, size_t length)
{
    if (j->used + length + 1 > j->capacity) {
        size_t capacity = 2 * (j->used + length + 1) + 4096;
        char *grown = realloc(j->text, capacity);
        if (!grown)
            return;
        j->text = grown;
        j->capacity = capacity;
    }
    memcpy(j->text + j->used, text, length);
    j->used += length;
    j->text[j->used] = '\0';
}

static void j_printf(struct json *j, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void j_printf(struct json *j, const char *format, ...)
{
    char text[128];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(text, sizeof text, format, args);
    va_end(args);
    if (n > 0)
        j_raw(j, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
}

static void j_quoted(struct json *j, const char *s)
{
    j_raw(j, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char escaped[2] = {'\\', (char)c};
            j_raw(j, escaped, 2);
        } else if (c < 0x20)
            j_printf(j, "\\u%04x", c);
        else
            j_raw(j, (const char *)&c, 1);
    }
    j_raw(j, "\"", 1);
}

/* Start a value: the comma before it, and its key inside an object. */
static void j_key(struct json *j, const char *key)
{
    if (j->comma)
        j_raw(j, ",", 1);
    if (key) {
        j_quoted(j, key);
        j_raw(j, ":", 1);
    }
    j->comma = true;
}

static void j_open(struct json *j, const char *key, const char *bracket)
{
    j_key(j, key);
    j_raw(j, bracket, 1);
    j->comma = false;
}

static void j_close(struct json *j, const char *bracket)
{
    j_raw(j, bracket, 1);
    j->comma = true;
}

static void j_string(struct json *j, const char *key, const char *value)
{
    j_key(j, key);
    j_quoted(j, value);
}

static void j_u64(struct json *j, const char *key, uint64_t value)
{
    j_key(j, key);
    j_printf(j, "%" PRIu64, value);
}

static void j_seconds(struct json *j, const char *key, uint64_t nanoseconds)
{
    j_key(j, key);
    j_printf(j, "%.9f", (double)nanoseconds / 1e9);
}

static void j_bool(struct json *j, const char *key, bool value)
{
    j_key(j, key);
    j_raw(j, value ? "true" : "false", value ? 4 : 5);
}

static void report_levels(struct json *j)
{
    j_open(j, "levels", "{");
    for (int level = 0; level < N_LEVELS; level++) {
        j_open(j, level_names[level], "{");
        j_u64(j, "files_opened", load(&counters[level].files_opened));
        for (int direction = 0; direction < N_DIRECTIONS; direction++) {
            const struct traffic *t = &counters[level].traffic[direction];
            j_open(j, direction_names[direction], "{");
            j_u64(j, "calls", load(&t->calls));
            j_u64(j, "bytes", load(&t->bytes));
            j_seconds(j, "seconds", load(&t->nanoseconds));
            if (level == MPIIO_LEVEL) {
                j_u64(j, "collective_calls", load(&t->collective_calls));
                j_u64(j, "independent_calls", load(&t->independent_calls));
            }
            j_open(j, "histogram", "{");
            for (int bin = 0; bin < N_BINS; bin++) {
                uint64_t n = load(&t->histogram[bin]);
                if (!n)
                    continue;
                char lower[24];
                snprintf(lower, sizeof lower, "%" PRIu64, bin ? (uint64_t)1 << (bin - 1) : 0);
                j_u64(j, lower, n);
            }
            j_close(j, "}");
            j_close(j, "}");
        }
        j_close(j, "}");
    }
    j_close(j, "}");
}

static void report_settings(struct json *j, const struct totals *local, const char *linked, const char *program)
{
    char name[64], reason[LINE_MAX_CHARS / 2];
    j_open(j, "requested", "[");
    for (int i = 0; i < N_SETTINGS; i++) {
        if (!settings[i].set)
            continue;
        setting_name(i, name, sizeof name);
        j_open(j, NULL, "{");
        j_string(j, "variable", settings[i].env);
        j_string(j, "setting", name);
        j_string(j, "value", settings[i].text);
        j_u64(j, "calls_considered", local->considered[i]);
        j_u64(j, "calls_acted", local->acted[i]);
        j_u64(j, "calls_in_effect", local->in_effect[i]);
        j_u64(j, "calls_differ", local->differs[i]);
        j_close(j, "}");
    }
    j_close(j, "]");

    j_open(j, "unused", "[");
    for (int i = 0; i < N_SETTINGS; i++) {
        if (!settings[i].set || local->acted[i])
            continue;
        setting_name(i, name, sizeof name);
        unused_reason(i, local, linked, program, reason, sizeof reason);
        j_open(j, NULL, "{");
        j_string(j, "variable", settings[i].env);
        j_string(j, "setting", name);
        j_string(j, "requested", settings[i].text);
        j_string(j, "reason", reason);
        j_close(j, "}");
    }
    j_close(j, "]");

    j_open(j, "not_applied", "[");
    pthread_mutex_lock(&mismatch_lock);
    for (size_t i = 0; i < n_mismatches; i++) {
        const struct mismatch *m = &mismatches[i];
        setting_name(m->which, name, sizeof name);
        j_open(j, NULL, "{");
        j_string(j, "variable", settings[m->which].env);
        j_string(j, "setting", name);
        j_string(j, "requested", settings[m->which].text);
        j_string(j, "in_effect", m->in_effect);
        j_string(j, "reason", m->reason);
        j_string(j, "where", m->where);
        j_u64(j, "count", m->count);
        j_close(j, "}");
    }
    pthread_mutex_unlock(&mismatch_lock);
    j_close(j, "]");
}

static void report_files(struct json *j)
{
    pthread_mutex_lock(&records_lock);
    j_open(j, "files", "[");
    for (size_t i = 0; i < n_records; i++) {
        const struct file_record *r = &records[i];
        j_open(j, NULL, "{");
        j_string(j, "level", level_names[r->level]);
        j_string(j, "name", r->name);
        j_string(j, "path", r->path);
        j_string(j, "fs_type", r->fs_type);
        j_u64(j, "opens", r->opens);
        if (r->last_close_ns >= r->first_open_ns && r->last_close_ns)
            j_seconds(j, "open_seconds", r->last_close_ns - r->first_open_ns);
        else {
            j_key(j, "open_seconds");
            j_raw(j, "null", 4);
        }
        if (r->level == MPIIO_LEVEL) {
            j_open(j, "hints", "{");
            for (size_t at = 0; r->hints && at < r->hints_size;) {
                const char *key = r->hints + at;
                const char *value = key + strlen(key) + 1;
                j_string(j, key, value);
                at = (size_t)(value + strlen(value) + 1 - r->hints);
            }
            j_close(j, "}");
        } else {
            const struct fapl_values *v = &r->fapl;
            j_string(j, "driver", r->mpio ? "mpio" : "other");
            j_open(j, "settings", "{");
            if (v->ok) {
                j_u64(j, "alignment_threshold", v->threshold);
                j_u64(j, "alignment_interval", v->interval);
                j_u64(j, "meta_block_size", v->meta_block);
                j_u64(j, "sieve_buf_size", v->sieve_buf);
            }
            if (v->mdc_ok)
                j_u64(j, "mdc_initial_size", v->mdc_initial);
            if (v->coll_ok) {
                j_bool(j, "coll_metadata_ops", v->coll_ops);
                j_bool(j, "coll_metadata_write", v->coll_write);
            }
            j_close(j, "}");
        }
        j_close(j, "}");
    }
    j_close(j, "]");
    j_u64(j, "files_not_listed", records_dropped);
    pthread_mutex_unlock(&records_lock);
}

static void report_datasets(struct json *j)
{
    pthread_mutex_lock(&datasets_lock);
    j_open(j, "datasets", "[");
    for (size_t i = 0; i < n_datasets; i++) {
        const struct dataset_record *d = &datasets[i];
        j_open(j, NULL, "{");
        j_string(j, "name", d->name);
        j_string(j, "layout", layout_name(d->layout));
        j_open(j, "chunk", "[");
        for (int axis = 0; axis < d->rank; axis++)
            j_u64(j, NULL, d->chunk[axis]);
        j_close(j, "]");
        j_bool(j, "changed_by_shim", d->by_shim);
        j_close(j, "}");
    }
    j_close(j, "]");
    j_u64(j, "datasets_created", load(&datasets_created));
    pthread_mutex_unlock(&datasets_lock);

    j_open(j, "transfer", "{");
    for (int direction = 0; direction < N_DIRECTIONS; direction++) {
        j_open(j, direction_names[direction], "{");
        j_open(j, "modes", "{");
        for (int mode = 0; mode < N_IO_MODES; mode++)
            if (load(&io_modes[direction][mode]))
                j_u64(j, io_mode_names[mode], load(&io_modes[direction][mode]));
        j_close(j, "}");
        uint32_t causes = __atomic_load_n(&no_collective_causes[direction], __ATOMIC_RELAXED);
        j_open(j, "no_collective_causes", "[");
        for (size_t i = 0; i < N_CAUSES; i++)
            if (causes & cause_texts[i].bit)
                j_string(j, NULL, cause_texts[i].text);
        j_close(j, "]");
        j_close(j, "}");
    }
    j_close(j, "}");
}

/* Write prefix.<rank>.json (through a temporary file and a rename, so that a
 * reader never sees half a report). */
static void write_report(int rank, int ranks, bool with_mpi, const char *linked, const char *program)
{
    struct totals local;
    local_totals(&local);
    struct json j = {.text = NULL, .used = 0, .capacity = 0, .comma = false};
    j_open(&j, NULL, "{");
    j_string(&j, "format", "iobo-preload-report");
    j_u64(&j, "version", 1);
    j_u64(&j, "rank", (uint64_t)rank);
    j_u64(&j, "ranks", (uint64_t)ranks);
    j_u64(&j, "pid", (uint64_t)getpid());
    j_string(&j, "program", program);
    j_bool(&j, "mpi", with_mpi);
    j_string(&j, "hdf5_linked", linked);
    j_u64(&j, "hdf5_calls", local.hdf5_calls);
    j_seconds(&j, "elapsed_seconds", now_ns() - start_ns);
    report_levels(&j);
    j_open(&j, "phase_seconds", "{");
    for (int part = 0; part < N_PHASE_PARTS; part++)
        j_seconds(&j, phase_names[part], load(&phase_ns[part]));
    j_close(&j, "}");
    report_settings(&j, &local, linked, program);
    report_files(&j);
    report_datasets(&j);
    j_open(&j, "warnings", "[");
    for (size_t i = 0; i < n_warnings; i++)
        j_string(&j, NULL, warnings[i]);
    j_close(&j, "]");
    j_close(&j, "}");
    j_raw(&j, "\n", 1);
    if (!j.text)
        return;

    char path[PATH_MAX + 64], temporary[PATH_MAX + 96];
    snprintf(path, sizeof path, "%s.%d.json", report_prefix, rank);
    snprintf(temporary, sizeof temporary, "%s.tmp.%d", path, (int)getpid());
    quiet = true;
    FILE *out = fopen(temporary, "w");
    bool ok = out && fwrite(j.text, 1, j.used, out) == j.used;
    ok = out && fclose(out) == 0 && ok;
    if (ok && rename(temporary, path) != 0)
        ok = false;
    quiet = false;
    if (!ok)
        say("warning: cannot write the report %s: %s", path, strerror(errno));
    free(j.text);
}

static bool finished; /* the exit work is done (once per process) */

/* Whether a process that did not finalize MPI reports: one that initialized
 * MPI, or made HDF5 calls, or opened a file with MPI-IO. Every other process
 * that loads the shim stays silent: mpiexec and its proxies, and the shells
 * and tools of a job script that exports LD_PRELOAD. */
static bool took_part(void)
{
    int initialized = 0;
    PMPI_Initialized(&initialized);
    return initialized || load(&hdf5_calls) || load(&counters[MPIIO_LEVEL].files_opened);
}

static bool anything_requested(void)
{
    for (int i = 0; i < N_SETTINGS; i++)
        if (settings[i].set)
            return true;
    return false;
}

int MPI_Finalize(void)
{
    ensure_init();
    MPI_Finalize_fn real = REAL(MPI_Finalize);
    if (!real)
        real = PMPI_Finalize;
    int initialized = 0, finalized = 0, rank = 0, ranks = 1;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (finished || !initialized || finalized)
        return real();
    finished = true;

    /* sum the outcome over the ranks: a setting is unused only if no rank used it */
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
    struct totals local, global;
    local_totals(&local);
    PMPI_Reduce(&local, &global, (int)(sizeof local / sizeof(uint64_t)), MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    char program[PATH_MAX];
    program_path(program, sizeof program);
    if (rank == 0) {
        const char *linked = hdf5_linked(global.hdf5_calls);
        exit_warnings(&global, linked, program, true);
    }

    int status = real();
    /* after the real MPI_Finalize: HDF5 closes files left open there */
    if (report_prefix[0])
        write_report(rank, ranks, true, hdf5_linked(load(&hdf5_calls)), program);
    return status;
}

/* A process that did not finalize MPI (a program without MPI, or one that
 * exited early): warnings and report from this process alone. */
__attribute__((destructor)) static void unloading(void)
{
    if (finished || !took_part())
        return;
    finished = true;
    ensure_init();
    if (!anything_requested() && !report_prefix[0])
        return;
    struct totals local;
    local_totals(&local);
    char program[PATH_MAX];
    program_path(program, sizeof program);
    const char *linked = hdf5_linked(local.hdf5_calls);
    int rank = world_rank();
    exit_warnings(&local, linked, program, rank == 0);
    if (report_prefix[0]) {
        int initialized = 0, finalized = 0, ranks = 1;
        PMPI_Initialized(&initialized);
        PMPI_Finalized(&finalized);
        if (initialized && !finalized)
            PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
        else if (getenv("PMI_SIZE"))
            ranks = atoi(getenv("PMI_SIZE"));
        write_report(rank, ranks, false, linked, program);
    }
}

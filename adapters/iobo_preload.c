/*
 * libiobo_preload.so: apply an iobo configuration to an unmodified program.
 *
 * Loaded with LD_PRELOAD (as H5Tuner's preloaded library, SC13), it reads the
 * IOBO_* variables of iobo.config.IOConfig.env() once, each a JSON scalar
 * (integer, true/false, "string", null), and interposes:
 *
 *   H5Fcreate, H5Fopen  file access settings on a copy of the program's fapl:
 *                       alignment, meta block, sieve buffer, metadata cache
 *                       initial size, collective metadata (MPI-IO driver only)
 *   H5Dcreate2,         chunked layout of about IOBO_CHUNK_SIZE bytes for a
 *   H5Dcreate_anon      dataset the program made contiguous (on a copy)
 *   H5Dwrite            collective MPI-IO transfer for files on the MPI-IO driver
 *   MPI_File_open       MPI-IO / Lustre hints added to a duplicate of the
 *                       program's MPI_Info (iobo's value wins over the program's)
 *
 * A variable that is not set (or is null) leaves the program's own setting.
 * A malformed variable is ignored with one warning naming it, its value and
 * what is allowed; the program is never stopped by the shim.
 * IOBO_PRELOAD_VERBOSE=1 logs, on stderr, what was applied to each file.
 *
 * Built against Debian's MPICH and parallel HDF5 1.10.8 (see the Makefile);
 * the program must use those same libraries. Sizes are in bytes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    char text[256];         /* CHOICE, TEXT; SIZE hints as decimal text */
};

enum {
    ALIGN_THRESHOLD, ALIGN_INTERVAL, META_BLOCK, SIEVE_BUF, MDC_INITIAL, COLL_METADATA,
    LAYOUT, CHUNK_SIZE, TRANSFER_MODE,
    CB_BUFFER_SIZE, CB_NODES, ROMIO_CB_WRITE, ROMIO_DS_WRITE, CB_CONFIG_LIST, STRIPING_FACTOR, STRIPING_UNIT,
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
    [CB_CONFIG_LIST] = {.env = "IOBO_CB_CONFIG_LIST", .kind = TEXT, .hint = "cb_config_list"},
    [STRIPING_FACTOR] = COUNT("IOBO_STRIPING_FACTOR", 1, INT_MAX, "striping_factor"),
    [STRIPING_UNIT] = BYTES("IOBO_STRIPING_UNIT", 1, INT_MAX, "striping_unit"),
};

static bool verbose;

/* ------------------------------------------------------------------------ */
/* the wrapped functions, resolved with RTLD_NEXT                            */

typedef hid_t (*fcreate_fn)(const char *, unsigned, hid_t, hid_t);
typedef hid_t (*fopen_fn)(const char *, unsigned, hid_t);
typedef hid_t (*dcreate2_fn)(hid_t, const char *, hid_t, hid_t, hid_t, hid_t, hid_t);
typedef hid_t (*dcreate_anon_fn)(hid_t, hid_t, hid_t, hid_t, hid_t);
typedef herr_t (*dwrite_fn)(hid_t, hid_t, hid_t, hid_t, hid_t, const void *);
typedef int (*file_open_fn)(MPI_Comm, const char *, int, MPI_Info, MPI_File *);

static fcreate_fn real_H5Fcreate;
static fopen_fn real_H5Fopen;
static dcreate2_fn real_H5Dcreate2;
static dcreate_anon_fn real_H5Dcreate_anon;
static dwrite_fn real_H5Dwrite;
static file_open_fn real_MPI_File_open;

/* ------------------------------------------------------------------------ */
/* output                                                                    */

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
    fprintf(stderr, TAG ": %s\n", line); /* one call: lines of ranks do not interleave */
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
    if (s->kind == SIZE && s->hint)
        snprintf(s->text, sizeof s->text, "%" PRIu64, s->number);
}

static void *next_symbol(const char *name)
{
    void *symbol = dlsym(RTLD_NEXT, name);
    if (!symbol)
        say("warning: cannot find the real %s (%s); calls to it will fail", name, dlerror());
    return symbol;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void)
{
    real_H5Fcreate = (fcreate_fn)next_symbol("H5Fcreate");
    real_H5Fopen = (fopen_fn)next_symbol("H5Fopen");
    real_H5Dcreate2 = (dcreate2_fn)next_symbol("H5Dcreate2");
    real_H5Dcreate_anon = (dcreate_anon_fn)next_symbol("H5Dcreate_anon");
    real_H5Dwrite = (dwrite_fn)next_symbol("H5Dwrite");
    /* the next MPI_File_open in the chain (another PMPI tool, else MPICH's own) */
    real_MPI_File_open = (file_open_fn)dlsym(RTLD_NEXT, "MPI_File_open");
    if (!real_MPI_File_open)
        real_MPI_File_open = PMPI_File_open;

    const char *flag = getenv("IOBO_PRELOAD_VERBOSE");
    if (flag && (!strcmp(flag, "1") || !strcmp(flag, "true")))
        verbose = true;
    else if (flag && *flag && strcmp(flag, "0") && strcmp(flag, "false") && world_rank_zero())
        say("warning: ignoring IOBO_PRELOAD_VERBOSE='%s'; allowed: 1 or true (log), 0 or false (quiet)", flag);

    for (int i = 0; i < N_SETTINGS; i++)
        parse_setting(&settings[i]);
}

static void ensure_init(void)
{
    pthread_once(&init_once, init);
}

static bool is_set(int which)
{
    return settings[which].set;
}

static bool choice_is(int which, const char *value)
{
    return settings[which].set && strcmp(settings[which].text, value) == 0;
}

/* ------------------------------------------------------------------------ */
/* files opened through the shim: driver and the rank that logs for them     */

struct file_entry {
    hid_t id;
    bool mpio;
    bool logs;          /* this process logs for the file (rank 0 of its communicator) */
    bool transfer_said; /* the collective transfer line was logged */
};

static struct file_entry *files;
static size_t n_files, files_capacity;
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember_file(hid_t id, bool mpio, bool logs)
{
    pthread_mutex_lock(&files_lock);
    for (size_t i = 0; i < n_files; i++) {
        if (files[i].id == id) { /* the same id again (HDF5 ids are not reused) */
            files[i].mpio = mpio;
            files[i].logs = logs;
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
    files[n_files++] = (struct file_entry){id, mpio, logs, false};
    pthread_mutex_unlock(&files_lock);
}

/* The entry of the file holding object `object` (copied out), or false when
 * the file was not opened through the shim. */
static bool file_of(hid_t object, struct file_entry *out, bool mark_transfer_said)
{
    hid_t file = H5I_INVALID_HID;
    H5E_BEGIN_TRY { file = H5Iget_file_id(object); } H5E_END_TRY;
    if (file < 0)
        return false;
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
/* H5Fcreate / H5Fopen                                                       */

static bool any_fapl_setting(void)
{
    return is_set(ALIGN_THRESHOLD) || is_set(ALIGN_INTERVAL) || is_set(META_BLOCK) || is_set(SIEVE_BUF) ||
           is_set(MDC_INITIAL) || is_set(COLL_METADATA);
}

static void refused(const char *what, const struct setting *s)
{
    if (s)
        say("warning: HDF5 refused %s from %s=%" PRIu64 "; left the program's setting", what, s->env, s->number);
    else
        say("warning: HDF5 refused %s; left the program's setting", what);
}

/* A copy of `fapl` (a new list for H5P_DEFAULT) with the IOBO_* file access
 * settings, or `fapl` itself when there is nothing to set or copying fails. */
static hid_t tuned_fapl(hid_t fapl, bool *copied, struct note *applied)
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
                    note_add(applied, "alignment_threshold=%llu alignment_interval=%llu",
                             (unsigned long long)threshold, (unsigned long long)interval);
                else
                    refused("the alignment", NULL);
            }
        }
        if (is_set(META_BLOCK)) {
            if (H5Pset_meta_block_size(copy, settings[META_BLOCK].number) >= 0)
                note_add(applied, "meta_block_size=%" PRIu64, settings[META_BLOCK].number);
            else
                refused("the meta block size", &settings[META_BLOCK]);
        }
        if (is_set(SIEVE_BUF)) {
            if (H5Pset_sieve_buf_size(copy, (size_t)settings[SIEVE_BUF].number) >= 0)
                note_add(applied, "sieve_buf_size=%" PRIu64, settings[SIEVE_BUF].number);
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
                note_add(applied, "mdc_initial_size=%zu", size);
            else
                refused("the metadata cache initial size", &settings[MDC_INITIAL]);
        }
        if (is_set(COLL_METADATA)) {
            hbool_t on = settings[COLL_METADATA].number != 0;
            if (!uses_mpio(copy))
                note_add(applied, "coll_metadata=skipped(not the MPI-IO driver)");
            else if (H5Pset_all_coll_metadata_ops(copy, on) >= 0 && H5Pset_coll_metadata_write(copy, on) >= 0)
                note_add(applied, "coll_metadata=%s", on ? "true" : "false");
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

static void after_file_open(const char *call, const char *name, hid_t file, hid_t fapl, const struct note *applied)
{
    if (file < 0)
        return;
    bool mpio = uses_mpio(fapl);
    bool logs = verbose ? logs_for(fapl, mpio) : false;
    remember_file(file, mpio, logs);
    if (verbose && logs)
        say("%s %s (%s driver): %s", call, name ? name : "?", mpio ? "MPI-IO" : "non-MPI",
            applied->used ? applied->text : "nothing to apply");
}

hid_t H5Fcreate(const char *name, unsigned flags, hid_t fcpl_id, hid_t fapl_id)
{
    ensure_init();
    if (!real_H5Fcreate)
        return H5I_INVALID_HID;
    struct note applied = {.used = 0, .text = ""};
    bool copied;
    hid_t fapl = tuned_fapl(fapl_id, &copied, &applied);
    hid_t file = real_H5Fcreate(name, flags, fcpl_id, fapl);
    after_file_open("H5Fcreate", name, file, fapl, &applied);
    if (copied)
        close_plist(fapl);
    return file;
}

hid_t H5Fopen(const char *name, unsigned flags, hid_t fapl_id)
{
    ensure_init();
    if (!real_H5Fopen)
        return H5I_INVALID_HID;
    struct note applied = {.used = 0, .text = ""};
    bool copied;
    hid_t fapl = tuned_fapl(fapl_id, &copied, &applied);
    hid_t file = real_H5Fopen(name, flags, fapl);
    after_file_open("H5Fopen", name, file, fapl, &applied);
    if (copied)
        close_plist(fapl);
    return file;
}

/* ------------------------------------------------------------------------ */
/* H5Dcreate2: chunked layout                                                */

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

/* A copy of `dcpl_id` (a new list for the default) set to chunks of about
 * IOBO_CHUNK_SIZE bytes, or H5I_INVALID_HID with `*skip` saying why not. */
static hid_t chunked_dcpl(hid_t type_id, hid_t space_id, hid_t dcpl_id, int *rank, hsize_t *chunk, const char **skip)
{
    hid_t dcpl = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK], maxdims[H5S_MAX_RANK];
    *skip = NULL;
    *rank = -1;
    H5E_BEGIN_TRY {
        if (H5Sget_simple_extent_type(space_id) != H5S_SIMPLE)
            *skip = "scalar or null dataspace";
        else if ((*rank = H5Sget_simple_extent_ndims(space_id)) < 1 ||
                 H5Sget_simple_extent_dims(space_id, dims, maxdims) < 0)
            *skip = "unreadable dataspace";
        for (int axis = 0; !*skip && axis < *rank; axis++) {
            if (dims[axis] == 0)
                *skip = "a zero dimension";
            else if (maxdims[axis] == H5S_UNLIMITED)
                *skip = "an unlimited dimension";
        }
        size_t itemsize = *skip ? 0 : H5Tget_size(type_id);
        if (!*skip && itemsize == 0)
            *skip = "unknown element size";
        if (!*skip) {
            bool program_default = dcpl_id == H5P_DEFAULT || dcpl_id == H5P_DATASET_CREATE_DEFAULT;
            if (!program_default && H5Pget_layout(dcpl_id) != H5D_CONTIGUOUS)
                *skip = "the program chose a non-contiguous layout";
            else if (!program_default && H5Pget_external_count(dcpl_id) > 0)
                *skip = "external storage";
            else if ((dcpl = program_default ? H5Pcreate(H5P_DATASET_CREATE) : H5Pcopy(dcpl_id)) < 0)
                *skip = "cannot copy the creation property list";
            else {
                uint64_t bytes = is_set(CHUNK_SIZE) ? settings[CHUNK_SIZE].number : DEFAULT_CHUNK_BYTES;
                chunk_shape(bytes, itemsize, *rank, dims, chunk);
                if (H5Pset_chunk(dcpl, *rank, chunk) < 0) {
                    *skip = "H5Pset_chunk refused the chunk shape";
                    H5Pclose(dcpl);
                    dcpl = H5I_INVALID_HID;
                }
            }
        }
    } H5E_END_TRY;
    return dcpl;
}

static void log_layout(hid_t loc_id, hid_t dataset, const char *name, hid_t dcpl, int rank, const hsize_t *chunk,
                       const char *skip)
{
    if (!verbose || dataset < 0)
        return;
    struct file_entry entry;
    if (!(file_of(loc_id, &entry, false) ? entry.logs : world_rank_zero()))
        return;
    if (dcpl >= 0) {
        struct note shape = {.used = 0, .text = ""};
        for (int axis = 0; axis < rank; axis++)
            note_add(&shape, "%llu", (unsigned long long)chunk[axis]);
        say("%s: layout=chunked chunk_shape=[%s]", name, shape.text);
    } else if (skip)
        say("%s: layout left as the program set it (%s)", name, skip);
}

hid_t H5Dcreate2(hid_t loc_id, const char *name, hid_t type_id, hid_t space_id, hid_t lcpl_id, hid_t dcpl_id,
                 hid_t dapl_id)
{
    ensure_init();
    if (!real_H5Dcreate2)
        return H5I_INVALID_HID;
    if (!choice_is(LAYOUT, "chunked"))
        return real_H5Dcreate2(loc_id, name, type_id, space_id, lcpl_id, dcpl_id, dapl_id);
    int rank;
    hsize_t chunk[H5S_MAX_RANK];
    const char *skip;
    hid_t dcpl = chunked_dcpl(type_id, space_id, dcpl_id, &rank, chunk, &skip);
    hid_t dataset = real_H5Dcreate2(loc_id, name, type_id, space_id, lcpl_id, dcpl >= 0 ? dcpl : dcpl_id, dapl_id);
    char what[512];
    snprintf(what, sizeof what, "H5Dcreate2 %s", name ? name : "?");
    log_layout(loc_id, dataset, what, dcpl, rank, chunk, skip);
    if (dcpl >= 0)
        close_plist(dcpl);
    return dataset;
}

/* h5py's `group[name] = array` creates an anonymous dataset, then links it. */
hid_t H5Dcreate_anon(hid_t loc_id, hid_t type_id, hid_t space_id, hid_t dcpl_id, hid_t dapl_id)
{
    ensure_init();
    if (!real_H5Dcreate_anon)
        return H5I_INVALID_HID;
    if (!choice_is(LAYOUT, "chunked"))
        return real_H5Dcreate_anon(loc_id, type_id, space_id, dcpl_id, dapl_id);
    int rank;
    hsize_t chunk[H5S_MAX_RANK];
    const char *skip;
    hid_t dcpl = chunked_dcpl(type_id, space_id, dcpl_id, &rank, chunk, &skip);
    hid_t dataset = real_H5Dcreate_anon(loc_id, type_id, space_id, dcpl >= 0 ? dcpl : dcpl_id, dapl_id);
    log_layout(loc_id, dataset, "H5Dcreate_anon (anonymous dataset)", dcpl, rank, chunk, skip);
    if (dcpl >= 0)
        close_plist(dcpl);
    return dataset;
}

/* ------------------------------------------------------------------------ */
/* H5Dwrite: collective transfer                                             */

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
    if (!real_H5Dwrite)
        return -1;
    struct file_entry entry;
    if (!choice_is(TRANSFER_MODE, "collective") || !file_of(dset_id, &entry, true) || !entry.mpio)
        return real_H5Dwrite(dset_id, mem_type_id, mem_space_id, file_space_id, plist_id, buf);

    hid_t dxpl = plist_id;
    bool created = false, restore = false;
    H5FD_mpio_xfer_t previous = H5FD_MPIO_INDEPENDENT;
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

    if (verbose && entry.logs && !entry.transfer_said) {
        char name[1024] = "?";
        H5E_BEGIN_TRY { H5Fget_name(dset_id, name, sizeof name); } H5E_END_TRY;
        say("H5Dwrite %s: transfer_mode=%s", name,
            (created || restore || previous == H5FD_MPIO_COLLECTIVE) ? "collective" : "left as the program set it");
    }
    herr_t status = real_H5Dwrite(dset_id, mem_type_id, mem_space_id, file_space_id, dxpl, buf);
    if (created)
        close_plist(dxpl);
    if (restore) {
        H5E_BEGIN_TRY { H5Pset_dxpl_mpio(plist_id, previous); } H5E_END_TRY;
    }
    return status;
}

/* ------------------------------------------------------------------------ */
/* MPI_File_open: MPI-IO and Lustre hints                                    */

/*
 * iobo's hints win over the program's: a key the program also set is
 * replaced (the verbose line names the program's value). ROMIO itself ranks
 * the program's MPI_Info above the ROMIO_HINTS file, so with the shim the
 * tuned value holds even for a program that passes its own hints.
 */
int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    ensure_init();
    bool any = false;
    for (int i = 0; i < N_SETTINGS; i++)
        any = any || (settings[i].hint && settings[i].set);
    if (!any)
        return real_MPI_File_open(comm, filename, amode, info, fh);

    MPI_Info tuned = MPI_INFO_NULL;
    int status = info == MPI_INFO_NULL ? PMPI_Info_create(&tuned) : PMPI_Info_dup(info, &tuned);
    if (status != MPI_SUCCESS) {
        if (world_rank_zero())
            say("warning: cannot create an MPI_Info for %s; hints not applied", filename ? filename : "?");
        return real_MPI_File_open(comm, filename, amode, info, fh);
    }
    struct note applied = {.used = 0, .text = ""}, replaced = {.used = 0, .text = ""};
    for (int i = 0; i < N_SETTINGS; i++) {
        const struct setting *s = &settings[i];
        if (!s->hint || !s->set)
            continue;
        if (info != MPI_INFO_NULL) {
            char old[MPI_MAX_INFO_VAL + 1];
            int flag = 0;
            if (PMPI_Info_get(info, s->hint, MPI_MAX_INFO_VAL, old, &flag) == MPI_SUCCESS && flag &&
                strcmp(old, s->text) != 0)
                note_add(&replaced, "%s=%s", s->hint, old);
        }
        if (PMPI_Info_set(tuned, s->hint, s->text) == MPI_SUCCESS)
            note_add(&applied, "%s=%s", s->hint, s->text);
        else if (world_rank_zero())
            say("warning: MPI_Info_set refused %s=%s (from %s)", s->hint, s->text, s->env);
    }
    if (verbose) {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        if (rank == 0)
            say("MPI_File_open %s: hints %s%s%s%s", filename ? filename : "?", applied.text,
                replaced.used ? " (replaced the program's " : "", replaced.text, replaced.used ? ")" : "");
    }
    status = real_MPI_File_open(comm, filename, amode, tuned, fh);
    PMPI_Info_free(&tuned);
    return status;
}

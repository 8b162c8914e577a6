/*
 * libiobo_preload.so, the parts every level shares (overview in common.h):
 * the settings and their parsing, output, the accounting state, the outcome
 * of each setting, file records, how the program has HDF5, and at exit the
 * warnings, the JSON report, MPI_Finalize, MPI_Abort and the destructor.
 */
#include "common.h"

/* H5C__MIN_MAX_CACHE_SIZE and H5C__MAX_MAX_CACHE_SIZE (private in HDF5 1.10) */
#define MDC_MIN_BYTES ((uint64_t)1024)
#define MDC_MAX_BYTES ((uint64_t)128 * 1024 * 1024)
/* HDF5 1.10: a chunk holds fewer than 2^32 elements and 4 GiB */
#define CHUNK_MAX_BYTES ((uint64_t)UINT32_MAX)

/* ------------------------------------------------------------------------ */
/* settings                                                                  */

#define BYTES(name, lo, hi, key) {.env = name, .kind = SIZE, .min = lo, .max = hi, .unit = " (bytes)", .hint = key}
#define COUNT(name, lo, hi, key) {.env = name, .kind = SIZE, .min = lo, .max = hi, .unit = "", .hint = key}
#define ROMIO_SWITCH(name, key) \
    {.env = name, .kind = CHOICE, .choices = {"automatic", "enable", "disable"}, .hint = key}

struct setting settings[N_SETTINGS] = {
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

bool verbose;
static char report_prefix[PATH_MAX]; /* IOBO_PRELOAD_REPORT, "" when not set */

/* ------------------------------------------------------------------------ */
/* output                                                                    */

__thread bool quiet __attribute__((tls_model("initial-exec")));

/* This process's rank in MPI_COMM_WORLD; without MPI (not yet, or never
 * initialized) the rank the process manager gave it (PMI_RANK), else 0. */
int world_rank(void)
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

int world_size(void)
{
    int initialized = 0, finalized = 0, size = 1;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (initialized && !finalized)
        PMPI_Comm_size(MPI_COMM_WORLD, &size);
    else if (getenv("PMI_SIZE"))
        size = atoi(getenv("PMI_SIZE"));
    return size;
}

bool world_rank_zero(void)
{
    int initialized = 0, finalized = 0, rank = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (!initialized || finalized)
        return true;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank == 0;
}

void say(const char *format, ...)
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

void note_add(struct note *n, const char *format, ...)
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
uint64_t start_ns; /* when the shim was loaded */

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

void ensure_init(void)
{
    pthread_once(&init_once, init);
}

__attribute__((constructor)) static void loaded(void)
{
    start_ns = now_ns();
}

static bool is_hdf5_setting(int which)
{
    return settings[which].hint == NULL;
}

void setting_name(int which, char *out, size_t size)
{
    const char *env = settings[which].env + strlen("IOBO_");
    size_t i = 0;
    for (; env[i] && i + 1 < size; i++)
        out[i] = (char)(env[i] >= 'A' && env[i] <= 'Z' ? env[i] - 'A' + 'a' : env[i]);
    out[i] = '\0';
}

/* ------------------------------------------------------------------------ */
/* accounting: calls, bytes, seconds and access sizes per level              */

static const char *const level_names[N_LEVELS] = {"hdf5", "mpiio", "posix"};
const char *const direction_names[N_DIRECTIONS] = {"write", "read"};

struct level_counters counters[N_LEVELS];
uint64_t hdf5_calls;

static const char *const phase_names[N_PHASE_PARTS] = {"hdf5", "mpiio", "posix", "posix_outputs"};
uint64_t phase_ns[N_PHASE_PARTS];
__thread unsigned phase_depth __attribute__((tls_model("initial-exec")));

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

void note_skipped(int which, const char *in_effect, const char *reason, const char *where)
{
    add(&settings[which].considered, 1);
    record_mismatch(which, in_effect, reason, where);
}

void note_acted(int which)
{
    add(&settings[which].considered, 1);
    add(&settings[which].acted, 1);
}

void note_effect(int which, const char *in_effect, const char *reason, const char *where)
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

#define MAX_RECORDS 256
struct file_record *records;
static size_t n_records, records_capacity;
static uint64_t records_dropped; /* files beyond MAX_RECORDS: counted, not listed */
pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;

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
void absolute_path(const char *name, char *out, size_t size)
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

long record_for(enum level level, const char *name)
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

void record_close(long index)
{
    if (index < 0)
        return;
    pthread_mutex_lock(&records_lock);
    records[index].last_close_ns = now_ns();
    pthread_mutex_unlock(&records_lock);
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

void program_path(char *out, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    out[n > 0 ? (size_t)n : 0] = '\0';
    if (n <= 0)
        snprintf(out, size, "%s", program_invocation_name);
}

/* "dynamic" when HDF5 calls were intercepted (or a loaded library needs a
 * shared libhdf5), "static" when the executable contains HDF5, else "none". */
const char *hdf5_linked(uint64_t calls)
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

void j_raw(struct json *j, const char *text, size_t length)
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

void j_printf(struct json *j, const char *format, ...)
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
void j_key(struct json *j, const char *key)
{
    if (j->comma)
        j_raw(j, ",", 1);
    if (key) {
        j_quoted(j, key);
        j_raw(j, ":", 1);
    }
    j->comma = true;
}

void j_open(struct json *j, const char *key, const char *bracket)
{
    j_key(j, key);
    j_raw(j, bracket, 1);
    j->comma = false;
}

void j_close(struct json *j, const char *bracket)
{
    j_raw(j, bracket, 1);
    j->comma = true;
}

void j_string(struct json *j, const char *key, const char *value)
{
    j_key(j, key);
    j_quoted(j, value);
}

void j_u64(struct json *j, const char *key, uint64_t value)
{
    j_key(j, key);
    j_printf(j, "%" PRIu64, value);
}

void j_i64(struct json *j, const char *key, int64_t value)
{
    j_key(j, key);
    j_printf(j, "%" PRId64, value);
}

void j_seconds(struct json *j, const char *key, uint64_t nanoseconds)
{
    j_key(j, key);
    j_printf(j, "%.9f", (double)nanoseconds / 1e9);
}

void j_bool(struct json *j, const char *key, bool value)
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
            if (level == POSIX_LEVEL)
                j_u64(j, "requested", load(&t->requested));
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
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    j_string(&j, "host", host);
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
bool took_part(void)
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

typedef int (*MPI_Finalize_fn)(void);
static MPI_Finalize_fn real_MPI_Finalize;

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
    trace_finish(rank, ranks, hdf5_linked(load(&hdf5_calls)));
    if (report_prefix[0])
        write_report(rank, ranks, true, hdf5_linked(load(&hdf5_calls)), program);
    return status;
}

/* Before the real MPI_Abort, the shim waits until the launcher has read what
 * the program wrote to stdout and stderr (pipes to MPICH's proxy), then
 * ABORT_GRACE_US more, at most ABORT_WAIT_MAX_US in all (microseconds). Without
 * it, MPICH kills the job without always forwarding what was written just
 * before the abort: the line that says why the program failed (measured with
 * MPICH 4 on 2 ranks: lost in 4-8 of 100 runs of a program that prints one
 * line and aborts, 5-9 of 30 when it prints 2,000 lines first; 0 with the wait). */
#define ABORT_GRACE_US 20000
#define ABORT_WAIT_MAX_US 2000000
#define ABORT_POLL_US 1000

/* Bytes written to ``fd`` and not yet read by the other end when it is a pipe; 0 else. */
static int unread_in_pipe(int fd)
{
    struct stat st;
    int unread = 0;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) || ioctl(fd, FIONREAD, &unread) != 0)
        return 0;
    return unread;
}

typedef int (*MPI_Abort_fn)(MPI_Comm, int);
static MPI_Abort_fn real_MPI_Abort;

int MPI_Abort(MPI_Comm comm, int errorcode)
{
    MPI_Abort_fn real = REAL(MPI_Abort);
    if (!real)
        real = PMPI_Abort;
    fflush(stdout);
    fflush(stderr);
    long waited_us = 0;
    while (waited_us < ABORT_WAIT_MAX_US && (unread_in_pipe(STDOUT_FILENO) || unread_in_pipe(STDERR_FILENO))) {
        usleep(ABORT_POLL_US);
        waited_us += ABORT_POLL_US;
    }
    usleep(ABORT_GRACE_US);
    return real(comm, errorcode);
}

/* A process that did not finalize MPI (a program without MPI, or one that
 * exited early): warnings and report from this process alone. */
__attribute__((destructor)) static void unloading(void)
{
    if (finished || !took_part())
        return;
    finished = true;
    ensure_init();
    int ranks = world_size();
    trace_finish(world_rank(), ranks, hdf5_linked(load(&hdf5_calls)));
    if (!anything_requested() && !report_prefix[0])
        return;
    struct totals local;
    local_totals(&local);
    char program[PATH_MAX];
    program_path(program, sizeof program);
    const char *linked = hdf5_linked(local.hdf5_calls);
    int rank = world_rank();
    exit_warnings(&local, linked, program, rank == 0);
    if (report_prefix[0])
        write_report(rank, ranks, false, linked, program);
}

/*
 * The trace: with IOBO_PRELOAD_TRACE=/abs/prefix, every outermost I/O call of
 * the program (HDF5, MPI-IO, POSIX on counted files; the calls a library
 * makes inside another wrapped call are what that call does, not listed) is
 * one JSON line of prefix.<rank>.trace.jsonl, with what a replay needs
 * (adapters/README.md, "Recording a program's I/O"). `iobo record` reads it
 * (iobo.replay).
 *
 * Lines are kept in memory until the process takes part (initializes MPI,
 * calls HDF5, opens a file with MPI-IO), then written through a buffered
 * stream as the program runs; a process that never takes part (mpiexec, its
 * proxies, a job script's shell) writes nothing. The end line, at
 * MPI_Finalize or exit, completes the file.
 */
#include "common.h"

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static char trace_path[PATH_MAX]; /* "" when IOBO_PRELOAD_TRACE is not set */
static bool trace_set;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *trace_file;
static struct json pending; /* lines before the process took part */
static uint64_t events, dropped;
static bool closed;

#define MAX_UNWRAPPED 16
static char *unwrapped[MAX_UNWRAPPED];
static size_t n_unwrapped;

static void trace_init(void)
{
    const char *prefix = getenv("IOBO_PRELOAD_TRACE");
    if (!prefix || !*prefix)
        return;
    if (prefix[0] != '/' || strlen(prefix) + 48 > sizeof trace_path) {
        if (world_rank_zero())
            say("warning: ignoring IOBO_PRELOAD_TRACE='%s': an absolute path prefix of at most %zu characters is "
                "allowed", prefix, sizeof trace_path - 48);
        return;
    }
    snprintf(trace_path, sizeof trace_path, "%s", prefix);
    trace_set = true;
}

bool trace_active(void)
{
    pthread_once(&trace_once, trace_init);
    return trace_set;
}

struct json *trace_start(const char *op, uint64_t t0)
{
    if (!t0 || !trace_active() || closed)
        return NULL;
    struct json *j = calloc(1, sizeof *j);
    if (!j) {
        add(&dropped, 1);
        return NULL;
    }
    j_open(j, NULL, "{");
    j_string(j, "op", op);
    return j;
}

/* The command line, from /proc/self/cmdline, as a JSON array. */
static void command_line(struct json *j)
{
    j_open(j, "argv", "[");
    FILE *in = fopen("/proc/self/cmdline", "r");
    if (in) {
        char word[4096];
        size_t used = 0;
        int c;
        while ((c = fgetc(in)) != EOF) {
            if (c == '\0') {
                word[used] = '\0';
                j_string(j, NULL, word);
                used = 0;
            } else if (used + 1 < sizeof word)
                word[used++] = (char)c;
        }
        fclose(in);
    }
    j_close(j, "]");
}

/* Open the rank's file and write its header and the lines kept so far. Call with trace_lock held, quiet set. */
static void open_trace(void)
{
    int rank = world_rank(), ranks = world_size();
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s.%d.trace.jsonl", trace_path, rank);
    trace_file = fopen(path, "w");
    if (!trace_file) {
        say("warning: cannot write the trace %s: %s", path, strerror(errno));
        closed = true;
        return;
    }
    setvbuf(trace_file, NULL, _IOFBF, 1 << 20);
    struct json h = {.text = NULL, .used = 0, .capacity = 0, .comma = false};
    char program[PATH_MAX], cwd[PATH_MAX];
    program_path(program, sizeof program);
    j_open(&h, NULL, "{");
    j_string(&h, "format", "iobo-trace");
    j_u64(&h, "version", 1);
    j_u64(&h, "rank", (uint64_t)rank);
    j_u64(&h, "ranks", (uint64_t)ranks);
    j_string(&h, "program", program);
    command_line(&h);
    j_string(&h, "cwd", getcwd(cwd, sizeof cwd) ? cwd : "");
    j_string(&h, "hdf5_linked", hdf5_linked(load(&hdf5_calls)));
    j_close(&h, "}");
    j_raw(&h, "\n", 1);
    if (h.text)
        fwrite(h.text, 1, h.used, trace_file);
    free(h.text);
    if (pending.text)
        fwrite(pending.text, 1, pending.used, trace_file);
    free(pending.text);
    pending = (struct json){.text = NULL, .used = 0, .capacity = 0, .comma = false};
}

void trace_done(struct json *j, uint64_t t0, bool ok)
{
    trace_done_at(j, t0, now_ns(), ok);
}

void trace_done_at(struct json *j, uint64_t t0, uint64_t t1, bool ok)
{
    if (!j)
        return;
    j_seconds(j, "t0", t0 - start_ns);
    j_seconds(j, "t1", t1 - start_ns);
    j_bool(j, "ok", ok);
    j_close(j, "}");
    j_raw(j, "\n", 1);
    bool was = quiet;
    quiet = true; /* the trace's own writes are not the program's */
    pthread_mutex_lock(&trace_lock);
    if (!j->text || closed) {
        dropped++;
    } else {
        if (!trace_file && took_part())
            open_trace();
        if (trace_file)
            fwrite(j->text, 1, j->used, trace_file);
        else if (!closed)
            j_raw(&pending, j->text, j->used);
        events++;
    }
    pthread_mutex_unlock(&trace_lock);
    quiet = was;
    free(j->text);
    free(j);
}

void trace_unwrapped(const char *what)
{
    if (!trace_active())
        return;
    pthread_mutex_lock(&trace_lock);
    bool known = false;
    for (size_t i = 0; i < n_unwrapped && !known; i++)
        known = !strcmp(unwrapped[i], what);
    if (!known && n_unwrapped < MAX_UNWRAPPED)
        unwrapped[n_unwrapped++] = strdup(what);
    pthread_mutex_unlock(&trace_lock);
}

void trace_finish(int rank, int ranks, const char *linked)
{
    if (!trace_active())
        return;
    bool was = quiet;
    quiet = true;
    pthread_mutex_lock(&trace_lock);
    if (!trace_file && !closed && took_part())
        open_trace();
    if (trace_file) {
        struct json j = {.text = NULL, .used = 0, .capacity = 0, .comma = false};
        uint64_t now = now_ns() - start_ns;
        j_open(&j, NULL, "{");
        j_string(&j, "op", "end");
        j_seconds(&j, "t0", now);
        j_seconds(&j, "t1", now);
        j_u64(&j, "rank", (uint64_t)rank);
        j_u64(&j, "ranks", (uint64_t)ranks);
        j_string(&j, "hdf5_linked", linked);
        j_u64(&j, "events", events);
        j_u64(&j, "dropped", dropped);
        j_open(&j, "unwrapped", "[");
        for (size_t i = 0; i < n_unwrapped; i++)
            j_string(&j, NULL, unwrapped[i]);
        j_close(&j, "]");
        j_close(&j, "}");
        j_raw(&j, "\n", 1);
        if (j.text)
            fwrite(j.text, 1, j.used, trace_file);
        free(j.text);
        if (fclose(trace_file) != 0)
            say("warning: the trace of rank %d is incomplete: %s", rank, strerror(errno));
        trace_file = NULL;
    }
    closed = true; /* calls after the end line (HDF5 closing files at exit) are not listed */
    free(pending.text);
    pending = (struct json){.text = NULL, .used = 0, .capacity = 0, .comma = false};
    pthread_mutex_unlock(&trace_lock);
    quiet = was;
}

void j_dims(struct json *j, const char *key, int rank, const hsize_t *values, bool unlimited_as_minus_one)
{
    j_open(j, key, "[");
    for (int i = 0; i < rank; i++) {
        if (unlimited_as_minus_one && values[i] == H5S_UNLIMITED)
            j_i64(j, NULL, -1);
        else
            j_u64(j, NULL, (uint64_t)values[i]);
    }
    j_close(j, "]");
}

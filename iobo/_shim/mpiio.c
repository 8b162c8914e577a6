/*
 * libiobo_preload.so, the MPI-IO level (overview in common.h): iobo's hints
 * on MPI_File_open, MPI_File_set_view and MPI_File_set_info, the hints in
 * effect at open and close, and the MPI-IO reads and writes counted.
 */
#include "common.h"

typedef int (*MPI_File_open_fn)(MPI_Comm, const char *, int, MPI_Info, MPI_File *);
typedef int (*MPI_File_close_fn)(MPI_File *);
typedef int (*MPI_File_set_view_fn)(MPI_File, MPI_Offset, MPI_Datatype, MPI_Datatype, const char *, MPI_Info);
typedef int (*MPI_File_set_info_fn)(MPI_File, MPI_Info);

static MPI_File_open_fn real_MPI_File_open;
static MPI_File_close_fn real_MPI_File_close;
static MPI_File_set_view_fn real_MPI_File_set_view;
static MPI_File_set_info_fn real_MPI_File_set_info;

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

/* Why a requested hint reads back as `value` (NULL: not reported); `processes`:
 * how many opened the file (its communicator's size; 0 unknown). */
static void hint_reason(int which, const char *value, const char *hints, size_t size, int processes, char *out,
                        size_t out_size)
{
    if (!value && (which == STRIPING_FACTOR || which == STRIPING_UNIT))
        snprintf(out, out_size, "MPI_File_get_info does not report it: striping takes effect only on Lustre");
    else if (!value)
        snprintf(out, out_size, "MPI_File_get_info does not report it: the MPI-IO driver ignores it");
    else if (which == CB_NODES && processes > 0 && (uint64_t)processes < settings[CB_NODES].number &&
             strtoull(value, NULL, 10) == (uint64_t)processes)
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

/* The trace's name of an open file: the handle's value, stable while it is open. */
static uint64_t handle_id(MPI_File fh)
{
    return (uint64_t)(uintptr_t)fh;
}

static void trace_transfer(const char *op, uint64_t phase, MPI_File fh, int64_t offset, MPI_Count count,
                           MPI_Datatype datatype, bool collective, bool ok)
{
    struct json *j = trace_start(op, phase);
    if (!j)
        return;
    MPI_Count size = 0;
    PMPI_Type_size_x(datatype, &size);
    j_u64(j, "fh", handle_id(fh));
    if (offset >= 0)
        j_i64(j, "offset", offset);
    else {
        j_key(j, "offset");
        j_raw(j, "null", 4);
    }
    j_u64(j, "bytes", count > 0 && size > 0 ? (uint64_t)count * (uint64_t)size : 0);
    j_bool(j, "collective", collective);
    trace_done(j, phase, ok);
}

/* A call on an open file, with a size (set_size, preallocate) or none (-1). */
static void trace_handle(const char *op, uint64_t phase, MPI_File fh, int64_t size, bool ok)
{
    struct json *j = trace_start(op, phase);
    if (!j)
        return;
    j_u64(j, "fh", handle_id(fh));
    if (size >= 0)
        j_i64(j, "size", size);
    trace_done(j, phase, ok);
}

static void trace_open(uint64_t phase, MPI_File fh, const char *filename, int amode, int processes, MPI_Info info)
{
    struct json *j = trace_start("MPI_File_open", phase);
    if (!j)
        return;
    char path[NAME_CHARS] = "";
    if (filename)
        absolute_path(filename, path, sizeof path);
    j_u64(j, "fh", handle_id(fh));
    j_string(j, "name", filename ? filename : "");
    j_string(j, "path", path);
    j_i64(j, "amode", amode);
    j_i64(j, "procs", processes);
    j_open(j, "hints", "{");
    int nkeys = 0;
    if (info != MPI_INFO_NULL)
        PMPI_Info_get_nkeys(info, &nkeys);
    for (int k = 0; k < nkeys; k++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        if (PMPI_Info_get_nthkey(info, k, key) == MPI_SUCCESS &&
            PMPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &flag) == MPI_SUCCESS && flag)
            j_string(j, key, value);
    }
    j_close(j, "}");
    trace_done(j, phase, true);
}

#define TYPE_DEPTH 6   /* nested constructors described before "other" */
#define TYPE_ARGS 64   /* integers or addresses of one constructor described */

static void j_ints(struct json *j, const char *key, int n, const int *values)
{
    j_open(j, key, "[");
    for (int i = 0; i < n; i++)
        j_i64(j, NULL, values[i]);
    j_close(j, "]");
}

/* A datatype as the constructors that made it, so a replay can build the same
 * file view: {"combiner": "named", "size"}, "contiguous" {count}, "vector"
 * {count, blocklength, stride (in old types)}, "hvector" {... stride_bytes},
 * "subarray" {sizes, subsizes, starts, order: "c" | "fortran"}, "resized"
 * {lb, extent}, each with "old" (the type it is built of); "other" {size,
 * extent} for the rest (indexed, struct, darray, ...). */
static void trace_datatype(struct json *j, const char *key, MPI_Datatype type, int depth)
{
    int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
    MPI_Count size = 0, lb = 0, extent = 0;
    PMPI_Type_size_x(type, &size);
    PMPI_Type_get_extent_x(type, &lb, &extent);
    PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    j_open(j, key, "{");
    int ints[TYPE_ARGS];
    MPI_Aint addrs[TYPE_ARGS];
    MPI_Datatype types[1];
    bool fetched = combiner != MPI_COMBINER_NAMED && depth < TYPE_DEPTH && ni <= TYPE_ARGS && na <= TYPE_ARGS &&
                   nd == 1 && PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, types) == MPI_SUCCESS;
    bool decoded = fetched;
    if (combiner == MPI_COMBINER_NAMED) {
        j_string(j, "combiner", "named");
    } else if (decoded && combiner == MPI_COMBINER_CONTIGUOUS) {
        j_string(j, "combiner", "contiguous");
        j_i64(j, "count", ints[0]);
    } else if (decoded && combiner == MPI_COMBINER_VECTOR) {
        j_string(j, "combiner", "vector");
        j_i64(j, "count", ints[0]);
        j_i64(j, "blocklength", ints[1]);
        j_i64(j, "stride", ints[2]);
    } else if (decoded && combiner == MPI_COMBINER_HVECTOR) {
        j_string(j, "combiner", "hvector");
        j_i64(j, "count", ints[0]);
        j_i64(j, "blocklength", ints[1]);
        j_i64(j, "stride_bytes", (int64_t)addrs[0]);
    } else if (decoded && combiner == MPI_COMBINER_SUBARRAY && ni >= 2) {
        int n = ints[0];
        j_string(j, "combiner", "subarray");
        j_ints(j, "sizes", n, ints + 1);
        j_ints(j, "subsizes", n, ints + 1 + n);
        j_ints(j, "starts", n, ints + 1 + 2 * n);
        j_string(j, "order", ints[1 + 3 * n] == MPI_ORDER_FORTRAN ? "fortran" : "c");
    } else if (decoded && combiner == MPI_COMBINER_RESIZED) {
        j_string(j, "combiner", "resized");
        j_i64(j, "lb", (int64_t)addrs[0]);
        j_i64(j, "extent", (int64_t)addrs[1]);
    } else {
        j_string(j, "combiner", "other");
        decoded = false;
    }
    j_i64(j, "size", size);
    j_i64(j, "extent", extent);
    if (decoded)
        trace_datatype(j, "old", types[0], depth + 1);
    if (fetched) {  /* MPI_Type_get_contents returns derived types as new handles */
        int old_ni = 0, old_na = 0, old_nd = 0, old_combiner = MPI_COMBINER_NAMED;
        PMPI_Type_get_envelope(types[0], &old_ni, &old_na, &old_nd, &old_combiner);
        if (old_combiner != MPI_COMBINER_NAMED)
            PMPI_Type_free(&types[0]);
    }
    j_close(j, "}");
}

static void trace_view(uint64_t phase, MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, bool ok)
{
    struct json *j = trace_start("MPI_File_set_view", phase);
    if (!j)
        return;
    MPI_Count etype_size = 0, filetype_size = 0, lb = 0, extent = 0;
    PMPI_Type_size_x(etype, &etype_size);
    PMPI_Type_size_x(filetype, &filetype_size);
    PMPI_Type_get_extent_x(filetype, &lb, &extent);
    j_u64(j, "fh", handle_id(fh));
    j_i64(j, "disp", disp);
    j_i64(j, "etype_size", etype_size);
    j_i64(j, "filetype_size", filetype_size);
    j_i64(j, "filetype_extent", extent);
    j_bool(j, "contiguous", filetype_size == extent);
    trace_datatype(j, "filetype", filetype, 0);
    trace_done(j, phase, ok);
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
    trace_open(phase, *fh, filename, amode, processes, info);

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
        trace_view(phase, fh, disp, etype, filetype, status == MPI_SUCCESS);
        return status;
    }
    bool duplicated = false, acted[N_SETTINGS] = {false};
    struct note replaced = {.used = 0, .text = ""};
    MPI_Info tuned = tuned_info(info, false, &duplicated, &replaced, acted);
    uint64_t phase = phase_enter();
    int status = real(fh, disp, etype, filetype, datarep, tuned);
    phase_leave(PHASE_MPIIO, phase);
    trace_view(phase, fh, disp, etype, filetype, status == MPI_SUCCESS);
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
    trace_handle("MPI_File_close", phase, handle, -1, status == MPI_SUCCESS);
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
#define MPIIO_WRAPPER(name, direction, collective, PARAMS, ARGS, OFFSET)           \
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
        if (phase)                                                                 \
            trace_transfer(#name, phase, fh, (int64_t)(OFFSET), (MPI_Count)count, datatype, collective, \
                           status == MPI_SUCCESS);                                 \
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
#define MPIIO_FAMILY(suffix, COUNT)                                                                                        \
    MPIIO_WRAPPER(MPI_File_write##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)          \
    MPIIO_WRAPPER(MPI_File_write_all##suffix, WRITE, true, PLAIN(const void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)       \
    MPIIO_WRAPPER(MPI_File_write_shared##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)   \
    MPIIO_WRAPPER(MPI_File_write_ordered##suffix, WRITE, true, PLAIN(const void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)   \
    MPIIO_WRAPPER(MPI_File_write_at##suffix, WRITE, false, AT(const void *, COUNT, MPI_Status *), AT_ARGS, offset)         \
    MPIIO_WRAPPER(MPI_File_write_at_all##suffix, WRITE, true, AT(const void *, COUNT, MPI_Status *), AT_ARGS, offset)      \
    MPIIO_WRAPPER(MPI_File_iwrite##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Request *), PLAIN_ARGS, -1)        \
    MPIIO_WRAPPER(MPI_File_iwrite_all##suffix, WRITE, true, PLAIN(const void *, COUNT, MPI_Request *), PLAIN_ARGS, -1)     \
    MPIIO_WRAPPER(MPI_File_iwrite_shared##suffix, WRITE, false, PLAIN(const void *, COUNT, MPI_Request *), PLAIN_ARGS, -1) \
    MPIIO_WRAPPER(MPI_File_iwrite_at##suffix, WRITE, false, AT(const void *, COUNT, MPI_Request *), AT_ARGS, offset)       \
    MPIIO_WRAPPER(MPI_File_iwrite_at_all##suffix, WRITE, true, AT(const void *, COUNT, MPI_Request *), AT_ARGS, offset)    \
    MPIIO_WRAPPER(MPI_File_write_all_begin##suffix, WRITE, true, BEGIN(const void *, COUNT), BEGIN_ARGS, -1)               \
    MPIIO_WRAPPER(MPI_File_write_ordered_begin##suffix, WRITE, true, BEGIN(const void *, COUNT), BEGIN_ARGS, -1)           \
    MPIIO_WRAPPER(MPI_File_write_at_all_begin##suffix, WRITE, true, AT_BEGIN(const void *, COUNT), AT_BEGIN_ARGS, offset)  \
    MPIIO_WRAPPER(MPI_File_read##suffix, READ, false, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)                  \
    MPIIO_WRAPPER(MPI_File_read_all##suffix, READ, true, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)               \
    MPIIO_WRAPPER(MPI_File_read_shared##suffix, READ, false, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)           \
    MPIIO_WRAPPER(MPI_File_read_ordered##suffix, READ, true, PLAIN(void *, COUNT, MPI_Status *), PLAIN_ARGS, -1)           \
    MPIIO_WRAPPER(MPI_File_read_at##suffix, READ, false, AT(void *, COUNT, MPI_Status *), AT_ARGS, offset)                 \
    MPIIO_WRAPPER(MPI_File_read_at_all##suffix, READ, true, AT(void *, COUNT, MPI_Status *), AT_ARGS, offset)              \
    MPIIO_WRAPPER(MPI_File_iread##suffix, READ, false, PLAIN(void *, COUNT, MPI_Request *), PLAIN_ARGS, -1)                \
    MPIIO_WRAPPER(MPI_File_iread_all##suffix, READ, true, PLAIN(void *, COUNT, MPI_Request *), PLAIN_ARGS, -1)             \
    MPIIO_WRAPPER(MPI_File_iread_shared##suffix, READ, false, PLAIN(void *, COUNT, MPI_Request *), PLAIN_ARGS, -1)         \
    MPIIO_WRAPPER(MPI_File_iread_at##suffix, READ, false, AT(void *, COUNT, MPI_Request *), AT_ARGS, offset)               \
    MPIIO_WRAPPER(MPI_File_iread_at_all##suffix, READ, true, AT(void *, COUNT, MPI_Request *), AT_ARGS, offset)            \
    MPIIO_WRAPPER(MPI_File_read_all_begin##suffix, READ, true, BEGIN(void *, COUNT), BEGIN_ARGS, -1)                       \
    MPIIO_WRAPPER(MPI_File_read_ordered_begin##suffix, READ, true, BEGIN(void *, COUNT), BEGIN_ARGS, -1)                   \
    MPIIO_WRAPPER(MPI_File_read_at_all_begin##suffix, READ, true, AT_BEGIN(void *, COUNT), AT_BEGIN_ARGS, offset)

MPIIO_FAMILY(, int)
MPIIO_FAMILY(_c, MPI_Count)

/* MPI-IO calls that move no data of the program's and count in the I/O phases only. */
#define MPIIO_PHASE_WRAPPER(name, PARAMS, ARGS, SIZE)             \
    typedef int(*name##_fn) PARAMS;                                \
    static name##_fn real_##name;                                  \
    int name PARAMS                                                \
    {                                                              \
        name##_fn real = REAL(name);                               \
        if (!real)                                                 \
            return MPI_ERR_INTERN;                                 \
        uint64_t phase = phase_enter();                            \
        int status = real ARGS;                                    \
        phase_leave(PHASE_MPIIO, phase);                           \
        trace_handle(#name, phase, fh, SIZE, status == MPI_SUCCESS); \
        return status;                                             \
    }

MPIIO_PHASE_WRAPPER(MPI_File_sync, (MPI_File fh), (fh), -1)
MPIIO_PHASE_WRAPPER(MPI_File_set_size, (MPI_File fh, MPI_Offset size), (fh, size), (int64_t)size)
MPIIO_PHASE_WRAPPER(MPI_File_preallocate, (MPI_File fh, MPI_Offset size), (fh, size), (int64_t)size)

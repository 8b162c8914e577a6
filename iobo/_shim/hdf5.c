/*
 * libiobo_preload.so, the HDF5 level (overview in common.h): file access
 * settings at H5Fcreate and H5Fopen, chunked layout at H5Dcreate2, H5Dcreate1
 * and H5Dcreate_anon, collective transfer at H5Dwrite, what took effect,
 * the HDF5 reads and writes counted, and the report's datasets and transfer
 * modes. Built against HDF5 1.14 or later, the same for its _async variants
 * and H5Dwrite_multi/H5Dread_multi (at the end).
 */
#include "common.h"

#define DEFAULT_CHUNK_BYTES ((uint64_t)1024 * 1024) /* iobo's chunk_size default */

typedef hid_t (*H5Fcreate_fn)(const char *, unsigned, hid_t, hid_t);
typedef hid_t (*H5Fopen_fn)(const char *, unsigned, hid_t);
typedef herr_t (*H5Fclose_fn)(hid_t);
typedef hid_t (*H5Dcreate2_fn)(hid_t, const char *, hid_t, hid_t, hid_t, hid_t, hid_t);
typedef hid_t (*H5Dcreate1_fn)(hid_t, const char *, hid_t, hid_t, hid_t);
typedef hid_t (*H5Dcreate_anon_fn)(hid_t, hid_t, hid_t, hid_t, hid_t);
typedef herr_t (*H5Dwrite_fn)(hid_t, hid_t, hid_t, hid_t, hid_t, const void *);
typedef herr_t (*H5Dread_fn)(hid_t, hid_t, hid_t, hid_t, hid_t, void *);

static H5Fcreate_fn real_H5Fcreate;
static H5Fopen_fn real_H5Fopen;
static H5Fclose_fn real_H5Fclose;
static H5Dcreate2_fn real_H5Dcreate2;
static H5Dcreate1_fn real_H5Dcreate1;
static H5Dcreate_anon_fn real_H5Dcreate_anon;
static H5Dwrite_fn real_H5Dwrite;
static H5Dread_fn real_H5Dread;

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


/* ------------------------------------------------------------------------ */
/* the trace: what a replay needs of each outermost HDF5 call                */

static const char *type_class_name(H5T_class_t c)
{
    switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_OPAQUE: return "opaque";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_BITFIELD: return "bitfield";
    case H5T_REFERENCE: return "reference";
    case H5T_VLEN: return "vlen";
    case H5T_TIME: return "time";
    default: return "unknown";
    }
}

static void trace_type(struct json *j, hid_t type)
{
    H5T_class_t c = H5T_NO_CLASS;
    size_t size = 0;
    H5T_sign_t sign = H5T_SGN_ERROR;
    H5E_BEGIN_TRY {
        c = H5Tget_class(type);
        size = H5Tget_size(type);
        if (c == H5T_INTEGER)
            sign = H5Tget_sign(type);
    } H5E_END_TRY;
    j_open(j, "type", "{");
    j_string(j, "class", type_class_name(c));
    j_u64(j, "size", size);
    if (c == H5T_INTEGER)
        j_bool(j, "signed", sign == H5T_SGN_2);
    j_close(j, "}");
}

/* "dims" and "maxdims" (-1: unlimited) of a simple dataspace. */
static void trace_extent(struct json *j, hid_t space)
{
    hsize_t dims[H5S_MAX_RANK], maxdims[H5S_MAX_RANK];
    int rank = -1;
    H5E_BEGIN_TRY { rank = H5Sget_simple_extent_dims(space, dims, maxdims); } H5E_END_TRY;
    if (rank < 0)
        rank = 0;
    j_dims(j, "dims", rank, dims, false);
    j_dims(j, "maxdims", rank, maxdims, true);
}

/* What the program's own creation list asks: layout, chunk, filters. */
static void trace_dcpl(struct json *j, hid_t dcpl)
{
    H5D_layout_t layout = H5D_CONTIGUOUS;
    hsize_t chunk[H5S_MAX_RANK];
    int chunk_rank = -1, nfilters = 0;
    H5E_BEGIN_TRY {
        if (dcpl != H5P_DEFAULT && dcpl != H5P_DATASET_CREATE_DEFAULT) {
            layout = H5Pget_layout(dcpl);
            if (layout == H5D_CHUNKED)
                chunk_rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
            nfilters = H5Pget_nfilters(dcpl);
        }
    } H5E_END_TRY;
    j_string(j, "layout", layout == H5D_CHUNKED ? "chunked" : layout == H5D_COMPACT ? "compact" : "contiguous");
    if (chunk_rank > 0)
        j_dims(j, "chunk", chunk_rank, chunk, false);
    else {
        j_key(j, "chunk");
        j_raw(j, "null", 4);
    }
    j_open(j, "filters", "[");
    for (int i = 0; i < nfilters; i++) {
        unsigned flags = 0, config = 0, values[8];
        size_t nvalues = 8;
        char filter_name[64] = "";
        H5Z_filter_t id = -1;
        H5E_BEGIN_TRY {
            id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nvalues, values, sizeof filter_name, filter_name, &config);
        } H5E_END_TRY;
        j_open(j, NULL, "{");
        j_i64(j, "id", id);
        j_string(j, "name", id == H5Z_FILTER_DEFLATE ? "deflate" : id == H5Z_FILTER_SHUFFLE ? "shuffle"
                          : id == H5Z_FILTER_FLETCHER32 ? "fletcher32" : id == H5Z_FILTER_SZIP ? "szip"
                          : id == H5Z_FILTER_NBIT ? "nbit" : id == H5Z_FILTER_SCALEOFFSET ? "scaleoffset"
                          : filter_name);
        j_open(j, "values", "[");
        for (size_t v = 0; v < nvalues && v < 8; v++)
            j_u64(j, NULL, values[v]);
        j_close(j, "]");
        j_close(j, "}");
    }
    j_close(j, "]");
}

static void trace_bounds(struct json *j, hid_t space)
{
    hsize_t lo[H5S_MAX_RANK], hi[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(space);
    j_open(j, "bbox", "[");
    if (rank > 0 && H5Sget_select_bounds(space, lo, hi) >= 0) {
        j_dims(j, NULL, rank, lo, false);
        j_dims(j, NULL, rank, hi, false);
    }
    j_close(j, "]");
}

/* A transfer's selection in a dataspace (the file's or the memory's): all, none, a regular hyperslab, blocks or
 * points. */
static void trace_selection(struct json *j, const char *key, hid_t file_space)
{
    j_open(j, key, "{");
    H5S_sel_type kind = H5S_SEL_ALL;
    if (file_space != H5S_ALL) {
        H5E_BEGIN_TRY { kind = H5Sget_select_type(file_space); } H5E_END_TRY;
    }
    H5E_BEGIN_TRY {
        if (kind == H5S_SEL_NONE)
            j_string(j, "kind", "none");
        else if (kind == H5S_SEL_POINTS) {
            j_string(j, "kind", "points");
            j_i64(j, "elements", H5Sget_select_npoints(file_space));
            trace_bounds(j, file_space);
        } else if (kind == H5S_SEL_HYPERSLABS) {
            hsize_t start[H5S_MAX_RANK], stride[H5S_MAX_RANK], count[H5S_MAX_RANK], block[H5S_MAX_RANK];
            int rank = H5Sget_simple_extent_ndims(file_space);
            if (H5Sis_regular_hyperslab(file_space) > 0 &&
                H5Sget_regular_hyperslab(file_space, start, stride, count, block) >= 0) {
                j_string(j, "kind", "hyperslab");
                j_dims(j, "start", rank, start, false);
                j_dims(j, "stride", rank, stride, false);
                j_dims(j, "count", rank, count, false);
                j_dims(j, "block", rank, block, false);
            } else {
                j_string(j, "kind", "blocks");
                j_i64(j, "n", H5Sget_select_hyper_nblocks(file_space));
                j_i64(j, "elements", H5Sget_select_npoints(file_space));
                trace_bounds(j, file_space);
            }
        } else
            j_string(j, "kind", "all");
    } H5E_END_TRY;
    j_close(j, "}");
}

/* The transfer mode the program's own list asks for (before the shim changes it): "default" for HDF5's default
 * list (independent, and reported by the shim as such: a replay passes the default list too). */
static const char *program_xfer(hid_t plist)
{
    H5FD_mpio_xfer_t mode = H5FD_MPIO_INDEPENDENT;
    if (plist == H5P_DEFAULT || plist == H5P_DATASET_XFER_DEFAULT)
        return "default";
    H5E_BEGIN_TRY { H5Pget_dxpl_mpio(plist, &mode); } H5E_END_TRY;
    return mode == H5FD_MPIO_COLLECTIVE ? "collective" : "independent";
}

/* An HDF5 object's name ("/g/d"), or null when it has none. */
static void trace_name(struct json *j, const char *key, hid_t object)
{
    char name[NAME_CHARS] = "";
    ssize_t n = -1;
    H5E_BEGIN_TRY { n = H5Iget_name(object, name, sizeof name); } H5E_END_TRY;
    if (n > 0)
        j_string(j, key, name);
    else {
        j_key(j, key);
        j_raw(j, "null", 4);
    }
}

/* A file open: its id, name, absolute path, flags, driver and how many processes share it. */
static void trace_file_open(const char *op, uint64_t phase, const char *name, unsigned flags, hid_t fapl, hid_t file)
{
    struct json *j = trace_start(op, phase);
    if (!j)
        return;
    char path[NAME_CHARS] = "";
    if (name)
        absolute_path(name, path, sizeof path);
    bool mpio = uses_mpio(fapl);
    int procs = 1;
    if (mpio) {
        MPI_Comm comm = MPI_COMM_NULL;
        MPI_Info info = MPI_INFO_NULL;
        herr_t got = -1;
        H5E_BEGIN_TRY { got = H5Pget_fapl_mpio(fapl, &comm, &info); } H5E_END_TRY;
        if (got >= 0 && comm != MPI_COMM_NULL) {
            PMPI_Comm_size(comm, &procs);
            PMPI_Comm_free(&comm);
        }
        if (got >= 0 && info != MPI_INFO_NULL)
            PMPI_Info_free(&info);
    }
    j_i64(j, "file", file);
    j_string(j, "name", name ? name : "");
    j_string(j, "path", path);
    j_u64(j, "flags", flags);
    j_bool(j, "mpio", mpio);
    j_u64(j, "procs", (uint64_t)procs);
    trace_done(j, phase, file >= 0);
}

/* A call on one object: {"<key>": id}. */
static void trace_handle(const char *op, uint64_t phase, const char *key, hid_t id, bool ok)
{
    struct json *j = trace_start(op, phase);
    if (!j)
        return;
    j_i64(j, key, id);
    trace_done(j, phase, ok);
}

static void trace_dataset_create(const char *api, uint64_t phase, hid_t loc_id, hid_t dataset, bool named,
                                 hid_t type_id, hid_t space_id, hid_t dcpl_id)
{
    struct json *j = trace_start("H5Dcreate", phase);
    if (!j)
        return;
    j_i64(j, "dset", dataset);
    j_i64(j, "loc", loc_id);
    if (named && dataset >= 0)
        trace_name(j, "name", dataset);
    else {
        j_key(j, "name");
        j_raw(j, "null", 4);
    }
    j_string(j, "api", api);
    trace_type(j, type_id);
    trace_extent(j, space_id);
    trace_dcpl(j, dcpl_id);
    trace_done(j, phase, dataset >= 0);
}

/* The memory side of a transfer, when the program gave a dataspace for it: {"dims", "sel"} (a buffer with ghost
 * cells, say, whose interior is written: its layout in memory changes the MPI-IO and POSIX calls HDF5 makes). */
static void trace_memory(struct json *j, hid_t mem_space)
{
    if (mem_space == H5S_ALL)
        return;
    hsize_t dims[H5S_MAX_RANK];
    int rank = -1;
    H5E_BEGIN_TRY { rank = H5Sget_simple_extent_dims(mem_space, dims, NULL); } H5E_END_TRY;
    if (rank < 0)
        return;
    j_open(j, "mem", "{");
    j_dims(j, "dims", rank, dims, false);
    trace_selection(j, "sel", mem_space);
    j_close(j, "}");
}

static void trace_transfer(const char *op, uint64_t phase, hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id,
                           hid_t file_space_id, const char *xfer, uint64_t bytes, bool ok)
{
    struct json *j = trace_start(op, phase);
    if (!j)
        return;
    size_t itemsize = 0;
    H5E_BEGIN_TRY { itemsize = H5Tget_size(mem_type_id); } H5E_END_TRY;
    j_i64(j, "dset", dset_id);
    j_u64(j, "bytes", bytes);
    j_u64(j, "mem_size", itemsize);
    trace_selection(j, "sel", file_space_id);
    trace_memory(j, mem_space_id);
    j_string(j, "xfer", xfer);
    trace_done(j, phase, ok);
}

/* One file open, whichever API made it: `run` calls the real function with
 * the (tuned) access list; `op` names it in the trace (the synchronous call a
 * replay makes), `call` in messages. */
typedef hid_t (*open_run)(const void *args, hid_t fapl);

static hid_t file_open(const char *op, const char *call, const char *name, unsigned flags, hid_t fapl_id,
                       open_run run, const void *args)
{
    add(&hdf5_calls, 1);
    bool copied, acted[N_SETTINGS] = {false};
    hid_t fapl = tuned_fapl(fapl_id, &copied, acted);
    uint64_t opened = now_ns(), phase = phase_enter();
    hid_t file = run(args, fapl);
    phase_leave(PHASE_HDF5, phase);
    trace_file_open(op, phase, name, flags, fapl_id, file);
    if (file >= 0)
        after_file_open(call, name, file, fapl, acted, opened);
    if (copied)
        close_plist(fapl);
    return file;
}

struct create_args {
    H5Fcreate_fn real;
    const char *name;
    unsigned flags;
    hid_t fcpl;
};

static hid_t run_create(const void *args, hid_t fapl)
{
    const struct create_args *a = args;
    return a->real(a->name, a->flags, a->fcpl, fapl);
}

hid_t H5Fcreate(const char *name, unsigned flags, hid_t fcpl_id, hid_t fapl_id)
{
    ensure_init();
    H5Fcreate_fn real = REAL(H5Fcreate);
    if (!real)
        return H5I_INVALID_HID;
    struct create_args args = {real, name, flags, fcpl_id};
    return file_open("H5Fcreate", "H5Fcreate", name, flags, fapl_id, run_create, &args);
}

struct open_args {
    H5Fopen_fn real;
    const char *name;
    unsigned flags;
};

static hid_t run_open(const void *args, hid_t fapl)
{
    const struct open_args *a = args;
    return a->real(a->name, a->flags, fapl);
}

hid_t H5Fopen(const char *name, unsigned flags, hid_t fapl_id)
{
    ensure_init();
    H5Fopen_fn real = REAL(H5Fopen);
    if (!real)
        return H5I_INVALID_HID;
    struct open_args args = {real, name, flags};
    return file_open("H5Fopen", "H5Fopen", name, flags, fapl_id, run_open, &args);
}

/* One file close: `run` calls the real function (H5Fclose, H5Fclose_async). */
typedef herr_t (*close_run)(const void *args);

static herr_t file_close(hid_t file_id, close_run run, const void *args)
{
    add(&hdf5_calls, 1);
    struct file_entry entry = {.id = H5I_INVALID_HID, .mpio = false, .logs = false, .transfer_said = false,
                               .record = -1};
    bool known = file_entry_of(file_id, &entry, false);
    uint64_t phase = phase_enter();
    herr_t status = run(args);
    phase_leave(PHASE_HDF5, phase);
    trace_handle("H5Fclose", phase, "file", file_id, status >= 0);
    if (status >= 0 && known)
        record_close(entry.record);
    return status;
}

/* A call on one id (H5Fclose, H5Idec_ref), for file_close's `run`. */
struct id_call {
    herr_t (*real)(hid_t);
    hid_t id;
};

static herr_t run_id_call(const void *args)
{
    const struct id_call *a = args;
    return a->real(a->id);
}

herr_t H5Fclose(hid_t file_id)
{
    ensure_init();
    H5Fclose_fn real = REAL(H5Fclose);
    if (!real)
        return -1;
    struct id_call args = {real, file_id};
    return file_close(file_id, run_id_call, &args);
}

/* Calls that change nothing: they count in the I/O phases (a chunked
 * dataset's cache is written at H5Dclose) and are traced. */
typedef herr_t (*H5Fflush_fn)(hid_t, H5F_scope_t);
typedef hid_t (*H5Dopen2_fn)(hid_t, const char *, hid_t);
typedef herr_t (*H5Dset_extent_fn)(hid_t, const hsize_t *);
typedef hid_t (*H5Acreate2_fn)(hid_t, const char *, hid_t, hid_t, hid_t, hid_t);
typedef herr_t (*H5Awrite_fn)(hid_t, hid_t, const void *);
static H5Fflush_fn real_H5Fflush;
static H5Dopen2_fn real_H5Dopen2;
static H5Dset_extent_fn real_H5Dset_extent;
static H5Acreate2_fn real_H5Acreate2;
static H5Awrite_fn real_H5Awrite;

herr_t H5Fflush(hid_t object_id, H5F_scope_t scope)
{
    H5Fflush_fn real = REAL(H5Fflush);
    if (!real)
        return -1;
    add(&hdf5_calls, 1);
    uint64_t phase = phase_enter();
    herr_t status = real(object_id, scope);
    phase_leave(PHASE_HDF5, phase);
    trace_handle("H5Fflush", phase, "obj", object_id, status >= 0);
    return status;
}

hid_t H5Dopen2(hid_t loc_id, const char *name, hid_t dapl_id)
{
    H5Dopen2_fn real = REAL(H5Dopen2);
    if (!real)
        return H5I_INVALID_HID;
    add(&hdf5_calls, 1);
    uint64_t phase = phase_enter();
    hid_t dataset = real(loc_id, name, dapl_id);
    phase_leave(PHASE_HDF5, phase);
    struct json *j = trace_start("H5Dopen", phase);
    if (j) {
        j_i64(j, "dset", dataset);
        j_i64(j, "loc", loc_id);
        if (dataset >= 0)
            trace_name(j, "name", dataset);
        else
            j_string(j, "name", name ? name : "");
        trace_done(j, phase, dataset >= 0);
    }
    return dataset;
}


/* A close: it counts in the I/O phases (a chunked dataset's cache is written
 * at H5Dclose) and is traced with the handle under `key`. */
#define HDF5_CLOSE_WRAPPER(name, key)                              \
    typedef herr_t (*name##_fn)(hid_t);                           \
    static name##_fn real_##name;                                 \
    herr_t name(hid_t id)                                         \
    {                                                             \
        name##_fn real = REAL(name);                              \
        if (!real)                                                \
            return -1;                                            \
        add(&hdf5_calls, 1);                                      \
        uint64_t phase = phase_enter();                           \
        herr_t status = real(id);                                 \
        phase_leave(PHASE_HDF5, phase);                           \
        trace_handle(#name, phase, key, id, status >= 0);         \
        return status;                                            \
    }

HDF5_CLOSE_WRAPPER(H5Dclose, "dset")
HDF5_CLOSE_WRAPPER(H5Aclose, "attr")

/* Closes and opens made through HDF5's generic calls, as h5py makes them: the
 * last H5Idec_ref of a file or a dataset closes it (h5py's File.close and a
 * dataset's release), and H5Oopen opens a dataset by path (h5py's f[name]).
 * They are the program's H5Fclose, H5Dclose and H5Dopen: in the I/O phases and
 * traced as those, so a replay closes and opens what the program did. */
typedef int (*H5Idec_ref_fn)(hid_t);
typedef hid_t (*H5Oopen_fn)(hid_t, const char *, hid_t);
static H5Idec_ref_fn real_H5Idec_ref;
static H5Oopen_fn real_H5Oopen;

int H5Idec_ref(hid_t id)
{
    H5Idec_ref_fn real = REAL(H5Idec_ref);
    if (!real)
        return -1;
    H5I_type_t type = H5I_BADID;
    int refs = 0;
    H5E_BEGIN_TRY {
        type = H5Iget_type(id);
        refs = H5Iget_ref(id);
    } H5E_END_TRY;
    if (refs != 1 || (type != H5I_FILE && type != H5I_DATASET))
        return real(id);
    if (type == H5I_FILE) {
        ensure_init();
        struct id_call args = {real, id};
        return file_close(id, run_id_call, &args);
    }
    add(&hdf5_calls, 1);
    uint64_t phase = phase_enter();
    int status = real(id);
    phase_leave(PHASE_HDF5, phase);
    trace_handle("H5Dclose", phase, "dset", id, status >= 0);
    return status;
}

hid_t H5Oopen(hid_t loc_id, const char *name, hid_t lapl_id)
{
    H5Oopen_fn real = REAL(H5Oopen);
    if (!real)
        return H5I_INVALID_HID;
    uint64_t phase = phase_enter();
    hid_t object = real(loc_id, name, lapl_id);
    phase_leave(PHASE_HDF5, phase);
    H5I_type_t type = H5I_BADID;
    H5E_BEGIN_TRY { type = object >= 0 ? H5Iget_type(object) : H5I_BADID; } H5E_END_TRY;
    if (type != H5I_DATASET)
        return object;  /* a group or a named type: nothing the replay needs (its time still counts) */
    add(&hdf5_calls, 1);
    struct json *j = trace_start("H5Dopen", phase);
    if (j) {
        j_i64(j, "dset", object);
        j_i64(j, "loc", loc_id);
        trace_name(j, "name", object);
        trace_done(j, phase, true);
    }
    return object;
}

herr_t H5Dset_extent(hid_t dset_id, const hsize_t size[])
{
    H5Dset_extent_fn real = REAL(H5Dset_extent);
    if (!real)
        return -1;
    add(&hdf5_calls, 1);
    int rank = -1;
    H5E_BEGIN_TRY {
        hid_t space = H5Dget_space(dset_id);
        if (space >= 0) {
            rank = H5Sget_simple_extent_ndims(space);
            H5Sclose(space);
        }
    } H5E_END_TRY;
    uint64_t phase = phase_enter();
    herr_t status = real(dset_id, size);
    phase_leave(PHASE_HDF5, phase);
    struct json *j = trace_start("H5Dset_extent", phase);
    if (j) {
        j_i64(j, "dset", dset_id);
        j_dims(j, "dims", rank > 0 ? rank : 0, size, false);
        trace_done(j, phase, status >= 0);
    }
    return status;
}

hid_t H5Acreate2(hid_t loc_id, const char *attr_name, hid_t type_id, hid_t space_id, hid_t acpl_id, hid_t aapl_id)
{
    H5Acreate2_fn real = REAL(H5Acreate2);
    if (!real)
        return H5I_INVALID_HID;
    add(&hdf5_calls, 1);
    uint64_t phase = phase_enter();
    hid_t attr = real(loc_id, attr_name, type_id, space_id, acpl_id, aapl_id);
    phase_leave(PHASE_HDF5, phase);
    struct json *j = trace_start("H5Acreate", phase);
    if (j) {
        j_i64(j, "attr", attr);
        j_i64(j, "loc", loc_id);
        trace_name(j, "loc_name", loc_id);
        j_string(j, "name", attr_name ? attr_name : "");
        trace_type(j, type_id);
        trace_extent(j, space_id);
        trace_done(j, phase, attr >= 0);
    }
    return attr;
}

herr_t H5Awrite(hid_t attr_id, hid_t mem_type_id, const void *buf)
{
    H5Awrite_fn real = REAL(H5Awrite);
    if (!real)
        return -1;
    add(&hdf5_calls, 1);
    uint64_t phase = phase_enter();
    herr_t status = real(attr_id, mem_type_id, buf);
    phase_leave(PHASE_HDF5, phase);
    struct json *j = trace_start("H5Awrite", phase);
    if (j) {
        hssize_t points = 0;
        size_t itemsize = 0;
        H5E_BEGIN_TRY {
            hid_t space = H5Aget_space(attr_id);
            if (space >= 0) {
                points = H5Sget_simple_extent_npoints(space);
                H5Sclose(space);
            }
            itemsize = H5Tget_size(mem_type_id);
        } H5E_END_TRY;
        j_i64(j, "attr", attr_id);
        j_u64(j, "bytes", points > 0 ? (uint64_t)points * itemsize : 0);
        trace_done(j, phase, status >= 0);
    }
    return status;
}


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

/* One dataset creation, whichever API made it: `run` calls the real function
 * with the (planned) creation list; `api` is the trace's ("2", "1", "anon"),
 * `call` the name in messages. */
typedef hid_t (*create_run)(const void *args, hid_t dcpl);

static hid_t dataset_create(const char *api, const char *call, hid_t loc_id, const char *name, hid_t type_id,
                            hid_t space_id, hid_t dcpl_id, create_run run, const void *args)
{
    add(&hdf5_calls, 1);
    struct layout_plan plan;
    plan_layout(type_id, space_id, dcpl_id, &plan);
    uint64_t phase = phase_enter();
    hid_t dataset = run(args, plan.dcpl >= 0 ? plan.dcpl : dcpl_id);
    phase_leave(PHASE_HDF5, phase);
    trace_dataset_create(api, phase, loc_id, dataset, name != NULL, type_id, space_id, dcpl_id);
    if (dataset >= 0)
        after_dataset_create(call, loc_id, dataset, name, &plan);
    if (plan.dcpl >= 0)
        close_plist(plan.dcpl);
    return dataset;
}

struct dcreate2_args {
    H5Dcreate2_fn real;
    hid_t loc, type, space, lcpl, dapl;
    const char *name;
};

static hid_t run_dcreate2(const void *args, hid_t dcpl)
{
    const struct dcreate2_args *a = args;
    return a->real(a->loc, a->name, a->type, a->space, a->lcpl, dcpl, a->dapl);
}

hid_t H5Dcreate2(hid_t loc_id, const char *name, hid_t type_id, hid_t space_id, hid_t lcpl_id, hid_t dcpl_id,
                 hid_t dapl_id)
{
    ensure_init();
    H5Dcreate2_fn real = REAL(H5Dcreate2);
    if (!real)
        return H5I_INVALID_HID;
    struct dcreate2_args args = {real, loc_id, type_id, space_id, lcpl_id, dapl_id, name};
    return dataset_create("2", "H5Dcreate2", loc_id, name ? name : "?", type_id, space_id, dcpl_id, run_dcreate2,
                          &args);
}

struct dcreate1_args {
    H5Dcreate1_fn real;
    hid_t loc, type, space;
    const char *name;
};

static hid_t run_dcreate1(const void *args, hid_t dcpl)
{
    const struct dcreate1_args *a = args;
    return a->real(a->loc, a->name, a->type, a->space, dcpl);
}

/* The 1.6 API (programs built with -DH5_USE_16_API call it as H5Dcreate). */
hid_t H5Dcreate1(hid_t loc_id, const char *name, hid_t type_id, hid_t space_id, hid_t dcpl_id)
{
    ensure_init();
    H5Dcreate1_fn real = REAL(H5Dcreate1);
    if (!real)
        return H5I_INVALID_HID;
    struct dcreate1_args args = {real, loc_id, type_id, space_id, name};
    return dataset_create("1", "H5Dcreate1", loc_id, name ? name : "?", type_id, space_id, dcpl_id, run_dcreate1,
                          &args);
}

struct dcreate_anon_args {
    H5Dcreate_anon_fn real;
    hid_t loc, type, space, dapl;
};

static hid_t run_dcreate_anon(const void *args, hid_t dcpl)
{
    const struct dcreate_anon_args *a = args;
    return a->real(a->loc, a->type, a->space, dcpl, a->dapl);
}

/* h5py's `group[name] = array` creates an anonymous dataset, then links it. */
hid_t H5Dcreate_anon(hid_t loc_id, hid_t type_id, hid_t space_id, hid_t dcpl_id, hid_t dapl_id)
{
    ensure_init();
    H5Dcreate_anon_fn real = REAL(H5Dcreate_anon);
    if (!real)
        return H5I_INVALID_HID;
    struct dcreate_anon_args args = {real, loc_id, type_id, space_id, dapl_id};
    return dataset_create("anon", "H5Dcreate_anon", loc_id, NULL, type_id, space_id, dcpl_id, run_dcreate_anon,
                          &args);
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

/* One write of `count` datasets on one transfer list (H5Dwrite: 1; HDF5
 * 1.14's H5Dwrite_multi: several), whichever API made it: `run` calls the
 * real function with the transfer list to use. The transfer mode is decided
 * on the first dataset's file; the trace has one H5Dwrite line per dataset. */
typedef herr_t (*transfer_run)(const void *args, hid_t dxpl);

static uint64_t transfers_bytes(size_t count, const hid_t dset_id[], const hid_t mem_type_id[],
                                const hid_t mem_space_id[], const hid_t file_space_id[])
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < count; i++)
        bytes += transfer_bytes(dset_id[i], mem_type_id[i], mem_space_id[i], file_space_id[i]);
    return bytes;
}

static void trace_transfers(const char *op, uint64_t phase, size_t count, const hid_t dset_id[],
                            const hid_t mem_type_id[], const hid_t mem_space_id[], const hid_t file_space_id[],
                            hid_t plist_id, bool ok)
{
    if (!phase)
        return;
    for (size_t i = 0; i < count; i++)
        trace_transfer(op, phase, dset_id[i], mem_type_id[i], mem_space_id[i], file_space_id[i], program_xfer(plist_id),
                       transfer_bytes(dset_id[i], mem_type_id[i], mem_space_id[i], file_space_id[i]), ok);
}

static herr_t dataset_write(size_t count, const hid_t dset_id[], const hid_t mem_type_id[],
                            const hid_t mem_space_id[], const hid_t file_space_id[], hid_t plist_id,
                            transfer_run run, const void *args)
{
    add(&hdf5_calls, 1);
    struct file_entry entry = {.id = H5I_INVALID_HID, .mpio = false, .logs = false, .transfer_said = false,
                               .record = -1};
    bool tuned = count > 0 && is_set(TRANSFER_MODE) && file_of(dset_id[0], &entry, true) && entry.mpio;
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

    uint64_t bytes = transfers_bytes(count, dset_id, mem_type_id, mem_space_id, file_space_id);
    uint64_t start = now_ns(), phase = phase_enter();
    herr_t status = run(args, dxpl);
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
        H5E_BEGIN_TRY { H5Iget_name(dset_id[0], where, sizeof where); } H5E_END_TRY;
        note_effect(TRANSFER_MODE, holds ? NULL : in_effect, why.text, where);
        if (verbose && entry.logs && !entry.transfer_said) {
            char file_name[NAME_CHARS] = "?";
            H5E_BEGIN_TRY { H5Fget_name(dset_id[0], file_name, sizeof file_name); } H5E_END_TRY;
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
    /* the program's own list, as it was before and is again */
    trace_transfers("H5Dwrite", phase, count, dset_id, mem_type_id, mem_space_id, file_space_id, plist_id,
                    status >= 0);
    return status;
}

/* Reads are counted, not changed. */
static herr_t dataset_read(size_t count, const hid_t dset_id[], const hid_t mem_type_id[],
                           const hid_t mem_space_id[], const hid_t file_space_id[], hid_t plist_id,
                           transfer_run run, const void *args)
{
    add(&hdf5_calls, 1);
    uint64_t bytes = transfers_bytes(count, dset_id, mem_type_id, mem_space_id, file_space_id);
    uint64_t start = now_ns(), phase = phase_enter();
    herr_t status = run(args, plist_id);
    phase_leave(PHASE_HDF5, phase);
    uint64_t elapsed = now_ns() - start;
    if (status >= 0) {
        account(HDF5_LEVEL, READ, bytes, elapsed);
        tally_io_mode(READ, plist_id);
    }
    trace_transfers("H5Dread", phase, count, dset_id, mem_type_id, mem_space_id, file_space_id, plist_id,
                    status >= 0);
    return status;
}

struct write_args {
    H5Dwrite_fn real;
    hid_t dset, mem_type, mem_space, file_space;
    const void *buf;
};

static herr_t run_write(const void *args, hid_t dxpl)
{
    const struct write_args *a = args;
    return a->real(a->dset, a->mem_type, a->mem_space, a->file_space, dxpl, a->buf);
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
    struct write_args args = {real, dset_id, mem_type_id, mem_space_id, file_space_id, buf};
    return dataset_write(1, &dset_id, &mem_type_id, &mem_space_id, &file_space_id, plist_id, run_write, &args);
}

struct read_args {
    H5Dread_fn real;
    hid_t dset, mem_type, mem_space, file_space;
    void *buf;
};

static herr_t run_read(const void *args, hid_t dxpl)
{
    const struct read_args *a = args;
    return a->real(a->dset, a->mem_type, a->mem_space, a->file_space, dxpl, a->buf);
}

herr_t H5Dread(hid_t dset_id, hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t plist_id, void *buf)
{
    H5Dread_fn real = REAL(H5Dread);
    if (!real)
        return -1;
    struct read_args args = {real, dset_id, mem_type_id, mem_space_id, file_space_id, buf};
    return dataset_read(1, &dset_id, &mem_type_id, &mem_space_id, &file_space_id, plist_id, run_read, &args);
}

/* ------------------------------------------------------------------------ */
/* HDF5 1.14's other entry points to the same operations                    */

/*
 * HDF5 1.14 adds H5Dwrite_multi/H5Dread_multi (several datasets in one call)
 * and the _async variants (an event set `es_id`; hdf5.h turns a program's
 * H5Dwrite_async(...) into H5Dwrite_async(__FILE__, __func__, __LINE__, ...)).
 * Each applies and measures as its synchronous call does. With the native
 * VOL an _async call completes before it returns; under an asynchronous VOL
 * connector the seconds counted would be the time to queue the operation.
 */
#if H5_VERSION_GE(1, 14, 0)
#undef H5Fcreate_async
#undef H5Fopen_async
#undef H5Fclose_async
#undef H5Dcreate_async
#undef H5Dclose_async
#undef H5Dwrite_async
#undef H5Dread_async
#undef H5Dwrite_multi_async
#undef H5Dread_multi_async

typedef hid_t (*H5Fcreate_async_fn)(const char *, const char *, unsigned, const char *, unsigned, hid_t, hid_t,
                                    hid_t);
typedef hid_t (*H5Fopen_async_fn)(const char *, const char *, unsigned, const char *, unsigned, hid_t, hid_t);
typedef herr_t (*H5Fclose_async_fn)(const char *, const char *, unsigned, hid_t, hid_t);
typedef hid_t (*H5Dcreate_async_fn)(const char *, const char *, unsigned, hid_t, const char *, hid_t, hid_t, hid_t,
                                    hid_t, hid_t, hid_t);
typedef herr_t (*H5Dclose_async_fn)(const char *, const char *, unsigned, hid_t, hid_t);
typedef herr_t (*H5Dwrite_async_fn)(const char *, const char *, unsigned, hid_t, hid_t, hid_t, hid_t, hid_t,
                                    const void *, hid_t);
typedef herr_t (*H5Dread_async_fn)(const char *, const char *, unsigned, hid_t, hid_t, hid_t, hid_t, hid_t, void *,
                                   hid_t);
typedef herr_t (*H5Dwrite_multi_fn)(size_t, hid_t[], hid_t[], hid_t[], hid_t[], hid_t, const void *[]);
typedef herr_t (*H5Dread_multi_fn)(size_t, hid_t[], hid_t[], hid_t[], hid_t[], hid_t, void *[]);
typedef herr_t (*H5Dwrite_multi_async_fn)(const char *, const char *, unsigned, size_t, hid_t[], hid_t[], hid_t[],
                                          hid_t[], hid_t, const void *[], hid_t);
typedef herr_t (*H5Dread_multi_async_fn)(const char *, const char *, unsigned, size_t, hid_t[], hid_t[], hid_t[],
                                         hid_t[], hid_t, void *[], hid_t);
static H5Fcreate_async_fn real_H5Fcreate_async;
static H5Fopen_async_fn real_H5Fopen_async;
static H5Fclose_async_fn real_H5Fclose_async;
static H5Dcreate_async_fn real_H5Dcreate_async;
static H5Dclose_async_fn real_H5Dclose_async;
static H5Dwrite_async_fn real_H5Dwrite_async;
static H5Dread_async_fn real_H5Dread_async;
static H5Dwrite_multi_fn real_H5Dwrite_multi;
static H5Dread_multi_fn real_H5Dread_multi;
static H5Dwrite_multi_async_fn real_H5Dwrite_multi_async;
static H5Dread_multi_async_fn real_H5Dread_multi_async;

/* Where an _async call was made in the program (hdf5.h's macros pass it), and its event set. */
struct origin {
    const char *file, *func;
    unsigned line;
    hid_t es;
};

struct create_async_args {
    H5Fcreate_async_fn real;
    struct origin at;
    const char *name;
    unsigned flags;
    hid_t fcpl;
};

static hid_t run_create_async(const void *args, hid_t fapl)
{
    const struct create_async_args *a = args;
    return a->real(a->at.file, a->at.func, a->at.line, a->name, a->flags, a->fcpl, fapl, a->at.es);
}

hid_t H5Fcreate_async(const char *app_file, const char *app_func, unsigned app_line, const char *name,
                      unsigned flags, hid_t fcpl_id, hid_t fapl_id, hid_t es_id)
{
    ensure_init();
    H5Fcreate_async_fn real = REAL(H5Fcreate_async);
    if (!real)
        return H5I_INVALID_HID;
    struct create_async_args args = {real, {app_file, app_func, app_line, es_id}, name, flags, fcpl_id};
    return file_open("H5Fcreate", "H5Fcreate_async", name, flags, fapl_id, run_create_async, &args);
}

struct open_async_args {
    H5Fopen_async_fn real;
    struct origin at;
    const char *name;
    unsigned flags;
};

static hid_t run_open_async(const void *args, hid_t fapl)
{
    const struct open_async_args *a = args;
    return a->real(a->at.file, a->at.func, a->at.line, a->name, a->flags, fapl, a->at.es);
}

hid_t H5Fopen_async(const char *app_file, const char *app_func, unsigned app_line, const char *name,
                    unsigned flags, hid_t fapl_id, hid_t es_id)
{
    ensure_init();
    H5Fopen_async_fn real = REAL(H5Fopen_async);
    if (!real)
        return H5I_INVALID_HID;
    struct open_async_args args = {real, {app_file, app_func, app_line, es_id}, name, flags};
    return file_open("H5Fopen", "H5Fopen_async", name, flags, fapl_id, run_open_async, &args);
}

struct close_async_args {
    herr_t (*real)(const char *, const char *, unsigned, hid_t, hid_t);
    struct origin at;
    hid_t id;
};

static herr_t run_close_async(const void *args)
{
    const struct close_async_args *a = args;
    return a->real(a->at.file, a->at.func, a->at.line, a->id, a->at.es);
}

herr_t H5Fclose_async(const char *app_file, const char *app_func, unsigned app_line, hid_t file_id, hid_t es_id)
{
    ensure_init();
    H5Fclose_async_fn real = REAL(H5Fclose_async);
    if (!real)
        return -1;
    struct close_async_args args = {real, {app_file, app_func, app_line, es_id}, file_id};
    return file_close(file_id, run_close_async, &args);
}

herr_t H5Dclose_async(const char *app_file, const char *app_func, unsigned app_line, hid_t dset_id, hid_t es_id)
{
    H5Dclose_async_fn real = REAL(H5Dclose_async);
    if (!real)
        return -1;
    add(&hdf5_calls, 1);
    uint64_t phase = phase_enter();
    herr_t status = real(app_file, app_func, app_line, dset_id, es_id);
    phase_leave(PHASE_HDF5, phase);
    trace_handle("H5Dclose", phase, "dset", dset_id, status >= 0);
    return status;
}

struct dcreate_async_args {
    H5Dcreate_async_fn real;
    struct origin at;
    hid_t loc, type, space, lcpl, dapl;
    const char *name;
};

static hid_t run_dcreate_async(const void *args, hid_t dcpl)
{
    const struct dcreate_async_args *a = args;
    return a->real(a->at.file, a->at.func, a->at.line, a->loc, a->name, a->type, a->space, a->lcpl, dcpl, a->dapl,
                   a->at.es);
}

hid_t H5Dcreate_async(const char *app_file, const char *app_func, unsigned app_line, hid_t loc_id, const char *name,
                      hid_t type_id, hid_t space_id, hid_t lcpl_id, hid_t dcpl_id, hid_t dapl_id, hid_t es_id)
{
    ensure_init();
    H5Dcreate_async_fn real = REAL(H5Dcreate_async);
    if (!real)
        return H5I_INVALID_HID;
    struct dcreate_async_args args = {real, {app_file, app_func, app_line, es_id}, loc_id, type_id, space_id,
                                      lcpl_id, dapl_id, name};
    return dataset_create("2", "H5Dcreate_async", loc_id, name ? name : "?", type_id, space_id, dcpl_id,
                          run_dcreate_async, &args);
}

struct write_async_args {
    H5Dwrite_async_fn real;
    struct origin at;
    hid_t dset, mem_type, mem_space, file_space;
    const void *buf;
};

static herr_t run_write_async(const void *args, hid_t dxpl)
{
    const struct write_async_args *a = args;
    return a->real(a->at.file, a->at.func, a->at.line, a->dset, a->mem_type, a->mem_space, a->file_space, dxpl,
                   a->buf, a->at.es);
}

herr_t H5Dwrite_async(const char *app_file, const char *app_func, unsigned app_line, hid_t dset_id,
                      hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t dxpl_id, const void *buf,
                      hid_t es_id)
{
    ensure_init();
    H5Dwrite_async_fn real = REAL(H5Dwrite_async);
    if (!real)
        return -1;
    struct write_async_args args = {real, {app_file, app_func, app_line, es_id}, dset_id, mem_type_id,
                                    mem_space_id, file_space_id, buf};
    return dataset_write(1, &dset_id, &mem_type_id, &mem_space_id, &file_space_id, dxpl_id, run_write_async,
                         &args);
}

struct read_async_args {
    H5Dread_async_fn real;
    struct origin at;
    hid_t dset, mem_type, mem_space, file_space;
    void *buf;
};

static herr_t run_read_async(const void *args, hid_t dxpl)
{
    const struct read_async_args *a = args;
    return a->real(a->at.file, a->at.func, a->at.line, a->dset, a->mem_type, a->mem_space, a->file_space, dxpl,
                   a->buf, a->at.es);
}

herr_t H5Dread_async(const char *app_file, const char *app_func, unsigned app_line, hid_t dset_id,
                     hid_t mem_type_id, hid_t mem_space_id, hid_t file_space_id, hid_t dxpl_id, void *buf,
                     hid_t es_id)
{
    H5Dread_async_fn real = REAL(H5Dread_async);
    if (!real)
        return -1;
    struct read_async_args args = {real, {app_file, app_func, app_line, es_id}, dset_id, mem_type_id,
                                   mem_space_id, file_space_id, buf};
    return dataset_read(1, &dset_id, &mem_type_id, &mem_space_id, &file_space_id, dxpl_id, run_read_async, &args);
}

/* The arrays of a multi-dataset call, and where it was made (`at.file` NULL: the synchronous call). */
struct multi_args {
    void *real;
    struct origin at;
    size_t count;
    hid_t *dset, *mem_type, *mem_space, *file_space;
    const void **wbuf;
    void **rbuf;
};

static herr_t run_write_multi(const void *args, hid_t dxpl)
{
    const struct multi_args *a = args;
    if (!a->at.file)
        return ((H5Dwrite_multi_fn)a->real)(a->count, a->dset, a->mem_type, a->mem_space, a->file_space, dxpl,
                                            a->wbuf);
    return ((H5Dwrite_multi_async_fn)a->real)(a->at.file, a->at.func, a->at.line, a->count, a->dset, a->mem_type,
                                              a->mem_space, a->file_space, dxpl, a->wbuf, a->at.es);
}

static herr_t run_read_multi(const void *args, hid_t dxpl)
{
    const struct multi_args *a = args;
    if (!a->at.file)
        return ((H5Dread_multi_fn)a->real)(a->count, a->dset, a->mem_type, a->mem_space, a->file_space, dxpl,
                                           a->rbuf);
    return ((H5Dread_multi_async_fn)a->real)(a->at.file, a->at.func, a->at.line, a->count, a->dset, a->mem_type,
                                             a->mem_space, a->file_space, dxpl, a->rbuf, a->at.es);
}

herr_t H5Dwrite_multi(size_t count, hid_t dset_id[], hid_t mem_type_id[], hid_t mem_space_id[],
                      hid_t file_space_id[], hid_t dxpl_id, const void *buf[])
{
    ensure_init();
    H5Dwrite_multi_fn real = REAL(H5Dwrite_multi);
    if (!real)
        return -1;
    struct multi_args args = {(void *)real, {NULL, NULL, 0, H5I_INVALID_HID}, count, dset_id, mem_type_id,
                              mem_space_id, file_space_id, buf, NULL};
    return dataset_write(count, dset_id, mem_type_id, mem_space_id, file_space_id, dxpl_id, run_write_multi,
                         &args);
}

herr_t H5Dread_multi(size_t count, hid_t dset_id[], hid_t mem_type_id[], hid_t mem_space_id[],
                     hid_t file_space_id[], hid_t dxpl_id, void *buf[])
{
    H5Dread_multi_fn real = REAL(H5Dread_multi);
    if (!real)
        return -1;
    struct multi_args args = {(void *)real, {NULL, NULL, 0, H5I_INVALID_HID}, count, dset_id, mem_type_id,
                              mem_space_id, file_space_id, NULL, buf};
    return dataset_read(count, dset_id, mem_type_id, mem_space_id, file_space_id, dxpl_id, run_read_multi, &args);
}

herr_t H5Dwrite_multi_async(const char *app_file, const char *app_func, unsigned app_line, size_t count,
                            hid_t dset_id[], hid_t mem_type_id[], hid_t mem_space_id[], hid_t file_space_id[],
                            hid_t dxpl_id, const void *buf[], hid_t es_id)
{
    ensure_init();
    H5Dwrite_multi_async_fn real = REAL(H5Dwrite_multi_async);
    if (!real)
        return -1;
    struct multi_args args = {(void *)real, {app_file ? app_file : "?", app_func, app_line, es_id}, count, dset_id,
                              mem_type_id, mem_space_id, file_space_id, buf, NULL};
    return dataset_write(count, dset_id, mem_type_id, mem_space_id, file_space_id, dxpl_id, run_write_multi,
                         &args);
}

herr_t H5Dread_multi_async(const char *app_file, const char *app_func, unsigned app_line, size_t count,
                           hid_t dset_id[], hid_t mem_type_id[], hid_t mem_space_id[], hid_t file_space_id[],
                           hid_t dxpl_id, void *buf[], hid_t es_id)
{
    H5Dread_multi_async_fn real = REAL(H5Dread_multi_async);
    if (!real)
        return -1;
    struct multi_args args = {(void *)real, {app_file ? app_file : "?", app_func, app_line, es_id}, count, dset_id,
                              mem_type_id, mem_space_id, file_space_id, NULL, buf};
    return dataset_read(count, dset_id, mem_type_id, mem_space_id, file_space_id, dxpl_id, run_read_multi, &args);
}
#endif /* H5_VERSION_GE(1, 14, 0) */

/* ------------------------------------------------------------------------ */
/* the report: datasets and transfer modes                                   */

void report_datasets(struct json *j)
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

/*
 * libiobo_preload.so, the POSIX level (overview in common.h): reads, writes
 * and syncs on regular files counted, and the time inside opens, closes,
 * reads, writes and syncs added to the I/O phases.
 */
#include "common.h"

#include <sys/uio.h>

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

/* An open the trace keeps until the file's first use (trace_open). */
struct pending_open {
    uint64_t t0, t1;
    int flags;
    char name[NAME_CHARS];
};
static struct pending_open *pending_opens[FD_KINDS];
static void trace_pending_open(int fd);

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
            if (pending_opens[fd])
                trace_pending_open(fd);
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
/* IOBO_PRELOAD_EXCLUDE=DIR:DIR...: files under these directories are not
 * the program's I/O (iobo sets its interpreter's: a Python program's
 * imports read hundreds of modules). */
#define MAX_EXCLUDED 16
static pthread_once_t exclude_once = PTHREAD_ONCE_INIT;
static char exclude_text[4096];
static const char *excluded[MAX_EXCLUDED];
static size_t excluded_length[MAX_EXCLUDED], n_excluded;

static void exclude_init(void)
{
    const char *value = getenv("IOBO_PRELOAD_EXCLUDE");
    if (!value || strlen(value) >= sizeof exclude_text)
        return;
    snprintf(exclude_text, sizeof exclude_text, "%s", value);
    for (char *dir = strtok(exclude_text, ":"); dir && n_excluded < MAX_EXCLUDED; dir = strtok(NULL, ":")) {
        size_t length = strlen(dir);
        while (length > 1 && dir[length - 1] == '/')
            dir[--length] = '\0';
        if (dir[0] == '/') {
            excluded[n_excluded] = dir;
            excluded_length[n_excluded++] = length;
        }
    }
}

static bool excluded_path(const char *path)
{
    pthread_once(&exclude_once, exclude_init);
    for (size_t i = 0; path && i < n_excluded; i++)
        if (!strncmp(path, excluded[i], excluded_length[i]) &&
            (path[excluded_length[i]] == '/' || path[excluded_length[i]] == '\0'))
            return true;
    return false;
}

static void opened_fd(int fd, const char *path, int flags, uint64_t start)
{
    if (fd < 0 || fd >= FD_KINDS || quiet) /* beyond FD_KINDS: not counted */
        return;
    uint8_t kind = excluded_path(path) ? (uint8_t)FD_OTHER : (uint8_t)classify_fd(fd);
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
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*readv_fn)(int, const struct iovec *, int);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef ssize_t (*preadv_fn)(int, const struct iovec *, int, off_t);
typedef ssize_t (*pwritev64_fn)(int, const struct iovec *, int, off64_t);
typedef ssize_t (*preadv64_fn)(int, const struct iovec *, int, off64_t);
typedef ssize_t (*pwritev2_fn)(int, const struct iovec *, int, off_t, int);
typedef ssize_t (*preadv2_fn)(int, const struct iovec *, int, off_t, int);
typedef ssize_t (*pwritev64v2_fn)(int, const struct iovec *, int, off64_t, int);
typedef ssize_t (*preadv64v2_fn)(int, const struct iovec *, int, off64_t, int);
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
static writev_fn real_writev;
static readv_fn real_readv;
static pwritev_fn real_pwritev;
static preadv_fn real_preadv;
static pwritev64_fn real_pwritev64;
static preadv64_fn real_preadv64;
static pwritev2_fn real_pwritev2;
static preadv2_fn real_preadv2;
static pwritev64v2_fn real_pwritev64v2;
static preadv64v2_fn real_preadv64v2;
static open_fn real_open;
static open64_fn real_open64;
static openat_fn real_openat;
static openat64_fn real_openat64;
static creat_fn real_creat;
static creat64_fn real_creat64;
static close_fn real_close;

/* The call `expr` (returning bytes moved or -1), counted for a regular file. */
/* A traced POSIX call on descriptor `fd`: its offset (-1: none) and bytes (-1: none). */
/* A call on a descriptor: `bytes` moved (-1: none, a sync or a close) of the
 * `count` asked for (written as "count" when they differ: a read at the
 * file's end, which a replay repeats as asked). */
static void trace_fd(const char *op, uint64_t phase, int fd, int64_t offset, int64_t bytes, int64_t count,
                     int segments, bool ok)
{
    struct json *j = trace_start(op, phase);
    if (!j)
        return;
    j_i64(j, "fd", fd);
    if (offset >= 0)
        j_i64(j, "offset", offset);
    if (bytes >= 0)
        j_i64(j, "bytes", bytes);
    if (bytes >= 0 && count >= 0 && count != bytes)
        j_i64(j, "count", count);
    if (segments >= 0)
        j_i64(j, "segments", segments);
    trace_done(j, phase, ok);
}

/* The call `expr` (returning bytes moved or -1) of `count` bytes, counted for
 * a regular file; `offset`: where it starts (-1: at the file position, read
 * before the call when tracing); `segments`: a vectored call's buffers (-1:
 * not vectored). A vectored call counts as one request of its total bytes,
 * as the kernel sees one system call. */
#define POSIX_TRANSFER(op, direction, fd, offset, count, segments, expr) \
    do {                                                                 \
        if (quiet || !counted_fd(fd))                                    \
            return expr;                                                 \
        uint64_t start = now_ns(), phase = phase_enter();                \
        int64_t at = (offset);                                           \
        if (phase && at < 0 && trace_active())                           \
            at = (int64_t)lseek(fd, 0, SEEK_CUR);                        \
        ssize_t moved = expr;                                            \
        uint64_t elapsed = now_ns() - start;                             \
        phase_depth--;                                                   \
        posix_phase(fd, phase);                                          \
        if (moved >= 0) {                                                \
            account(POSIX_LEVEL, direction, (uint64_t)moved, elapsed);   \
            add(&counters[POSIX_LEVEL].traffic[direction].requested,     \
                (uint64_t)(count));                                      \
        }                                                                \
        if (phase)                                                       \
            trace_fd(op, phase, fd, at, moved, (int64_t)(count),         \
                     (segments), moved >= 0);                            \
        return moved;                                                    \
    } while (0)

ssize_t write(int fd, const void *buf, size_t count)
{
    write_fn real = REAL(write);
    POSIX_TRANSFER("write", WRITE, fd, -1, count, -1, real(fd, buf, count));
}

ssize_t read(int fd, void *buf, size_t count)
{
    read_fn real = REAL(read);
    POSIX_TRANSFER("read", READ, fd, -1, count, -1, real(fd, buf, count));
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
    pwrite_fn real = REAL(pwrite);
    POSIX_TRANSFER("pwrite", WRITE, fd, (int64_t)offset, count, -1, real(fd, buf, count, offset));
}

ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
    pread_fn real = REAL(pread);
    POSIX_TRANSFER("pread", READ, fd, (int64_t)offset, count, -1, real(fd, buf, count, offset));
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset)
{
    pwrite64_fn real = REAL(pwrite64);
    POSIX_TRANSFER("pwrite", WRITE, fd, (int64_t)offset, count, -1, real(fd, buf, count, offset));
}

ssize_t pread64(int fd, void *buf, size_t count, off64_t offset)
{
    pread64_fn real = REAL(pread64);
    POSIX_TRANSFER("pread", READ, fd, (int64_t)offset, count, -1, real(fd, buf, count, offset));
}

/* Vectored reads and writes: one request of the buffers' total bytes, traced
 * with the number of buffers (a replay splits the bytes as many ways). An
 * offset of -1 (pwritev2, preadv2) means the file position, as for writev. */
static size_t iov_bytes(const struct iovec *iov, int n)
{
    size_t total = 0;
    for (int i = 0; iov && i < n; i++)
        total += iov[i].iov_len;
    return total;
}

/* One wrapper per symbol: `name` with `params`, traced as `op` at `offset`,
 * calling the real function with `args`. The 2 forms take offset -1 for the
 * file position (then traced as writev/readv); the 64v2 forms are what
 * glibc's headers make of pwritev2 and preadv2 with 64-bit offsets (Python's
 * os.pwritev and os.preadv call them). */
#define VECTORED(name, params, op, direction, offset, args)                                     \
    ssize_t name params                                                                         \
    {                                                                                           \
        name##_fn real = REAL(name);                                                            \
        size_t count = iov_bytes(iov, n);                                                       \
        POSIX_TRANSFER(op, direction, fd, (int64_t)(offset), count, n, real args);               \
    }

VECTORED(writev, (int fd, const struct iovec *iov, int n), "writev", WRITE, -1, (fd, iov, n))
VECTORED(readv, (int fd, const struct iovec *iov, int n), "readv", READ, -1, (fd, iov, n))
VECTORED(pwritev, (int fd, const struct iovec *iov, int n, off_t offset),
         "pwritev", WRITE, offset, (fd, iov, n, offset))
VECTORED(preadv, (int fd, const struct iovec *iov, int n, off_t offset),
         "preadv", READ, offset, (fd, iov, n, offset))
VECTORED(pwritev64, (int fd, const struct iovec *iov, int n, off64_t offset),
         "pwritev", WRITE, offset, (fd, iov, n, offset))
VECTORED(preadv64, (int fd, const struct iovec *iov, int n, off64_t offset),
         "preadv", READ, offset, (fd, iov, n, offset))
VECTORED(pwritev2, (int fd, const struct iovec *iov, int n, off_t offset, int flags),
         offset == -1 ? "writev" : "pwritev", WRITE, offset, (fd, iov, n, offset, flags))
VECTORED(preadv2, (int fd, const struct iovec *iov, int n, off_t offset, int flags),
         offset == -1 ? "readv" : "preadv", READ, offset, (fd, iov, n, offset, flags))
VECTORED(pwritev64v2, (int fd, const struct iovec *iov, int n, off64_t offset, int flags),
         offset == -1 ? "writev" : "pwritev", WRITE, offset, (fd, iov, n, offset, flags))
VECTORED(preadv64v2, (int fd, const struct iovec *iov, int n, off64_t offset, int flags),
         offset == -1 ? "readv" : "preadv", READ, offset, (fd, iov, n, offset, flags))

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

/* The trace's open of a counted file, written at the file's first read,
 * write or sync (with the open's own times): MPI opens shared-memory files
 * and maps them, never reads or writes them, and they are not the program's. */

static void trace_open(uint64_t phase, int fd, const char *name, int flags)
{
    if (!phase || fd < 0 || fd >= FD_KINDS || quiet || !trace_active() ||
        (__atomic_load_n(&fd_kinds[fd], __ATOMIC_RELAXED) & FD_KIND_MASK) != FILE_UNUSED)
        return;
    struct pending_open *open_call = malloc(sizeof *open_call);
    if (!open_call)
        return;
    *open_call = (struct pending_open){.t0 = phase, .t1 = now_ns(), .flags = flags};
    snprintf(open_call->name, sizeof open_call->name, "%s", name ? name : "");
    free(__atomic_exchange_n(&pending_opens[fd], open_call, __ATOMIC_ACQ_REL));
}

/* At the first use of `fd`: its open's line, if it waits for one. */
static void trace_pending_open(int fd)
{
    struct pending_open *open_call = __atomic_exchange_n(&pending_opens[fd], NULL, __ATOMIC_ACQ_REL);
    if (!open_call)
        return;
    struct json *j = trace_start("open", open_call->t0);
    if (j) {
        char path[NAME_CHARS] = "";
        absolute_path(open_call->name, path, sizeof path);
        j_i64(j, "fd", fd);
        j_string(j, "name", open_call->name);
        j_string(j, "path", path);
        j_i64(j, "flags", open_call->flags);
        trace_done_at(j, open_call->t0, open_call->t1, true);
    }
    free(open_call);
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(open)(path, flags, mode);
    phase_depth--;
    opened_fd(fd, path, flags, phase);
    trace_open(phase, fd, path, flags);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(open64)(path, flags, mode);
    phase_depth--;
    opened_fd(fd, path, flags, phase);
    trace_open(phase, fd, path, flags);
    return fd;
}

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(openat)(dirfd, path, flags, mode);
    phase_depth--;
    opened_fd(fd, path, flags, phase);
    trace_open(phase, fd, path, flags);
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    uint64_t phase = phase_enter();
    int fd = REAL(openat64)(dirfd, path, flags, mode);
    phase_depth--;
    opened_fd(fd, path, flags, phase);
    trace_open(phase, fd, path, flags);
    return fd;
}

int creat(const char *path, mode_t mode)
{
    uint64_t phase = phase_enter();
    int fd = REAL(creat)(path, mode);
    phase_depth--;
    opened_fd(fd, path, O_WRONLY | O_CREAT | O_TRUNC, phase);
    trace_open(phase, fd, path, O_WRONLY | O_CREAT | O_TRUNC);
    return fd;
}

int creat64(const char *path, mode_t mode)
{
    uint64_t phase = phase_enter();
    int fd = REAL(creat64)(path, mode);
    phase_depth--;
    opened_fd(fd, path, O_WRONLY | O_CREAT | O_TRUNC, phase);
    trace_open(phase, fd, path, O_WRONLY | O_CREAT | O_TRUNC);
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
        if (phase)
            trace_fd("close", phase, fd, -1, -1, -1, -1, status == 0);
    }
    if (fd >= 0 && fd < FD_KINDS) {
        __atomic_store_n(&fd_kinds[fd], FD_UNKNOWN, __ATOMIC_RELAXED);
        if (pending_opens[fd]) /* opened, never used: not the program's I/O */
            free(__atomic_exchange_n(&pending_opens[fd], NULL, __ATOMIC_ACQ_REL));
    }
    return status;
}

typedef int (*fsync_fn)(int);
typedef int (*fdatasync_fn)(int);
static fsync_fn real_fsync;
static fdatasync_fn real_fdatasync;

/* A sync of a counted file is part of the I/O phases (and uses the file). */
#define POSIX_SYNC(op, fd, expr)                              \
    do {                                                      \
        if (quiet || !counted_fd(fd))                         \
            return expr;                                      \
        uint64_t phase = phase_enter();                       \
        int status = expr;                                    \
        phase_depth--;                                        \
        posix_phase(fd, phase);                               \
        if (phase)                                            \
            trace_fd(op, phase, fd, -1, -1, -1, -1, status == 0); \
        return status;                                        \
    } while (0)

int fsync(int fd)
{
    fsync_fn real = REAL(fsync);
    POSIX_SYNC("fsync", fd, real(fd));
}

int fdatasync(int fd)
{
    fdatasync_fn real = REAL(fdatasync);
    POSIX_SYNC("fdatasync", fd, real(fd));
}

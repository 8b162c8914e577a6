"""The C helper the kernel is built with when the options change it: ``iobo_kernel.h`` (its declarations, given
to every kernel source with ``-include``, so the kernel stays line for line) and ``iobo_kernel.c``.

- ``iobo_kernel_keep(GATE)``: the condition of a gate group in a reduced
  loop (:mod:`iobo.extract.loops`); true for 1 in ``k`` of the group's
  executions (the first, then every k-th), counting both. At exit each
  process writes its counts, ``{"reduce": k, "loops": [{"gate": N, "where":
  "file.c:LINE" (the group's first line), "executed": reached, "kept": run}, ...]}``, to
  ``$IOBO_KERNEL_LOOPS/loops.<host>.<pid>.json`` when that variable names a
  directory (``iobo extract --run`` sets it; :func:`iobo.extract.scaling.read_counts`
  reads them). ``$IOBO_KERNEL_REDUCE`` replaces k for one run,
  ``$IOBO_KERNEL_GATE_REDUCE=N:k`` gate N's alone (the runs of
  :func:`iobo.extract.run.run_scaled`).
- ``iobo_kernel_path_*(NAME, ...)``: a file name the kernel opens, switched
  into the redirection directory (:mod:`iobo.extract.redirect`): a file
  created or truncated goes to ``DIR`` + its absolute path (the directories
  made); one opened without creating it (a read, an update, a stat) goes
  there when the kernel made it there, else keeps its path (the program's
  inputs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

HEADER = "iobo_kernel.h"
SOURCE = "iobo_kernel.c"
COUNTS_VARIABLE = "IOBO_KERNEL_LOOPS"
"""The environment variable naming the directory each kernel process writes its loop counts to."""
REDUCE_VARIABLE = "IOBO_KERNEL_REDUCE"
"""The environment variable that, set to a positive integer, replaces the kernel's k for one run."""
GATE_VARIABLE = "IOBO_KERNEL_GATE_REDUCE"
"""The environment variable ``N:k``: gate N keeps 1 in k of its runs for one run (the scaling's runs)."""

DECLARATIONS = """\
/* Written by iobo extract: the kernel's loop gate and file-name switch (iobo_kernel.c). */
#ifndef IOBO_KERNEL_H
#define IOBO_KERNEL_H
#ifdef __cplusplus
extern "C" {
#endif
int iobo_kernel_keep(int loop);
const char *iobo_kernel_path_created(const char *name);
const char *iobo_kernel_path_existing(const char *name);
const char *iobo_kernel_path_mpi(const char *name, int amode);
const char *iobo_kernel_path_posix(const char *name, int flags);
const char *iobo_kernel_path_stdio(const char *name, const char *mode);
#ifdef __cplusplus
}
#endif
#endif
"""

BODY = r"""/* Written by iobo extract (iobo/extract/helper.py): see iobo_kernel.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iobo_kernel.h"

#define IOBO_REDUCE @REDUCE@L
#define IOBO_LOOPS @COUNT@
static const char *const iobo_redirect_dir = @REDIRECT@;
static const char *const iobo_loop_where[IOBO_LOOPS + 1] = {@WHERE@};
static long iobo_loop_executed[IOBO_LOOPS + 1], iobo_loop_kept[IOBO_LOOPS + 1];

static long iobo_reduce(void)
{
    static long reduce = 0; /* $@REDUCE_VARIABLE@ if set, else k */
    if (reduce == 0) {
        const char *given = getenv("@REDUCE_VARIABLE@");
        reduce = given && atol(given) > 0 ? atol(given) : IOBO_REDUCE;
    }
    return reduce;
}

/* $@GATE_VARIABLE@ = "N:k": gate N keeps 1 in k of its runs (a run of the scaling's, one gate apart) */
static long iobo_gate_reduce(int loop)
{
    const char *given = getenv("@GATE_VARIABLE@");
    char *end = NULL;
    if (given && *given && strtol(given, &end, 10) == loop && end && *end == ':' && atol(end + 1) > 0)
        return atol(end + 1);
    return iobo_reduce();
}

int iobo_kernel_keep(int loop)
{
    long n = iobo_loop_executed[loop]++;
    if (n % iobo_gate_reduce(loop) != 0)
        return 0;
    iobo_loop_kept[loop]++;
    return 1;
}

__attribute__((destructor)) static void iobo_kernel_write_counts(void)
{
    const char *dir = getenv("@VARIABLE@");
    if (IOBO_LOOPS == 0 || !dir || !*dir)
        return;
    char host[256] = "host", path[PATH_MAX];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/loops.%s.%ld.json", dir, host, (long)getpid());
    FILE *out = fopen(path, "w");
    if (!out)
        return;
    fprintf(out, "{\"reduce\": %ld, \"loops\": [", iobo_reduce());
    for (int i = 0; i < IOBO_LOOPS; i++)
        fprintf(out, "%s{\"gate\": %d, \"where\": \"%s\", \"executed\": %ld, \"kept\": %ld}", i ? ", " : "", i,
                iobo_loop_where[i], iobo_loop_executed[i], iobo_loop_kept[i]);
    fprintf(out, "]}\n");
    fclose(out);
}

/* NAME made absolute (against the working directory) and normalised ("." and ".." removed), into OUT. */
static int iobo_absolute(const char *name, char *out, size_t size)
{
    char joined[PATH_MAX];
    if (name[0] == '/') {
        if (snprintf(joined, sizeof joined, "%s", name) >= (int)sizeof joined)
            return -1;
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) || snprintf(joined, sizeof joined, "%s/%s", cwd, name) >= (int)sizeof joined)
            return -1;
    }
    size_t length = 0;
    out[0] = '\0';
    for (char *save = NULL, *part = strtok_r(joined, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, "."))
            continue;
        if (!strcmp(part, "..")) {
            while (length > 0 && out[length - 1] != '/')
                length--;
            if (length > 0)
                length--;
            out[length] = '\0';
            continue;
        }
        size_t add = strlen(part);
        if (length + add + 2 > size)
            return -1;
        out[length++] = '/';
        memcpy(out + length, part, add + 1);
        length += add;
    }
    if (length == 0) {
        out[0] = '/';
        out[1] = '\0';
    }
    return 0;
}

/* NAME's place in the redirection directory (malloc'd; NULL when it does not fit), or NAME itself when it is
   there already. */
static const char *iobo_switched(const char *name)
{
    char absolute[PATH_MAX];
    size_t dir_length = strlen(iobo_redirect_dir);
    if (iobo_absolute(name, absolute, sizeof absolute) != 0)
        return NULL;
    if (!strncmp(absolute, iobo_redirect_dir, dir_length) &&
        (absolute[dir_length] == '/' || absolute[dir_length] == '\0'))
        return name;
    size_t size = dir_length + strlen(absolute) + 1;
    char *switched = (char *)malloc(size);
    if (switched)
        snprintf(switched, size, "%s%s", iobo_redirect_dir, absolute);
    return switched;
}

const char *iobo_kernel_path_created(const char *name)
{
    if (!name || !*iobo_redirect_dir)
        return name;
    const char *switched = iobo_switched(name);
    if (!switched || switched == name)
        return name;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", switched);
    char *last = strrchr(parent, '/');
    for (char *slash = strchr(parent + 1, '/'); slash && slash <= last; slash = strchr(slash + 1, '/')) {
        *slash = '\0'; /* each directory above the file, made when missing */
        if (mkdir(parent, 0777) != 0 && errno != EEXIST)
            fprintf(stderr, "iobo kernel: cannot make %s to redirect %s into: %s\n", parent, name,
                    strerror(errno));
        *slash = '/';
    }
    return switched;
}

const char *iobo_kernel_path_existing(const char *name)
{
    if (!name || !*iobo_redirect_dir)
        return name;
    const char *switched = iobo_switched(name);
    if (!switched || switched == name)
        return name;
    struct stat seen;
    if (stat(switched, &seen) == 0)
        return switched;
    free((void *)switched);
    return name;
}

const char *iobo_kernel_path_mpi(const char *name, int amode)
{
    return amode & MPI_MODE_CREATE ? iobo_kernel_path_created(name) : iobo_kernel_path_existing(name);
}

const char *iobo_kernel_path_posix(const char *name, int flags)
{
    return flags & (O_CREAT | O_TRUNC) ? iobo_kernel_path_created(name) : iobo_kernel_path_existing(name);
}

const char *iobo_kernel_path_stdio(const char *name, const char *mode)
{
    return mode && (mode[0] == 'w' || mode[0] == 'a') ? iobo_kernel_path_created(name)
                                                      : iobo_kernel_path_existing(name);
}
"""


def c_string(text: str) -> str:
    """``text`` as a C string literal."""
    return json.dumps(text)  # JSON's escapes are C's for the characters file names hold


def write(kernel_dir: str | os.PathLike, reduce: int, gates: list[str], redirect: str | None) -> tuple[Path, Path]:
    """Write ``iobo_kernel.h`` and ``iobo_kernel.c`` into ``kernel_dir`` for a reduction of 1 in ``reduce`` on
    the gate groups ``gates`` (their ``file.c:LINE``, by gate number) and the redirection directory ``redirect``
    (absolute; None: names keep their paths); returns (header, source)."""
    kernel_dir = Path(kernel_dir)
    header, source = kernel_dir / HEADER, kernel_dir / SOURCE
    header.write_text(DECLARATIONS)
    where = ", ".join([*map(c_string, gates), "0"])
    source.write_text(BODY.replace("@REDUCE@", str(int(reduce))).replace("@COUNT@", str(len(gates)))
                      .replace("@REDIRECT@", c_string((redirect or "").rstrip("/") if redirect != "/" else ""))
                      .replace("@WHERE@", where).replace("@VARIABLE@", COUNTS_VARIABLE)
                      .replace("@REDUCE_VARIABLE@", REDUCE_VARIABLE).replace("@GATE_VARIABLE@", GATE_VARIABLE))
    return header, source

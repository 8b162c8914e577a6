#!/usr/bin/env bash
# Build the third-party MPI programs of the record/replay benchmark (issue #28) from fetched snapshots, each in a
# scratch folder outside the repository, and print for each: name, repository, commit, binary and the command
# template that runs it with {workdir} standing for its output directory (run it as `mpiexec -n R <command>`).
#
#   experiments/kernels/build_programs.sh [NAME ...]      NAME: heat-restart, cans, macsio, citcoms (default: all)
#
# Environment:
#   IOBO_KERNELS_DIR  where the programs are built, one folder per name (default /tmp/iobo-kernels)
#   IOBO_MIRRORS      where `fetch` put the snapshots, as owner+name/repo (default /work/.mirror)
#
# Snapshots needed (search tool `fetch github:OWNER/NAME`): csc-training/summerschool, CaNS-World/CaNS,
# CaNS-World/2decomp-fft (CaNS's submodule, at the commit CaNS pins), LLNL/MACSio, LLNL/json-cwx,
# geodynamics/citcoms.
# System packages: MPICH with its parallel HDF5 (libhdf5-mpich-dev), gfortran, libpng-dev, libfftw3-dev, cmake,
# autoconf/automake/libtool. HDF5 is linked as a shared library in all three (the shim sees only shared HDF5).
#
# Every command template changes into {workdir} first (`sh -c 'cd {workdir} && ... exec PROGRAM'`): all the
# programs write into their current directory.
set -euo pipefail

ROOT=${IOBO_KERNELS_DIR:-/tmp/iobo-kernels}
MIRRORS=${IOBO_MIRRORS:-/work/.mirror}

die() { echo "build_programs.sh: $*" >&2; exit 1; }

# The git directory of a fetched snapshot (bare, or a clone's .git).
gitdir() {
    local base="$MIRRORS/${1/\//+}/repo"
    if [ -d "$base/.git" ]; then echo "$base/.git"
    elif [ -d "$base" ]; then echo "$base"
    else die "no snapshot of $1 under $MIRRORS: fetch github:$1 first (search tool fetch)"
    fi
}

# Extract PATH (. for all) of a snapshot at COMMIT into DIR (fresh).
extract() {  # repo commit path dir
    rm -rf "$4" && mkdir -p "$4"
    local tree="$2:$3"
    [ "$3" != . ] || tree="$2"
    git --git-dir="$(gitdir "$1")" archive "$tree" | tar -x -C "$4"
}

report() {  # name repository commit binary command
    printf 'name: %s\nrepository: %s\ncommit: %s\nbinary: %s\ncommand: %s\n\n' "$@"
}

# 2D heat equation (C, MPI), collective parallel-HDF5 checkpoint HEAT_RESTART.h5 every 200 steps (fixed in
# main.c), PNG images every 500 steps (stdio, rank 0). It restarts from HEAT_RESTART.h5 when the file exists,
# so the template removes it first: every run then starts at step 1 and writes all its checkpoints.
build_heat_restart() {
    local repo=csc-training/summerschool dir="$ROOT/heat-restart"
    local commit; commit=$(git --git-dir="$(gitdir $repo)" rev-parse HEAD)
    extract $repo "$commit" parallel-io/heat-restart "$dir/src"
    (cd "$dir/src/c/solution" &&
        h5pcc.mpich -shlib -O3 -I../../common -o "$dir/heat_mpi" \
            core.c setup.c utilities.c io.c main.c ../../common/pngwriter.c -lpng)
    report heat-restart "github:$repo (parallel-io/heat-restart/c/solution)" "$commit" "$dir/heat_mpi" \
        "sh -c 'cd {workdir} && rm -f HEAT_RESTART.h5 && exec $dir/heat_mpi 2000 2000 1000'"
}

# CaNS, a DNS Navier-Stokes solver (Fortran 2008, MPI, 2DECOMP&FFT, FFTW), built with its HDF5 I/O
# (USE_HDF5=1) against MPICH's parallel HDF5: checkpoints as one HDF5 file per field (u, v, w, p) under data/.
# The input is its example channel flow (src/input.nml) on 64^3 for 120 steps, a checkpoint every 30 steps,
# each kept (is_overwrite_save = F). Its MPI-IO route is not used: the shim does not see MPI-IO called from
# Fortran. Every rank runs the template: each copies the input under its own name and renames it into place
# (a rename is atomic), since two ranks copying into one file raced ('File exists', and the other rank then
# waited in MPI_Init until the trial's timeout).
build_cans() {
    local repo=CaNS-World/CaNS dir="$ROOT/cans"
    local commit; commit=$(git --git-dir="$(gitdir $repo)" rev-parse HEAD)
    extract $repo "$commit" . "$dir/src"
    local d2d; d2d=$(git --git-dir="$(gitdir $repo)" ls-tree "$commit" dependencies/2decomp-fft | awk '{print $3}')
    extract CaNS-World/2decomp-fft "$d2d" . "$dir/src/dependencies/2decomp-fft"
    (cd "$dir/src" &&
        cp configs/defaults/build-default.conf build.conf &&
        make configs/libs.mk configs/flags.mk configs/compilers.mk >/dev/null &&
        sed -i -e 's/-lhdf5_openmpi_fortran/-lhdf5_mpich_fortran -lhdf5_mpich/' \
               -e 's#/usr/include/hdf5/openmpi#/usr/include/hdf5/mpich#' configs/libs.mk &&
        make libs FC=mpif90.mpich >"$dir/libs.log" 2>&1 &&
        make -j2 FC=mpif90.mpich USE_HDF5=1 >"$dir/make.log" 2>&1) ||
        die "CaNS build failed: see $dir/libs.log and $dir/make.log"
    cp "$dir/src/build/cans" "$dir/cans"
    sed -e 's/^nstep = 100000,/nstep = 120,/' -e 's/isave = 5000/isave = 30/' \
        -e 's/is_overwrite_save = T/is_overwrite_save = F/' -e "s/io_backend = 'mpiio'/io_backend = 'hdf5'/" \
        "$dir/src/src/input.nml" >"$dir/input.nml"
    grep -q "nstep = 120," "$dir/input.nml" && grep -q "io_backend = 'hdf5'" "$dir/input.nml" ||
        die "CaNS input.nml changed upstream: set nstep, isave and io_backend in $dir/input.nml by hand"
    report cans "github:$repo (2decomp-fft at $d2d)" "$commit" "$dir/cans" \
        "sh -c 'cd {workdir} && cp $dir/input.nml input.nml.\$\$ && mv -f input.nml.\$\$ input.nml && mkdir -p data && exec $dir/cans'"
}

# MACSio, LLNL's multi-physics I/O proxy application (C), HDF5 plugin against MPICH's parallel HDF5, with
# JSON-CWX built from its own snapshot. One shared file per dump (SIF, collective), 4 dumps, and between dumps
# at least 2 s of computation at work intensity 3 (a 2D heat-equation solve). Its log and timings files go to
# /dev/null: rank 0 creates them and, after a barrier, the other ranks open them without O_CREAT, which the
# replay kernel cannot order (no barrier in the trace: rank 1 of the kernel fails with ENOENT when it opens
# first). An empty --timings_file_name is no way out: MACSio then aborts in MPI_Op_free at exit.
build_macsio() {
    local repo=LLNL/MACSio dir="$ROOT/macsio"
    local commit; commit=$(git --git-dir="$(gitdir $repo)" rev-parse HEAD)
    local jcommit; jcommit=$(git --git-dir="$(gitdir LLNL/json-cwx)" rev-parse HEAD)
    extract LLNL/json-cwx "$jcommit" json-cwx "$dir/json-cwx-src"
    (cd "$dir/json-cwx-src" && ./autogen.sh && ./configure --prefix="$dir/json-cwx" && make -j2 && make install) \
        >"$dir/json-cwx.log" 2>&1 || die "json-cwx build failed: see $dir/json-cwx.log"
    extract $repo "$commit" . "$dir/src"
    rm -rf "$dir/build" && mkdir -p "$dir/build"
    (cd "$dir/build" &&
        cmake ../src -DCMAKE_C_COMPILER=mpicc.mpich -DCMAKE_CXX_COMPILER=mpicxx.mpich \
            -DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich \
            -DWITH_JSON-CWX_PREFIX="$dir/json-cwx" -DENABLE_SILO_PLUGIN=OFF -DENABLE_HDF5_PLUGIN=ON \
            -DHDF5_LIBRARIES=/usr/lib/x86_64-linux-gnu/libhdf5_mpich.so \
            -DHDF5_INCLUDE_DIRS=/usr/include/hdf5/mpich &&
        make -j2) >"$dir/build.log" 2>&1 || die "MACSio build failed: see $dir/build.log"
    report macsio "github:$repo (json-cwx: github:LLNL/json-cwx $jcommit)" "$commit" "$dir/build/macsio/macsio" \
        "sh -c 'cd {workdir} && exec $dir/build/macsio/macsio --interface hdf5 --parallel_file_mode SIF 1 \
--part_size 256K --num_dumps 4 --compute_time 2 --compute_work_intensity 3 \
--log_file_name /dev/null --timings_file_name /dev/null'"
}

# CitcomS, CIG's finite-element mantle convection code (C, MPI), its regional model built by hand (its autotools
# need the m4 submodule, absent from the snapshot) from lib/ (the sources lib/Makefile.am lists) and
# bin/CitcomSRegional.c with USE_HDF5 (H5_USE_16_API, as Spack builds it) against MPICH's parallel HDF5. Input:
# examples/Regional/input.sample on 2 ranks (nprocx 2, nprocy 1), 6 steps, HDF5 output (output_format=hdf5) every
# 3 steps into the current directory: regtest.h5 (the mesh) and regtest.<step>.h5 (fields), both collective
# (input.a); input.b: 3 ranks, 2 steps, every step.
build_citcoms() {
    local repo=geodynamics/citcoms dir="$ROOT/citcoms"
    local commit; commit=$(git --git-dir="$(gitdir $repo)" rev-parse HEAD)
    rm -rf "$dir/src" && mkdir -p "$dir/src"
    git --git-dir="$(gitdir $repo)" archive "$commit" lib bin examples/Regional | tar -x -C "$dir/src"
    local sources; sources=$(sed -n '/^sources = /,/CUDA_SOURCES)$/p' "$dir/src/lib/Makefile.am" |
        grep -o '[A-Za-z0-9_]*\.c' | sed 's|^|lib/|' | tr '\n' ' ')
    [ -n "$sources" ] || die "CitcomS lib/Makefile.am changed upstream: no sources found"
    # shellcheck disable=SC2086
    (cd "$dir/src" && h5pcc.mpich -shlib -O2 -DUSE_HDF5 -DH5_USE_16_API -Ilib -o "$dir/CitcomSRegional" \
        $sources bin/Citcom.c bin/CitcomSRegional.c -lz -lm) >"$dir/build.log" 2>&1 ||
        die "CitcomS build failed: see $dir/build.log"
    echo "$sources bin/Citcom.c bin/CitcomSRegional.c" >"$dir/sources.txt"
    sed -e 's|^datadir=.*|datadir="."|' -e 's|^output_format=.*|output_format=hdf5|' -e 's|^nprocx=.*|nprocx=2|' \
        -e 's|^nprocy=.*|nprocy=1|' -e 's|^maxstep=.*|maxstep=6|' -e 's|^maxtotstep=.*|maxtotstep=6|' \
        -e 's|^storage_spacing=.*|storage_spacing=3|' "$dir/src/examples/Regional/input.sample" >"$dir/input.a"
    # a second input (issue 29's unseen one): 3 ranks along x on a 25-node x axis, 2 steps, output every step
    sed -e 's|^nprocx=.*|nprocx=3|' -e 's|^nodex=.*|nodex=25|' -e 's|^maxstep=.*|maxstep=2|' \
        -e 's|^maxtotstep=.*|maxtotstep=2|' -e 's|^storage_spacing=.*|storage_spacing=1|' "$dir/input.a" >"$dir/input.b"
    grep -q '^output_format=hdf5' "$dir/input.a" && grep -q '^maxstep=6' "$dir/input.a" ||
        die "CitcomS input.sample changed upstream: set output_format, nprocx/y, maxstep in $dir/input.a by hand"
    report citcoms "github:$repo (regional model, lib/ + bin/CitcomSRegional.c)" "$commit" \
        "$dir/CitcomSRegional" "sh -c 'cd {workdir} && exec $dir/CitcomSRegional $dir/input.a'"
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(heat-restart cans macsio citcoms)
mkdir -p "$ROOT"
for name in "${names[@]}"; do
    case "$name" in
        heat-restart) build_heat_restart ;;
        cans) build_cans ;;
        macsio) build_macsio ;;
        citcoms) build_citcoms ;;
        *) die "unknown program '$name': heat-restart, cans, macsio or citcoms" ;;
    esac
done

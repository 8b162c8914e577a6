# iobo: set-up, demo and tests. Every target does the set-up it needs once and
# skips it afterwards (stamp files under .venv/).
#
#   make demo   tune a real parallel HDF5 write (VPIC-IO) on local MPI ranks
#   make test   the test suite on the real stack (MPI, parallel HDF5, Parsl, Optuna)
#   make cluster-up / cluster-down   a 3-node Slurm cluster of network namespaces on this machine (as root)

SHELL := /bin/bash
.DEFAULT_GOAL := demo

VENV      := .venv
PY        := $(VENV)/bin/python
PIP       := $(PY) -m pip --disable-pip-version-check -q
# the exact versions CI uses (pyproject.toml has lower bounds only)
PIN       := $(PIP) install -c constraints.txt
EXTRAS    := dev,ray,postgres,experiments,extract
# MPICH everywhere: its ROMIO honours MPI-IO hints and ROMIO_HINTS, as Cray MPICH does.
MPICC     := mpicc.mpich
HDF5_PC   := hdf5-mpich
# postgresql, slurm-wlm and munge: the real services the reliability tests start (a throw-away cluster each)
# Open MPI and its HDF5 beside them: the shim is built and tested against both (tests/test_packaging.py); MPICH
# stays the default (mpicc, mpirun, h5pcc, hdf5.pc: Open MPI's alternatives would otherwise win on priority)
APT_PKGS  := mpich libhdf5-mpich-dev hdf5-tools pkg-config chromium chromium-driver postgresql slurm-wlm munge \
             openmpi-bin libopenmpi-dev libhdf5-openmpi-dev
MPICH_ALTERNATIVES := mpi:/usr/bin/mpicc.mpich mpirun:/usr/bin/mpirun.mpich h5pcc:/usr/bin/h5pcc.mpich \
             mpi-x86_64-linux-gnu:/usr/include/x86_64-linux-gnu/mpich \
             hdf5.pc:/usr/lib/x86_64-linux-gnu/pkgconfig/hdf5-mpi.pc

DEMO_DIR     ?= demo-run
DEMO_WORKDIR ?= /dev/shm/iobo-demo
DEMO_TRIALS  ?= 30
DEMO_RANKS   ?= 2
ADAPTER      := adapters/libiobo_preload.so

.PHONY: setup demo test dashboard clean cluster-up cluster-down

$(VENV)/.apt:
	@if command -v $(MPICC) >/dev/null && pkg-config --exists $(HDF5_PC) && command -v chromium >/dev/null \
	    && command -v h5dump >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	    && command -v slurmctld >/dev/null && command -v munged >/dev/null \
	    && command -v mpicc.openmpi >/dev/null && pkg-config --exists hdf5-openmpi; then \
	  echo "Debian packages present"; \
	else \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	  for a in $(MPICH_ALTERNATIVES); do update-alternatives --quiet --set $${a%%:*} $${a#*:}; done; \
	fi
	@mkdir -p $(VENV) && touch $@

$(VENV)/.python: $(VENV)/.apt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIN) setuptools wheel
	$(PIN) numpy cython pkgconfig
	@touch $@

# mpi4py and h5py are compiled against Debian's MPICH and its parallel HDF5
# (--no-build-isolation: otherwise pip builds a private mpi4py, >20 GB of memory).
$(VENV)/.mpi: $(VENV)/.python
	CC=$(MPICC) MPICC=$(MPICC) $(PIN) --no-binary=mpi4py --no-build-isolation mpi4py
	CC=$(MPICC) HDF5_MPI=ON HDF5_PKGCONFIG_NAME=$(HDF5_PC) \
	  $(PIN) --no-binary=h5py --no-build-isolation h5py
	$(PY) -c "import h5py, sys; sys.exit(0 if h5py.get_config().mpi else 'h5py was built without MPI')"
	@touch $@

$(VENV)/.deps: $(VENV)/.mpi pyproject.toml constraints.txt
	$(PIN) torch
	$(PIN) -e '.[$(EXTRAS)]'
	@touch $@

setup: $(VENV)/.deps

demo: setup
	DEMO_DIR=$(DEMO_DIR) DEMO_WORKDIR=$(DEMO_WORKDIR) DEMO_TRIALS=$(DEMO_TRIALS) DEMO_RANKS=$(DEMO_RANKS) \
	  $(PY) -m iobo.demo

# LD_PRELOAD shim applying IOBO_* settings to an unmodified program (adapters/README.md),
# one source per level (iobo/_shim/common.h; in the package, so a wheel carries it: `iobo shim build`)
ADAPTER_SRC  := $(addprefix iobo/_shim/,common.c hdf5.c mpiio.c posix.c trace.c)
$(ADAPTER): $(ADAPTER_SRC) iobo/_shim/common.h
	$(MPICC) -shared -fPIC -O2 -Wall -Wextra $$(pkg-config --cflags $(HDF5_PC)) -o $@ $(ADAPTER_SRC) -ldl $$(pkg-config --libs $(HDF5_PC))

test: setup $(ADAPTER)
	$(PY) -m pytest -q tests

dashboard: setup
	$(VENV)/bin/iobo dashboard sqlite:///$(DEMO_DIR)/iobo.db

# README "A multi-node test cluster": nodes node1..3 in network namespaces, run commands with
# `$(PY) tests/support/cluster.py run -- COMMAND` (on its login host, where sbatch reaches slurmctld)
cluster-up: setup
	$(PY) tests/support/cluster.py up

cluster-down:
	$(PY) tests/support/cluster.py down

clean:
	rm -rf $(DEMO_DIR) $(DEMO_WORKDIR) .pytest_cache

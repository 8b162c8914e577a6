# Spack recipe of iobo: the Python package, then its preload shim compiled against the MPI and
# the parallel HDF5 of the same Spack DAG (``iobo shim build``), installed in the prefix and named
# by IOBO_PRELOAD_LIBRARY in the run environment (``spack load iobo``, the module).
# The lower bounds are pyproject.toml's.

import glob
import os

from spack.package import *

try:  # Spack 1.x: the build systems live in the builtin package repository, not spack.package
    from spack_repo.builtin.build_systems.python import PythonPackage
except ImportError:  # Spack 0.x: spack.package has them
    pass


class Iobo(PythonPackage):
    """Bayesian-optimization tuner for the HPC I/O stack (HDF5, MPI-IO, Lustre) on Optuna and
    Parsl, with an LD_PRELOAD shim that applies and measures the settings in unmodified MPI + HDF5
    programs.

    iobo is not on PyPI yet: this recipe installs the clone it sits in (adapters/spack/ of an iobo
    clone, added with ``spack repo add``), its ``main`` branch fetched with git;
    ``spack develop --path CLONE iobo@main`` builds a working tree instead."""

    git = "file://" + os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    homepage = git

    version("main", branch="main")

    variant("ray", default=False, description="Ray Tune integration (iobo.integrations.ray)")
    variant("postgres", default=False, description="PostgreSQL study storage")
    variant("experiments", default=False, description="the benchmark's GA baseline (deap)")

    # the shim is compiled by the DAG's MPI compiler wrapper, which brings its compiler
    depends_on("mpi")
    depends_on("hdf5+mpi")

    depends_on("python@3.11:", type=("build", "run"))
    depends_on("py-setuptools@64:", type="build")

    depends_on("py-numpy@2.4:", type=("build", "run"))
    depends_on("py-scipy@1.17:", type=("build", "run"))
    depends_on("py-h5py@3.16:+mpi", type=("build", "run"))
    depends_on("py-mpi4py@4.1:", type=("build", "run"))
    depends_on("py-optuna@5.0:", type=("build", "run"))
    depends_on("py-optuna-dashboard@0.21:", type=("build", "run"))
    depends_on("py-parsl@2026.10.26:", type=("build", "run"))
    depends_on("py-torch@2.13:", type=("build", "run"))
    depends_on("py-gpytorch@1.15:", type=("build", "run"))
    depends_on("py-darshan@3.5:", type=("build", "run"))
    depends_on("py-plotly@7.1:", type=("build", "run"))
    depends_on("py-matplotlib@3.11:", type=("build", "run"))
    depends_on("py-scikit-learn@1.9:", type=("build", "run"))
    depends_on("py-tqdm@4.70:", type=("build", "run"))
    depends_on("py-threadpoolctl@3.8:", type=("build", "run"))
    depends_on("py-psutil@7.2:", type=("build", "run"))

    # pip's ray[tune]: Spack's py-ray has no tune variant, so the packages of that extra
    with when("+ray"):
        depends_on("py-ray@2.60:", type=("build", "run"))
        depends_on("py-pandas", type=("build", "run"))
        depends_on("py-tensorboardx@1.9:", type=("build", "run"))
        depends_on("py-requests", type=("build", "run"))
        depends_on("py-pyarrow@17:", type=("build", "run"))
        depends_on("py-fsspec", type=("build", "run"))
        depends_on("py-pydantic@2.5:2", type=("build", "run"))
    # pip's psycopg2-binary: Spack builds psycopg2 against its postgresql
    depends_on("py-psycopg2@2.9.13:", when="+postgres", type=("build", "run"))
    depends_on("py-deap@1.4.4:", when="+experiments", type=("build", "run"))

    @property
    def shim_cache(self):
        """XDG_CACHE_HOME of ``iobo shim build``: the shim goes to <it>/iobo/shim/<key>/."""
        return join_path(self.prefix.share, "iobo")

    @run_after("install")
    def build_shim(self):
        """``iobo shim build --mpicc <the DAG's mpicc> --hdf5 <the DAG's HDF5>``, in the prefix."""
        iobo = Executable(self.prefix.bin.iobo)
        iobo.add_default_env("XDG_CACHE_HOME", self.shim_cache)
        mpicc, hdf5 = self.spec["mpi"].mpicc, self.spec["hdf5"].prefix
        iobo("shim", "build", "--mpicc", mpicc, "--hdf5", hdf5)

    def setup_run_environment(self, env):
        """IOBO_PRELOAD_LIBRARY: the shim built at install (iobo still refuses a program linked
        to another MPI or HDF5 than it)."""
        pattern = os.path.join(self.shim_cache, "iobo", "shim", "*", "libiobo_preload.so")
        found = glob.glob(pattern)
        if found:
            env.set("IOBO_PRELOAD_LIBRARY", found[0])

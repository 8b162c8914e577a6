# Spack recipe of optuna-dashboard, which iobo requires and Spack's builtin repo lacks.

from spack.package import *

try:  # Spack 1.x: the build systems live in the builtin package repository, not spack.package
    from spack_repo.builtin.build_systems.python import PythonPackage
except ImportError:  # Spack 0.x: spack.package has them
    pass


class PyOptunaDashboard(PythonPackage):
    """Real-time web dashboard for Optuna studies."""

    homepage = "https://github.com/optuna/optuna-dashboard"
    pypi = "optuna-dashboard/optuna_dashboard-0.21.0.tar.gz"

    license("MIT")

    version("0.21.0", sha256="d7446461602a32b40bff12b7c936bb50f074b54b6099bbe855d5b6ea26f33a4c")

    depends_on("python@3.10:", type=("build", "run"))
    depends_on("py-setuptools@61:", type="build")
    depends_on("py-bottle@0.13:", type=("build", "run"))
    depends_on("py-optuna@3.6:", type=("build", "run"))

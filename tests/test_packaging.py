"""iobo as a user installs it: the wheel built from this tree, alone in a fresh virtual environment (no source tree
on its path), builds its shim with ``iobo shim build`` and tunes a compiled MPI + HDF5 program with ``--command``.

The fresh environment takes its dependencies (numpy, torch, mpi4py, h5py, ...) from the environment running the
tests, through a ``.pth`` file: a plain path line, so that environment's own ``.pth`` files (the editable install
of this tree among them) are not processed, and only the wheel provides ``iobo``.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from packaging.requirements import Requirement
from packaging.version import Version

from iobo import shim
from iobo.trials import stored_space

ROOT = Path(__file__).resolve().parents[1]
RANKS = 2


def _run(argv, **kwargs):
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel of this tree, built from a copy of it (``pip wheel`` writes build/ into the tree it builds)."""
    out = tmp_path_factory.mktemp("wheel")
    tree = out / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "iobo", tree / "iobo", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out / "dist", tree])
    (found,) = (out / "dist").glob("iobo-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed (``--no-deps``) and the test environment's packages on its path:
    {"python", "iobo", "env"} (``env``: no PYTHONPATH, IOBO_PRELOAD_LIBRARY unset, a fresh XDG_CACHE_HOME)."""
    out = tmp_path_factory.mktemp("venv")
    base = Path(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")
    _run([base, "-m", "venv", "--without-pip", out / "venv"])
    python = out / "venv" / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    ours = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (site / "dependencies.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "IOBO_PRELOAD_LIBRARY", "VIRTUAL_ENV")}
    env.update(XDG_CACHE_HOME=str(out / "cache"), PATH=f"{python.parent}:{env['PATH']}")
    return {"python": python, "iobo": python.parent / "iobo", "env": env, "cwd": out}


def test_the_wheel_carries_the_shim_sources(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"iobo/_shim/{name}" for name in (*shim.SOURCES, *shim.HEADERS)} <= names, sorted(names)


def _requires(wheel) -> dict[str, Requirement]:
    """{name: requirement} of the wheel's Requires-Dist without an extra (what ``pip install iobo`` needs)."""
    archive = zipfile.ZipFile(wheel)
    (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = Parser().parsestr(archive.read(name).decode())
    found = [Requirement(line) for line in metadata.get_all("Requires-Dist")]
    return {r.name: r for r in found if not r.marker or "extra" not in str(r.marker)}


PIPELINE = ("optuna", "parsl", "optuna-dashboard")
"""What a Parsl pipeline that imports iobo has its own versions of."""


def test_the_wheel_requires_lower_bounds_only(wheel):
    """Every requirement is a lower bound (>=), no upper bound or pin: a pipeline on a newer Optuna or Parsl can
    install iobo next to it. The bounds are the versions constraints.txt pins (what CI tests)."""
    requires = _requires(wheel)
    assert set(PIPELINE) <= set(requires)
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pinned[name.strip().lower().replace("_", "-")] = version.strip()
    for name, requirement in requires.items():
        assert [s.operator for s in requirement.specifier] == [">="], requirement
        (bound,) = requirement.specifier
        assert Version(bound.version) <= Version(pinned[name]), (requirement, pinned[name])
    for name in PIPELINE:
        assert Version(pinned[name]) in requires[name].specifier


def _stand_in_wheel(directory: Path, name: str, version: str) -> Path:
    """A wheel of ``name`` ``version`` holding only its metadata: a newer release than the registry has, for the
    resolver to choose (never installed)."""
    module, dist = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}"
    path = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{module}/__init__.py", "")
        archive.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: iobo-test\nRoot-Is-Purelib: true\n"
                                                   "Tag: py3-none-any\n")
        archive.writestr(f"{dist}.dist-info/RECORD", "")
    return path


def test_pip_resolves_the_wheel_next_to_newer_optuna_and_parsl(wheel, tmp_path):
    """The registry's newest Optuna, Parsl and optuna-dashboard are the versions CI pins, so newer minor releases are
    offered to pip's own resolver as metadata-only wheels (optuna 5.1.0, parsl 2026.11.30, optuna-dashboard
    0.22.0): ``pip install --dry-run --no-index`` of the wheel in this environment, upgrading eagerly, chooses
    them and keeps the installed versions of everything else."""
    newer = {"optuna": "5.1.0", "parsl": "2026.11.30", "optuna-dashboard": "0.22.0"}
    links = tmp_path / "links"
    links.mkdir()
    for name, version in newer.items():
        _stand_in_wheel(links, name, version)
    report = tmp_path / "report.json"
    done = _run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links", links,
                 "--upgrade", "--upgrade-strategy", "eager", "--report", report, "-q", wheel])
    planned = json.loads(report.read_text())["install"]
    chosen = {item["metadata"]["name"]: item["metadata"]["version"] for item in planned}
    assert chosen == {"iobo": "0.1.0", **newer}, (chosen, done.stderr)


def test_the_installed_wheel_builds_its_shim_and_tunes_a_compiled_program(installed, programs, scratch):
    env, cwd = installed["env"], installed["cwd"]
    where = _run([installed["python"], "-c", "import iobo, json, sys; print(json.dumps([iobo.__file__, sys.path]))"],
                 env=env, cwd=cwd).stdout
    module, path = json.loads(where)
    assert module.startswith(str(cwd / "venv")), where  # the wheel's iobo, not this tree's
    assert str(ROOT) not in path and str(ROOT / "iobo") not in path, path

    # before a build: no shim anywhere, and the error names the one command that builds it
    refused = subprocess.run([str(installed["iobo"]), "tune", "--command", f"{programs['hdf5_18']} {{workdir}}/a.h5",
                              "--ranks", str(RANKS), "--trials", "4", "--storage", f"sqlite:///{cwd}/none.db",
                              "--workdir", str(scratch)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert refused.returncode == 2 and "is not built; build it with: iobo shim build" in refused.stderr, refused.stderr

    built = _run([installed["iobo"], "shim", "build"], env=env, cwd=cwd)
    library = Path(built.stdout.strip())
    info = json.loads((library.parent / shim.INFO_NAME).read_text())
    assert library.is_file() and library.parent.parent == cwd / "cache" / "iobo" / "shim"
    assert info["mpi"]["version"].startswith("MPICH ") and info["mpi"]["soname"] == "libmpich.so.12"
    assert info["hdf5"]["version"].startswith("1.") and info["hdf5"]["soname"] == "libhdf5_mpich.so.103"
    listed = _run([installed["iobo"], "shim", "info"], env=env, cwd=cwd).stdout
    assert f"used here (no program named): {library}" in listed and info["mpi"]["path"] in listed

    storage = f"sqlite:///{cwd}/iobo.db"
    tuned = _run([installed["iobo"], "tune", "--command", f"{programs['hdf5_18']} {{workdir}}/a.h5",
                  "--params", "cb_buffer_size,alignment_interval", "--ranks", RANKS, "--trials", 6, "--runner",
                  "local", "--sampler", "random", "--seed", 3, "--confirm", 0, "--storage", storage,
                  "--workdir", scratch], env=env, cwd=cwd)
    study = optuna.load_study(study_name=f"hdf5_18-{RANKS}ranks", storage=storage)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 6, [t.user_attrs.get("fail_reason") for t in trials]
    space = stored_space(study)
    applied = 0
    for trial in trials:
        asked = trial.user_attrs["config"]["cb_buffer_size"]
        lines = [line for line in trial.user_attrs["stdout_tail"].splitlines() if line.startswith("{")]
        seen = json.loads(lines[-1])  # what MPI_File_get_info told the program itself
        if asked != space["cb_buffer_size"].default:
            assert "cb_buffer_size" not in trial.user_attrs["not_applied"]
            assert seen["hints"]["cb_buffer_size"] == str(asked), (asked, seen["hints"])
            applied += 1
        else:  # the program's own 1 MiB: the shim left it
            assert seen["hints"]["cb_buffer_size"] == "1048576"
    assert applied >= 1, tuned.stdout


def test_under_open_mpi_a_shim_of_its_own_is_built_chosen_and_romio_selected(installed, scratch):
    """Debian's Open MPI and its parallel HDF5 (libhdf5-openmpi-dev, installed by the Makefile beside MPICH)."""
    env, cwd = dict(installed["env"]), installed["cwd"]
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")  # root here; a user needs neither
    env.pop("OMPI_MCA_io", None)
    program = cwd / "hdf5_18_openmpi"
    _run(["h5pcc.openmpi", "-shlib", "-Wall", "-Werror", f"-I{ROOT / 'tests/adapters/programs'}", "-o", program,
          ROOT / "tests/adapters/programs/hdf5_18.c"], cwd=cwd)
    assert shim.linked_libraries(program)["mpi"].soname == "libmpi.so.40"
    command = ["tune", "--command", f"{program} {{workdir}}/a.h5", "--params", "cb_buffer_size", "--ranks", RANKS,
               "--mpiexec", "mpiexec.openmpi", "--runner", "local", "--sampler", "random", "--seed", 5,
               "--confirm", 0, "--workdir", scratch]

    # only an MPICH shim in the cache (or none yet): refused, with the two libraries and the command
    _run([installed["iobo"], "shim", "build", "--mpicc", "mpicc.mpich"], env=env, cwd=cwd)
    refused = subprocess.run([str(a) for a in [installed["iobo"], *command, "--trials", 4, "--storage",
                                               f"sqlite:///{cwd}/refused.db"]],
                             capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert refused.returncode == 2, refused.stderr
    assert "libmpi.so.40" in refused.stderr and "libmpich.so.12" in refused.stderr, refused.stderr
    assert "iobo shim build --mpicc" in refused.stderr

    built = _run([installed["iobo"], "shim", "build", "--h5pcc", "h5pcc.openmpi"], env=env, cwd=cwd)
    library = Path(built.stdout.strip())
    info = json.loads((library.parent / shim.INFO_NAME).read_text())
    assert info["mpi"]["family"] == "openmpi" and info["hdf5"]["soname"] == "libhdf5_openmpi.so.103"
    assert shim.mpi_environment(library, {}) == {"OMPI_MCA_io": "romio321"}  # OMPIO would ignore the hints
    assert shim.mpi_environment(library, {"OMPI_MCA_io": "ompio"}) == {}  # the user's choice stands
    assert shim.mpi_environment(Path(info["library"]).parent.parent / "none", {}) == {}

    storage = f"sqlite:///{cwd}/openmpi.db"
    _run([installed["iobo"], *command, "--trials", 5, "--storage", storage], env=env, cwd=cwd)
    study = optuna.load_study(study_name=f"hdf5_18_openmpi-{RANKS}ranks", storage=storage)
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 5, [t.user_attrs.get("fail_reason") for t in trials]
    default = stored_space(study)["cb_buffer_size"].default
    asked = [t for t in trials if t.user_attrs["config"]["cb_buffer_size"] != default]
    assert asked
    for trial in asked:
        seen = json.loads([line for line in trial.user_attrs["stdout_tail"].splitlines() if line.startswith("{")][-1])
        assert seen["hints"]["cb_buffer_size"] == str(trial.user_attrs["config"]["cb_buffer_size"])
        assert "cb_buffer_size" not in trial.user_attrs["not_applied"]

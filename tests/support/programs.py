"""The compiled C test programs (tests/adapters/programs/) and evidence read from their files.

Fixtures (session-wide, registered by tests/conftest.py): ``library`` (the
preload shim, built by the Makefile's rule), ``programs`` (each program
compiled once: {name: executable}), ``hdf5_tools`` (h5dump and h5ls are
installed). Helpers read a file with Debian's hdf5-tools, independently of
the shim: :func:`h5dump_layouts`, :func:`h5ls_addresses`.
"""

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from iobo import adapters

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "tests" / "adapters" / "programs"
HDF5_PC = "hdf5-mpich"


@pytest.fixture(scope="session")
def library():
    """The shim, built by the Makefile's own rule (a no-op when up to date)."""
    build = subprocess.run(["make", "-s", "-C", str(ROOT), "adapters/libiobo_preload.so"],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "warning" not in build.stderr.lower(), build.stderr
    return adapters.preload_library()


def _pkg_config(*args: str) -> list[str]:
    out = subprocess.run(["pkg-config", *args, HDF5_PC], capture_output=True, text=True, check=True)
    return shlex.split(out.stdout)


def _hdf5_command(source: Path, binary: Path, static: bool, *flags: str) -> list[str]:
    """Compile and link an HDF5 program: h5pcc.mpich (-shlib for shared HDF5), else mpicc.mpich and pkg-config."""
    h5pcc = shutil.which("h5pcc.mpich")
    if h5pcc:
        return [h5pcc, *([] if static else ["-shlib"]), *flags, "-o", str(binary), str(source)]
    libs = _pkg_config("--libs")
    if static:  # libhdf5.a and the libraries it needs (Debian's build)
        libdir = next(flag[2:] for flag in libs if flag.startswith("-L"))
        libs = [f"{libdir}/libhdf5.a", *libs, "-lsz", "-lz", "-lcurl", "-lcrypto", "-ldl", "-lm"]
    return ["mpicc.mpich", *_pkg_config("--cflags"), *flags, "-o", str(binary), str(source), *libs]


@pytest.fixture(scope="session")
def programs(tmp_path_factory):
    """The test programs, compiled once: {name: path of the executable}."""
    out = tmp_path_factory.mktemp("programs")
    warnings = ["-Wall", "-Wextra", "-Werror", f"-I{SOURCES}"]
    builds = {
        "hdf5_18": _hdf5_command(SOURCES / "hdf5_18.c", out / "hdf5_18", False, *warnings),
        "hdf5_18_static": _hdf5_command(SOURCES / "hdf5_18.c", out / "hdf5_18_static", True, *warnings),
        "checkpoint": _hdf5_command(SOURCES / "checkpoint.c", out / "checkpoint", False, *warnings),
        "halo": _hdf5_command(SOURCES / "halo.c", out / "halo", False, *warnings),
        "hdf5_16": _hdf5_command(SOURCES / "hdf5_16.c", out / "hdf5_16", False, "-DH5_USE_16_API", *warnings),
        "mpiio": ["mpicc.mpich", *warnings, "-o", str(out / "mpiio"), str(SOURCES / "mpiio.c")],
        "posix": ["mpicc.mpich", *warnings, "-o", str(out / "posix"), str(SOURCES / "posix.c")],
        "vectored": ["mpicc.mpich", *warnings, "-o", str(out / "vectored"), str(SOURCES / "vectored.c")],
        "last_words": ["mpicc.mpich", *warnings, "-o", str(out / "last_words"), str(SOURCES / "last_words.c")],
    }
    for name, command in builds.items():  # in `out`: h5pcc leaves its object files in the working directory
        build = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=out)
        assert build.returncode == 0, f"{shlex.join(command)}\n{build.stdout}{build.stderr}"
    return {name: out / name for name in builds}


@pytest.fixture(scope="session")
def hdf5_tools():
    """h5dump and h5ls (Debian's hdf5-tools): evidence read from the file, independent of the shim."""
    missing = [tool for tool in ("h5dump", "h5ls") if not shutil.which(tool)]
    assert not missing, f"{missing} not found: install Debian's hdf5-tools (apt-get install hdf5-tools)"


def h5dump_layouts(path: Path) -> dict[str, tuple]:
    """{dataset: ("chunked", dims) or ("contiguous", None)} from ``h5dump -p -H``."""
    text = subprocess.run(["h5dump", "-p", "-H", str(path)], capture_output=True, text=True, check=True).stdout
    layouts = {}
    for name, body in re.findall(r'DATASET "([^"]+)" \{(.*?)\n\s*\}\n', text, re.S):
        chunked = re.search(r"CHUNKED \( ([\d, ]+) \)", body)
        if chunked:
            layouts[name] = ("chunked", tuple(int(d) for d in chunked.group(1).split(",")))
        elif "CONTIGUOUS" in body:
            layouts[name] = ("contiguous", None)
    return layouts


def h5ls_addresses(path: Path) -> dict[str, int]:
    """{dataset: file address of its data} from ``h5ls -va`` (contiguous datasets)."""
    text = subprocess.run(["h5ls", "-va", str(path)], capture_output=True, text=True, check=True).stdout
    addresses, current = {}, None
    for line in text.splitlines():
        dataset = re.match(r"^(\S+)\s+Dataset ", line)
        address = re.match(r"^\s+Address:\s+(\d+)", line)
        if dataset:
            current = dataset.group(1)
        elif address and current:
            addresses[current] = int(address.group(1))
    return addresses


def view_marks(kernel_dir):
    """{program line text (stripped): mark} of the marked view ``view.txt`` iobo extract wrote to ``kernel_dir``."""
    found = {}
    for line in (kernel_dir / "view.txt").read_text().splitlines():
        match = re.match(r"^\s*\d+ ([ +~-]) \| (.*)$", line)
        if match:
            found.setdefault(match[2].strip(), match[1])
    return found

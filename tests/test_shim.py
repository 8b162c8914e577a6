"""iobo.shim's questions about binaries, asked of real files with the real ``ldd``."""

from __future__ import annotations

import os
import shutil
import sys

from iobo import shim

PYTHON = os.path.realpath(sys.executable)


def test_ldd_is_asked_once_per_file_and_again_when_the_file_changes(tmp_path, monkeypatch):
    """A tuner asks at every run; the answer is kept until the file is replaced (a rebuilt program)."""
    calls = tmp_path / "calls"
    wrapper = tmp_path / "bin" / "ldd"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {shutil.which("ldd")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    program = tmp_path / "program"
    shutil.copy(PYTHON, program)  # links libc, no MPI
    assert "mpi" not in shim.linked_libraries(program)
    assert "mpi" not in shim.linked_libraries(program)
    assert not shim.links_open_mpi(program)
    assert calls.read_text().splitlines() == [str(program)]
    import mpi4py.MPI  # its extension links the MPI library

    replacement = tmp_path / "replacement"
    shutil.copy(mpi4py.MPI.__file__, replacement)
    os.replace(replacement, program)  # rebuilt in place: another file at the same path
    assert "mpi" in shim.linked_libraries(program)
    assert calls.read_text().splitlines() == [str(program)] * 2

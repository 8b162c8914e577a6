"""The contract every I/O kernel keeps, as a test class, and helpers to run a kernel under real MPI.

A kernel passes when, run on :data:`RANKS` MPI ranks with a small workload:
the system default configuration runs and reports a positive bandwidth in a
complete result record (and step lines the tuner can read); ``--keep``
keeps exactly the files the record names, which are removed otherwise;
``--repeats`` repeats the timed phase; a bad option fails at once with one
line on stderr and exit code 2, before any file is made.

Test a kernel of your own by subclassing :class:`KernelContract` with a
``kernel_case`` fixture (pytest collects classes named ``Test*``)::

    class TestMyKernel(KernelContract):
        @pytest.fixture
        def kernel_case(self):
            return KernelCase(MY_SPEC, {"size": 4096})

The launches use :class:`iobo.launch.MpiexecLauncher` (``mpiexec.mpich``
unless ``IOBO_MPIEXEC`` names another).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from iobo import kernels
from iobo.config import IOConfig
from iobo.kernels import KernelSpec
from iobo.launch import MpiexecLauncher
from iobo.measure import Measurement

RANKS = 2
"""MPI ranks of every contract run (a 2-core machine's worth)."""

QUICK_OPTIONS: dict[str, dict[str, Any]] = {
    "vpic": {"particles": 4096, "steps": 2},
    "vorpal": {"block": "8x8x8", "steps": 2},
    "gcrm": {"cells": 256, "levels": 5, "steps": 2},
    "bdcats": {"particles": 4096, "steps": 2},
    "checkpoint": {"variables": 4, "variable_bytes": 4096, "checkpoints": 2},
    "ior": {"block_size": 16384, "transfer_size": 4096, "segments": 2},
    "tile": {"tile": "16x8", "element_size": 64, "steps": 2},
}
"""Options of each built-in kernel for a run of well under 1 MB per rank."""

RESULT_KEYS = ("event", "kernel", "ranks", "bytes", "seconds", "mb_per_s", "repeats_mb_per_s", "effective",
               "requested_hints", "hints", "not_applied", "fs_type", "files", "kept", "verified", "config")
"""Keys every result record has: the measurement, what took effect, what did not apply, the files, the config."""
STEP_KEYS = ("event", "step", "repeat", "bytes", "seconds", "mb_per_s", "elapsed_s")
"""Keys every step line has (pruning reads them while the job runs)."""


@dataclass(frozen=True)
class KernelCase:
    """A kernel to hold to the contract: its spec and the options of a small run (the rest at their defaults)."""

    spec: KernelSpec
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def flags(self) -> list[str]:
        """The command-line flags of :attr:`options`."""
        return self.spec.argv(self.options)


def builtin_cases() -> list[KernelCase]:
    """One case per built-in kernel, with its :data:`QUICK_OPTIONS`."""
    return [KernelCase(kernels.get(name), QUICK_OPTIONS[name]) for name in kernels.BUILTINS]


@dataclass(frozen=True)
class KernelOutput:
    """What one kernel launch printed and returned."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[dict[str, Any]]:
        """Every stdout line, parsed as JSON."""
        return [json.loads(line) for line in self.stdout.splitlines()]

    @property
    def steps(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == "step"]

    @property
    def result(self) -> dict[str, Any]:
        """The final line, which must be the result."""
        last = self.lines[-1]
        assert last["event"] == "result", f"last stdout line is not the result: {last}"
        return last


def run_kernel_cli(module: str, out: Path, *flags: str, config: Mapping[str, Any] | None = None,
                   ranks: int = RANKS, timeout: float = 120) -> KernelOutput:
    """Run ``mpiexec -n ranks python -m module --out out [--config FILE] flags`` and wait for it.

    ``config`` is written as JSON beside ``out`` (not in it, so ``out`` holds
    only what the kernel wrote).
    """
    launcher = MpiexecLauncher()
    launcher.check(ranks)
    argv = [sys.executable, "-m", module, "--out", str(out), *flags]
    if config is not None:
        config_file = out.parent / f"{out.name}.config.json"
        config_file.write_text(json.dumps(config))
        argv += ["--config", str(config_file)]
    done = subprocess.run(launcher.command(ranks, argv), capture_output=True, text=True, timeout=timeout)
    return KernelOutput(done.returncode, done.stdout, done.stderr)


def assert_ok(run: KernelOutput) -> None:
    """Exit code 0 (else the stderr is shown)."""
    assert run.returncode == 0, f"exit {run.returncode}\nstderr:\n{run.stderr}"


def assert_rejected(run: KernelOutput, out: Path, fragments: list[str]) -> None:
    """Exit code 2, one stderr line holding every fragment, nothing on stdout, no output directory made."""
    assert run.returncode == 2, f"exit {run.returncode}\nstderr:\n{run.stderr}"
    assert all(fragment in run.stderr for fragment in fragments), run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stdout == "" and not out.exists()


class KernelContract:
    """The tests every kernel passes; a subclass provides the ``kernel_case`` fixture (a :class:`KernelCase`)."""

    @pytest.fixture
    def kernel_case(self) -> KernelCase:
        raise NotImplementedError("subclass KernelContract with a kernel_case fixture returning a KernelCase")

    @pytest.fixture
    def scratch_dir(self):
        """A fresh directory on tmpfs when there is one (the least noisy storage), removed afterwards."""
        path = Path(tempfile.mkdtemp(prefix="iobo-contract-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        yield path
        shutil.rmtree(path, ignore_errors=True)

    def test_the_default_configuration_reports_a_positive_bandwidth_in_a_complete_record(self, kernel_case,
                                                                                         scratch_dir):
        spec, out = kernel_case.spec, scratch_dir / "default"
        run = run_kernel_cli(spec.module, out, *kernel_case.flags)
        assert_ok(run)
        result = run.result
        assert [key for key in RESULT_KEYS if key not in result] == []
        assert (result["kernel"], result["ranks"]) == (spec.name, RANKS)
        assert result["bytes"] > 0 and result["seconds"] > 0 and result["mb_per_s"] > 0
        assert result["config"] == IOConfig.default(spec.space()).to_dict()
        assert result["requested_hints"] == {} and result["not_applied"] == {}  # the default applies nothing
        assert run.steps and run.lines[:-1] == run.steps
        for step in run.steps:
            assert [key for key in STEP_KEYS if key not in step] == [] and step["mb_per_s"] > 0
        assert Measurement.from_lines(run.stdout.splitlines()).mb_per_s == result["mb_per_s"]
        assert result["kept"] is False and out.is_dir() and list(out.iterdir()) == []  # files removed

    def test_keep_keeps_the_files_the_record_names_and_repeats_are_reported(self, kernel_case, scratch_dir):
        spec, out = kernel_case.spec, scratch_dir / "kept"
        verify = ["--verify"] if "verify" in spec.options else []
        run = run_kernel_cli(spec.module, out, *kernel_case.flags, "--keep", "--repeats", "2", *verify)
        assert_ok(run)
        result = run.result
        assert result["kept"] is True and result["files"]
        assert sorted(str(path) for path in out.iterdir()) == sorted(result["files"])
        assert len(result["repeats_mb_per_s"]) == 2 and all(rate > 0 for rate in result["repeats_mb_per_s"])
        assert {step["repeat"] for step in run.steps} == {0, 1}
        assert (result["verified"] is True) if verify else (result["verified"] in (True, None))

    @pytest.mark.parametrize("bad", [("--no-such-option", "1"), ("--repeats", "0")], ids=["unknown", "out-of-range"])
    def test_a_bad_option_fails_at_once_in_one_line(self, kernel_case, scratch_dir, bad):
        spec, out = kernel_case.spec, scratch_dir / "bad"
        if bad[0] == "--repeats" and "repeats" not in spec.options:
            pytest.skip(f"kernel {spec.name!r} has no --repeats option")
        run = run_kernel_cli(spec.module, out, *kernel_case.flags, *bad)
        assert_rejected(run, out, [f"{spec.name}: error:", bad[0]])

"""Trials as Parsl apps: the default runner, and Parsl site configs for this machine.

Each trial is a Parsl ``python_app`` that runs one :class:`KernelJob`
(``mpiexec -n R python -m <kernel>``) wherever the executor placed it and
returns the result dict. :class:`ParslRunner` submits such apps through the
DataFlowKernel already loaded by the user's pipeline if there is one (and
leaves it loaded), or loads ``local_config`` (a HighThroughputExecutor on this
machine) and cleans it up at the end: within ``SHUTDOWN_S`` seconds, or it
ends the executors' interchange and blocks itself. What it loads does not
share this process's Ctrl-C (:func:`interrupts_not_inherited`), and its
logs (``run_dir``) are removed after a clean end unless asked to keep them.

With Parsl's MPI mode (an ``MPIExecutor``), each trial asks Parsl for its
nodes through ``parsl_resource_specification`` and its kernel starts with
the ``$PARSL_MPI_PREFIX`` Parsl composes (``ParslMPIPrefixLauncher``);
``local_mpi_config`` runs that same path on this machine.

For a cluster, pass a Parsl ``Config`` with a Slurm provider: see
``workflows/site_slurm.py`` and ``workflows/site_slurm_mpi.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from iobo.errors import ConfigError, JobEnded, WorkerLost
from iobo.launch import KernelJob
from iobo.runners.base import Runner


WORKER_LOST = ("ManagerLost", "WorkerLost", "BadStateException")
"""Parsl's errors for a task whose worker (or whole block) went away with it."""
SCHEDULER_NOTICES = ("*** JOB", "CANCELLED", "TIME LIMIT", "walltime", "PREEMPT", "NODE FAIL")
"""Words of a batch scheduler's notice, in a job's stderr, that it ended the job (Slurm's, PBS's)."""
SHUTDOWN_S = 5.0
"""Seconds a :class:`ParslRunner` waits for Parsl's shutdown of the DataFlowKernel it loaded (0.05 s here)
before it ends the executors' interchange and blocks itself: Parsl's shutdown waits without a limit for an
interchange that died (``HighThroughputExecutor.scale_in`` asks it for its managers)."""


def _kernel_trial(job: KernelJob, parsl_resource_specification: dict | None = None) -> dict:
    """The app body; Parsl reads ``parsl_resource_specification`` (MPI mode) before the call."""
    from iobo.launch import run_kernel

    return run_kernel(job)


def local_config(max_workers: int = 1, run_dir: str = "runinfo"):
    """A HighThroughputExecutor with ``max_workers`` workers on this machine.

    Each worker runs one trial at a time; the trial's MPI job then uses the
    cores it asks for, so keep ``max_workers`` x ranks within the machine.
    Loadable by the user's own ``parsl.load`` without the venv activated.
    """
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    _put_this_environment_on_path()

    return Config(
        executors=[
            HighThroughputExecutor(
                label="iobo_local",
                max_workers_per_node=max_workers,
                cpu_affinity="none",
                provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1),
            )
        ],
        run_dir=run_dir,
        strategy="none",
        initialize_logging=True,
    )


def local_mpi_config(max_workers: int = 1, run_dir: str = "runinfo", nodes: int | None = None):
    """Parsl's MPI mode on this machine: an ``MPIExecutor`` whose "nodes" are all localhost.

    Parsl's MPI mode finds a batch job's nodes in ``$SLURM_NODELIST`` or
    ``$PBS_NODEFILE``; here a node file in ``run_dir`` lists ``localhost``
    ``nodes`` times (default ``max_workers``, one node per trial in flight)
    and the worker pool is started with ``PBS_NODEFILE`` pointing at it. Each
    trial then gets ``PARSL_MPI_PREFIX = mpiexec -n R -ppn P -hosts localhost``,
    exactly as on a cluster (``mpiexec`` must be the MPI that h5py uses).
    """
    from parsl.config import Config
    from parsl.executors import MPIExecutor
    from parsl.launchers import SimpleLauncher
    from parsl.providers import LocalProvider

    _put_this_environment_on_path()
    nodes = max_workers if nodes is None else nodes
    node_file = Path(run_dir).resolve() / "localhost.nodes"
    node_file.parent.mkdir(parents=True, exist_ok=True)
    node_file.write_text("localhost\n" * nodes)
    return Config(
        executors=[
            MPIExecutor(
                label="iobo_local_mpi",
                max_workers_per_block=max_workers,
                mpi_launcher="mpiexec",
                provider=LocalProvider(
                    init_blocks=1, min_blocks=1, max_blocks=1, launcher=SimpleLauncher(),
                    worker_init=f"export PBS_NODEFILE={node_file}",
                ),
            )
        ],
        run_dir=run_dir,
        strategy="none",
        initialize_logging=True,
    )


def load_config_file(path: str):
    """Load a Parsl ``Config`` from a Python file defining ``config`` (a site config)."""
    import runpy

    if not Path(path).is_file():
        raise ConfigError(f"Parsl site config {path!r} does not exist; pass a Python file that defines `config`")
    namespace = runpy.run_path(path)
    config = namespace.get("config")
    from parsl.config import Config

    if not isinstance(config, Config):
        raise ConfigError(
            f"Parsl site config {path!r} must define `config = parsl.config.Config(...)`; "
            f"found {type(config).__name__}"
        )
    return config


def _put_this_environment_on_path() -> None:
    """Parsl starts ``interchange.py`` and ``process_worker_pool.py`` by name, from PATH.

    ``.venv/bin/iobo`` runs without the venv activated, so put this
    interpreter's bin directory first on PATH (inherited by the workers).
    """
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def loaded_dfk():
    """The DataFlowKernel the process already loaded, or None."""
    import parsl
    from parsl.errors import NoDataFlowKernelError

    try:
        return parsl.dfk()
    except NoDataFlowKernelError:
        return None


class ParslRunner(Runner):
    """Submits kernel jobs as Parsl apps; a context manager owning the DFK it loaded.

    config: a Parsl ``Config`` to load when no DataFlowKernel is loaded yet
    (default: ``local_config(max_workers, run_dir)``); an already-loaded DFK
    is used as it is and left loaded. Parsl writes its logs of the DFK this
    runner loads into a numbered folder of the config's ``run_dir``; with the
    default config, that folder is removed when the ``with`` block ends
    cleanly (an interrupt included), unless ``keep_logs``. When the block ends
    on an error, or Parsl's shutdown did not end in ``SHUTDOWN_S``, it is
    kept and ``kept_logs`` names it.
    """

    def __init__(self, config=None, max_workers: int = 1, run_dir: str = "runinfo", executor: str | None = None,
                 keep_logs: bool = False):
        self._config = config
        self._max_workers = max_workers
        self._run_dir = run_dir
        self._executor = executor
        self._keep_logs = keep_logs
        self._owned = None
        self._app = None
        self._mpi_mode = False
        self._executors: list = []
        self._ended_seen: dict[str, float] = {}  # batch job id -> when (monotonic s) it was first seen ended

    def __enter__(self) -> "ParslRunner":
        import parsl
        from parsl import python_app

        _put_this_environment_on_path()
        self.kept_logs = None
        try:
            dfk = loaded_dfk()
            if dfk is None:
                config = self._config or local_config(self._max_workers, self._run_dir)
                with interrupts_not_inherited():
                    self._owned = dfk = parsl.load(config)
            self.borrowed = self._owned is None
            executors = [self._executor] if self._executor else "all"
            self._app = python_app(_kernel_trial, data_flow_kernel=dfk, executors=executors, cache=False)
            self._executors = [dfk.executors[label] for label in (executors if self._executor else dfk.executors)]
            self._mpi_mode = any(getattr(executor, "enable_mpi_mode", False) for executor in self._executors)
        except BaseException:  # a Ctrl-C while Parsl started, a wrong executor label: what started is stopped
            self.__exit__(*sys.exc_info())
            raise
        return self

    def submit(self, job: KernelJob) -> Future:
        """Submit ``job``; with a Parsl-MPI launcher, with the resource specification it needs."""
        if self._app is None:
            raise ConfigError("ParslRunner.submit was called outside its `with` block: use `with ParslRunner() as r:`")
        specification = job.launcher.resource_specification(job.ranks)
        if specification:
            return self._explained(self._app(job, parsl_resource_specification=specification))
        if self._mpi_mode:  # Parsl's MPI mode hangs on a task without one (Parsl issue #3427)
            raise ConfigError(
                f"the Parsl executor runs in MPI mode but the trial's launcher {job.launcher!r} asks for no "
                f"nodes; use iobo.launch.ParslMPIPrefixLauncher(), or an executor without MPI mode"
            )
        return self._explained(self._app(job))

    def _explained(self, future: Future) -> Future:
        """``future``, except that a trial lost with its worker (Parsl's ``ManagerLost``: a batch job that hit
        its walltime, was cancelled, lost its node) fails with a :class:`iobo.errors.WorkerLost` naming the batch
        jobs that ended while it was out (not those an earlier loss already saw ended) and their state, as the
        scheduler tells Parsl's provider."""
        explained: Future = Future()
        submitted = time.monotonic()

        def settle(done: Future) -> None:
            error = done.exception()
            if error is None:
                explained.set_result(done.result())
            elif isinstance(error, JobEnded) or type(error).__name__ not in WORKER_LOST:
                explained.set_exception(error)
            else:
                explained.set_exception(WorkerLost(
                    f"the Parsl worker running this trial was lost: {type(error).__name__}: {error}"
                    f"{self._ended_batch_jobs(submitted)}"))

        future.add_done_callback(settle)
        return explained

    def _ended_batch_jobs(self, since: float) -> str:
        """``"; batch job 12: TIMEOUT (...)"``... for the executors' blocks whose batch job has ended, first seen
        ended at or after ``since`` (monotonic s: when the lost trial was submitted).

        Each with the state the provider reports and the scheduler's own
        notice from the job's stderr (Slurm: ``*** JOB 12 ON n1 CANCELLED AT
        ... DUE TO TIME LIMIT ***``): without an accounting database Parsl
        sees an ended Slurm job only as gone, and reports it COMPLETED.
        """
        ended = []
        for executor in self._executors:
            provider, jobs = getattr(executor, "provider", None), getattr(executor, "blocks_to_job_id", {})
            if provider is None or not jobs:
                continue
            try:
                statuses = provider.status(list(jobs.values()))
            except Exception as exc:  # the scheduler may be unreachable: the loss is still reported
                ended.append(f"batch job states unknown ({type(exc).__name__}: {exc})")
                continue
            for job_id, status in zip(jobs.values(), statuses):
                notice = _scheduler_notice(status.stderr_path)
                if status.terminal and (notice or status.state.name != "COMPLETED"):
                    if self._ended_seen.setdefault(job_id, time.monotonic()) < since:
                        continue  # it ended before this trial was submitted: another trial's loss
                    ended.append(f"batch job {job_id}: {status.state.name}" + (f" ({notice})" if notice else ""))
        return "; " + "; ".join(ended) if ended else ""


    def __exit__(self, exc_type, *exc) -> None:
        owned, self._owned, self._executors, self._app = self._owned, None, [], None
        if owned is None:
            return
        import parsl

        try:
            in_time = _clean_up(owned, SHUTDOWN_S)
        finally:
            if loaded_dfk() is owned:
                parsl.clear()
        if not in_time or (exc_type is not None and not issubclass(exc_type, KeyboardInterrupt)):
            self.kept_logs = owned.run_dir
        elif self._config is None and not self._keep_logs:
            _remove_run_dir(owned.run_dir)


@contextlib.contextmanager
def interrupts_not_inherited():
    """Within the block, SIGINT is blocked in this thread, and so in every thread and process started from it
    meanwhile (they inherit the block): Parsl's interchange, its threads and what they start later.

    A Ctrl-C at a terminal sends SIGINT to the terminal's whole foreground
    process group, and the interchange would die of it (a traceback on the
    terminal) while this process, interrupted too, then waits on it in its
    shutdown. With the block, only this process gets it and stops the
    others in order. A SIGINT that comes within the block is delivered on
    leaving it.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _clean_up(dfk, within_s: float) -> bool:
    """``dfk.cleanup()``, waited for at most ``within_s`` seconds; past that, the executors' interchanges and
    blocks are ended here (Parsl's cleanup is left waiting, in a daemon thread). Returns whether it ended in time;
    raises what it raised."""
    raised: list[BaseException] = []

    def clean_up() -> None:
        try:
            dfk.cleanup()
        except BaseException as exc:  # raised again in the caller's thread
            raised.append(exc)

    thread = threading.Thread(target=clean_up, name="iobo-parsl-cleanup", daemon=True)
    thread.start()
    thread.join(within_s)
    if thread.is_alive():
        for executor in dfk.executors.values():
            _end_executor(executor)
        return False
    if raised:
        raise raised[0]
    return True


def _end_executor(executor) -> None:
    """Cancel ``executor``'s blocks through its provider and kill its interchange, as far as it has them."""
    provider, jobs = getattr(executor, "provider", None), list(getattr(executor, "blocks_to_job_id", {}).values())
    if provider is not None and jobs:
        with contextlib.suppress(Exception):  # the scheduler may be unreachable: the interchange still goes
            provider.cancel(jobs)
    interchange = getattr(executor, "interchange_proc", None)
    if interchange is not None and interchange.poll() is None:
        interchange.kill()
        interchange.wait()


def _remove_run_dir(run_dir: str) -> None:
    """Remove a DataFlowKernel's numbered log folder, and the folder of such folders when it is left empty."""
    shutil.rmtree(run_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        Path(run_dir).parent.rmdir()


def _scheduler_notice(stderr_path: str | None) -> str:
    """The last line of a batch job's stderr in which the scheduler says why it ended ("" if none)."""
    try:
        lines = Path(stderr_path).read_text(errors="replace").splitlines()[-200:] if stderr_path else []
    except OSError:
        return ""
    said = [line.strip() for line in lines if any(word in line for word in SCHEDULER_NOTICES)]
    # Slurm writes "*** STEP 12.0 ON n1 CANCELLED ..." for the job step and, when it gets to it,
    # "*** JOB 12 ON n1 CANCELLED ..." for the job: the job's line says more, the step's may be all there is yet
    said = [line for line in said if "*** JOB" in line] or said
    return said[-1][:300] if said else ""

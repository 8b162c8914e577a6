"""Run trials in this process: a thread per job in flight, each starting its MPI job itself.

No Parsl, no workers: what a login node or a test needs. On an interrupt
the running MPI jobs are killed (:func:`iobo.launch.kill_running_jobs`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from iobo.errors import ConfigError
from iobo.launch import KernelJob, kill_running_jobs, run_kernel
from iobo.runners.base import Runner


class LocalRunner(Runner):
    """Runs up to ``max_workers`` kernel jobs at once from threads of this process."""

    def __init__(self, max_workers: int = 1) -> None:
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigError(f"LocalRunner max_workers must be a positive integer; got {max_workers!r}")
        self.max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> "LocalRunner":
        self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="iobo-trial")
        return self

    def submit(self, job: KernelJob) -> Future:
        if self._pool is None:
            raise ConfigError("LocalRunner.submit was called outside its `with` block: use `with LocalRunner() as r:`")
        return self._pool.submit(run_kernel, job)

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            kill_running_jobs()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

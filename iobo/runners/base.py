"""The runner interface: where a trial's kernel job runs (Parsl, Ray, this process).

A :class:`Runner` is a context manager that submits :class:`iobo.launch.KernelJob`
objects and returns a future per job; the tuner's loop waits on those
futures and tells Optuna the result (:func:`iobo.launch.run_kernel`'s dict)
or the failure (:class:`iobo.errors.KernelError`, :class:`iobo.errors.KernelPruned`).
"""

from __future__ import annotations

import abc
from concurrent.futures import Future

from iobo.launch import KernelJob


class Runner(abc.ABC):
    """Submits kernel jobs; ``with runner:`` owns whatever it starts (workers, pools).

    ``borrowed`` is True, once entered, when the runner uses workers someone
    else started and keeps (a Parsl DataFlowKernel the caller loaded): they
    must outlive the run, so the tuner's watchdog leaves them alone.
    ``kept_logs``, once the block has ended: the folder where the runner kept
    the logs of what it started, for a look after a failure (None: none kept).
    """

    borrowed: bool = False
    kept_logs: str | None = None

    @abc.abstractmethod
    def submit(self, job: KernelJob) -> Future:
        """Start ``job``; the future resolves to :func:`iobo.launch.run_kernel`'s result dict or raises its error."""

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        return None

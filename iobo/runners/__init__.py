"""Where trials run: a :class:`Runner` per engine.

- :class:`iobo.runners.parsl.ParslRunner`: Parsl apps (the default; a site
  config places them on a cluster);
- :class:`iobo.runners.local.LocalRunner`: threads of this process;
- Ray Tune drives its own loop: :mod:`iobo.integrations.ray`.

``RUNNERS`` names them for the command line (``iobo tune --runner``).
"""

from iobo.runners.base import Runner

RUNNERS = ("parsl", "local")

__all__ = ["RUNNERS", "Runner", "make_runner"]


def make_runner(name: str, max_workers: int = 1, parsl_config=None, run_dir: str = "runinfo") -> Runner:
    """The runner called ``name`` (one of ``RUNNERS``) for ``max_workers`` trials in flight."""
    from iobo.errors import ConfigError

    if name == "parsl":
        from iobo.runners.parsl import ParslRunner

        return ParslRunner(parsl_config, max_workers, run_dir)
    if name == "local":
        if parsl_config is not None:
            raise ConfigError("a Parsl config was given with runner 'local', which does not use Parsl: "
                              "drop --parsl-config or use --runner parsl")
        from iobo.runners.local import LocalRunner

        return LocalRunner(max_workers)
    raise ConfigError(f"runner {name!r} is unknown; allowed: {', '.join(RUNNERS)}")

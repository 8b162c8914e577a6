"""``iobo importance``: which parameters matter, with uncertainty; the ranking is stored on the study."""

from __future__ import annotations

import functools

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("importance", help="rank the parameters by impact; store the ranking on the study")
    common.add_storage_args(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--all-views", action="store_true",
                   help="also print every view (fANOVA, GP lengthscales...) side by side; slower")


def run(args) -> int:
    from iobo import importance as imp

    with _Worker(args.storage, args.study) as worker:
        imp.import_gp_libraries()  # while the worker opens the study
        study = worker.study()
        before = _attrs(study)
        surrogate = imp.fit_surrogate(study)
        secondary = worker.ped_anova()
        importance = imp.robust_importance(study, seed=args.seed, surrogate=surrogate, ped_anova=secondary)
        methods = imp.METHODS if args.all_views else tuple(m for m in imp.METHODS if m != "fanova")
        ranking = imp.rank_parameters(study, args.seed, methods, surrogate, ped_anova=secondary)
        if importance is None:
            print(imp.ranking_text(ranking), flush=True)
        else:
            print(importance.text(), flush=True)
            if args.all_views:
                print()
                print(imp.ranking_text(ranking), flush=True)
        if ranking:
            imp.save_ranking(study, ranking)
        worker.store(*_changed(before, _attrs(study)))
    return 0


class _Worker:
    """A forked process that reads and writes the study while this one imports torch and fits the GP.

    Opening a study imports SQLAlchemy and reads every trial (about 1 s);
    meanwhile this process imports torch and gpytorch (about 1.5 s). The
    worker loads the study, hands this process an in-memory copy
    (``optuna.copy_study``: the same trials, numbers and attrs), computes
    PED-ANOVA, and at the end writes the attrs this process set on the copy
    (the kept GP fit, the ranking and its figure) to the real study
    (``experiments/results/importance-time.txt``). Forked before torch is
    loaded; without ``fork`` (not Linux) the study is used here directly.
    """

    def __init__(self, storage: str, name: str | None) -> None:
        import multiprocessing

        self._where = (storage, name)
        self._pool = None
        if "fork" in multiprocessing.get_all_start_methods():
            self._pool = multiprocessing.get_context("fork").Pool(1)
            self._copy = self._pool.apply_async(_in_memory_copy, self._where)
            self._ped_anova = self._pool.apply_async(_ped_anova_of, (*self._where, True))

    def study(self):
        return self._copy.get() if self._pool else _real_study(*self._where)

    def ped_anova(self):
        return self._ped_anova.get() if self._pool else _ped_anova_of(*self._where)

    def store(self, user_attrs: dict, system_attrs: dict) -> None:
        """Set these attrs on the real study (already done when it was used here directly)."""
        if self._pool:
            self._pool.apply(_store, (*self._where, user_attrs, system_attrs))

    def __enter__(self) -> "_Worker":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
        _real_study.cache_clear()  # the next command in this process (a test's) opens the study anew


def _attrs(study) -> tuple[dict, dict]:
    """(user attrs, system attrs) of ``study``."""
    from iobo import _compat

    return dict(study.user_attrs), _compat.study_system_attrs(study)


def _changed(before: tuple[dict, dict], after: tuple[dict, dict]) -> tuple[dict, dict]:
    """The user and system attrs that ``after`` sets anew or to another value than ``before``."""
    return tuple({k: v for k, v in now.items() if k not in was or was[k] != v}
                 for was, now in zip(before, after))


@functools.lru_cache(maxsize=1)
def _real_study(storage: str, name: str | None):
    """The study in its storage, opened once per process (the worker's tasks share it)."""
    return common.load_study(storage, name)


def _in_memory_copy(storage: str, name: str | None):
    from iobo import _compat

    return _compat.in_memory_copy(_real_study(storage, name))


def _ped_anova_of(storage: str, name: str | None, in_worker: bool = False):
    """PED-ANOVA of the study. In the forked worker, which computes nothing else, Optuna's evaluator is imported
    without scikit-learn (1.5-2 s of CPU that this process's GP fit would compete with on 2 cores)."""
    from iobo import _compat
    from iobo.importance import param_importances

    evaluator_class = _compat.import_ped_anova_without_scikit_learn() if in_worker else None
    return param_importances(_real_study(storage, name), evaluator_class)


def _store(storage: str, name: str | None, user_attrs: dict, system_attrs: dict) -> None:
    from iobo import _compat

    study = _real_study(storage, name)
    for key, value in user_attrs.items():
        study.set_user_attr(key, value)
    for key, value in system_attrs.items():
        _compat.set_study_system_attr(study, key, value)

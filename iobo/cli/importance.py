"""``iobo importance``: which parameters matter, with uncertainty; the ranking is stored on the study."""

from __future__ import annotations

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("importance", help="rank the parameters by impact; store the ranking on the study")
    common.add_storage_args(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--all-views", action="store_true",
                   help="also print every view (fANOVA, GP lengthscales...) side by side; slower")


def run(args) -> int:
    from iobo.importance import METHODS, fit_surrogate, rank_parameters, ranking_text, robust_importance, save_ranking

    with _PedAnova(args.storage, args.study) as worker:
        study = common.load_study(args.storage, args.study)
        surrogate = fit_surrogate(study)
        secondary = worker.result()
        importance = robust_importance(study, seed=args.seed, surrogate=surrogate, ped_anova=secondary)
        methods = METHODS if args.all_views else tuple(m for m in METHODS if m != "fanova")
        ranking = rank_parameters(study, args.seed, methods, surrogate, ped_anova=secondary)
        if importance is None:
            print(ranking_text(ranking), flush=True)
        else:
            print(importance.text(), flush=True)
            if args.all_views:
                print()
                print(ranking_text(ranking), flush=True)
        if ranking:
            save_ranking(study, ranking)
    return 0


class _PedAnova:
    """PED-ANOVA (:func:`iobo.importance.param_importances`) in a forked process, while this one fits the GP.

    Its import loads Optuna's importance package and, through it,
    scikit-learn (about 1.5 s); this process loads torch (about 1.5 s) and
    fits the GP meanwhile (``iobo importance`` on 100 trials:
    ``experiments/results/importance-time.txt``). Forked before torch is
    loaded; without ``fork`` (not Linux) it runs here when asked for.
    """

    def __init__(self, storage: str, name: str | None) -> None:
        import multiprocessing

        self._where = (storage, name)
        self._pool = None
        if "fork" in multiprocessing.get_all_start_methods():
            self._pool = multiprocessing.get_context("fork").Pool(1)
            self._pending = self._pool.apply_async(_ped_anova_of, self._where)

    def result(self):
        return self._pending.get() if self._pool else _ped_anova_of(*self._where)

    def __enter__(self) -> "_PedAnova":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()


def _ped_anova_of(storage: str, name: str | None):
    from iobo.importance import param_importances

    return param_importances(common.load_study(storage, name))

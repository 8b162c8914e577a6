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
    from iobo.importance import METHODS, fit_surrogate, rank_parameters, ranking_text, robust_importance

    with _Worker(args.storage, args.study) as worker:
        study = common.load_study(args.storage, args.study)
        surrogate = fit_surrogate(study)
        secondary = worker.ped_anova()
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
            worker.save_ranking(ranking)
    return 0


class _Worker:
    """A forked process for the two slow imports the GP does not need, so that they overlap its work.

    PED-ANOVA needs Optuna's importance package, whose import loads
    scikit-learn (about 1.5 s); storing the ranking's dashboard figure needs
    plotly and optuna-dashboard (about 1.5 s); this process needs torch
    (about 1.5 s) and the GP. The worker computes PED-ANOVA, then imports
    the plotting while the GP works, then stores the ranking
    (:func:`iobo.importance.save_ranking`) when given it (``iobo importance``
    on 100 trials: ``experiments/results/importance-time.txt``). Forked before
    torch is loaded; without ``fork`` (not Linux) everything runs here.
    """

    def __init__(self, storage: str, name: str | None) -> None:
        import multiprocessing

        self._where = (storage, name)
        self._pool = None
        if "fork" in multiprocessing.get_all_start_methods():
            self._pool = multiprocessing.get_context("fork").Pool(1)
            self._ped_anova = self._pool.apply_async(_ped_anova_of, self._where)
            self._pool.apply_async(_import_plotting)

    def ped_anova(self):
        return self._ped_anova.get() if self._pool else _ped_anova_of(*self._where)

    def save_ranking(self, ranking) -> None:
        if self._pool:
            self._pool.apply(_save_ranking_of, (*self._where, ranking))
        else:
            _save_ranking_of(*self._where, ranking)

    def __enter__(self) -> "_Worker":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is None:
            return
        if exc[0] is None:
            self._pool.close()  # let a started save finish
        else:
            self._pool.terminate()
        self._pool.join()


def _ped_anova_of(storage: str, name: str | None):
    from iobo.importance import param_importances

    return param_importances(common.load_study(storage, name))


def _import_plotting() -> None:
    import optuna_dashboard  # noqa: F401
    import plotly.graph_objects  # noqa: F401


def _save_ranking_of(storage: str, name: str | None, ranking) -> None:
    from iobo.importance import save_ranking

    save_ranking(common.load_study(storage, name), ranking)

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

    ped_anova = _ped_anova_meanwhile(args.storage, args.study)
    study = common.load_study(args.storage, args.study)
    surrogate = fit_surrogate(study)
    secondary = ped_anova()
    importance = robust_importance(study, seed=args.seed, surrogate=surrogate, ped_anova=secondary)
    methods = METHODS if args.all_views else tuple(m for m in METHODS if m != "fanova")
    ranking = rank_parameters(study, args.seed, methods, surrogate, ped_anova=secondary)
    if importance is None:
        print(ranking_text(ranking))
    else:
        print(importance.text())
        if args.all_views:
            print()
            print(ranking_text(ranking))
    if ranking:
        save_ranking(study, ranking)
    return 0


def _ped_anova_meanwhile(storage: str, name: str | None):
    """Start PED-ANOVA of the study in a forked process and return a function that waits for its result.

    PED-ANOVA needs Optuna's importance package, whose import loads
    scikit-learn (about 1.5 s), while the GP needs torch (about 1.5 s) and
    its fit: in two processes they overlap (``iobo importance`` on 100 trials:
    ``experiments/results/importance-time.txt``). Forked before torch is
    loaded; without ``fork`` (not Linux) it runs in this process.
    """
    import multiprocessing

    from iobo.importance import param_importances

    if "fork" not in multiprocessing.get_all_start_methods():
        return lambda: param_importances(common.load_study(storage, name))
    pool = multiprocessing.get_context("fork").Pool(1)
    pending = pool.apply_async(_ped_anova_of, (storage, name))
    pool.close()

    def result():
        try:
            return pending.get()
        finally:
            pool.join()

    return result


def _ped_anova_of(storage: str, name: str | None):
    from iobo.importance import param_importances

    return param_importances(common.load_study(storage, name))

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

    study = common.load_study(args.storage, args.study)
    surrogate = fit_surrogate(study)
    importance = robust_importance(study, seed=args.seed, surrogate=surrogate)
    methods = METHODS if args.all_views else tuple(m for m in METHODS if m != "fanova")
    ranking = rank_parameters(study, args.seed, methods, surrogate)
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

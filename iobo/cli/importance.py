"""``iobo importance``: rank a study's parameters by impact and store the ranking on the study."""

from __future__ import annotations

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("importance", help="rank the parameters by impact; store the ranking on the study")
    common.add_storage_args(p)
    p.add_argument("--seed", type=int, default=0)


def run(args) -> int:
    from iobo.importance import rank_parameters, ranking_text, save_ranking

    study = common.load_study(args.storage, args.study)
    ranking = rank_parameters(study, args.seed)
    print(ranking_text(ranking))
    if ranking:
        save_ranking(study, ranking)
    return 0

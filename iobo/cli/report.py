"""``iobo report``: default vs best, speedup, RoTI; notes and figures for the dashboard; HTML with --out."""

from __future__ import annotations

import sys

from iobo.cli import common


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="default vs best, speedup, RoTI; notes and figures for the dashboard")
    common.add_storage_args(p)
    p.add_argument("--out", metavar="DIR", help="also write report.html, report.json and PNG figures into DIR")


def run(args) -> int:
    from iobo.integrations.dashboard import annotate
    from iobo.report import build_report, write_report

    study = common.load_study(args.storage, args.study)
    print(build_report(study).text())
    annotate(study)
    if args.out:
        for path in write_report(study, args.out):
            print(f"wrote {path}", file=sys.stderr)
    return 0

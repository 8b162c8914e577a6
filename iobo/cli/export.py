"""``iobo export``: the best configuration in a production format (JSON, ROMIO hints, env, H5Tuner XML, lfs)."""

from __future__ import annotations

import sys
from pathlib import Path

from iobo.cli import common


def add_parser(sub) -> None:
    from iobo.config import EXPORT_FORMATS

    p = sub.add_parser("export", help="export the best configuration for production")
    common.add_storage_args(p)
    p.add_argument("--format", choices=EXPORT_FORMATS, default="json")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")
    p.add_argument("--hints-path", default="romio-hints", help="ROMIO_HINTS path written by --format env")
    p.add_argument("--full", action="store_true",
                   help="the best trial's whole configuration (without knobs that did not apply), not the minimal one")


def run(args) -> int:
    study = common.load_study(args.storage, args.study)
    _, chosen, config = common.chosen_config(study, args.full)
    print(f"exporting {chosen.how}", file=sys.stderr)
    text = config.export(args.format, args.hints_path)
    if args.format == "env" and "command" in study.user_attrs:  # the program's knobs: variables, fragments
        text = common.study_spec(study).env_text(config, args.hints_path)
    if config.is_default():
        print("iobo export: nothing to export: the recommendation is the system default", file=sys.stderr)
    elif not config.carried(args.format):
        print(f"iobo export: nothing to export in --format {args.format}: it carries none of the recommended changes "
              f"({', '.join(config.changed())}); --format json or env does", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.format} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0

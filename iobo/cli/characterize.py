"""``iobo characterize LOG``: what a Darshan log says about an application's I/O."""

from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("characterize", help="characterise the I/O of a Darshan log")
    p.add_argument("log", help="a Darshan log file (*.darshan)")
    p.add_argument("--json", action="store_true", help="print the characterisation as JSON")


def run(args) -> int:
    from iobo.integrations.darshan import characterize, format_characterization

    found = characterize(args.log)
    print(json.dumps(found.as_dict(), indent=2) if args.json else format_characterization(found))
    return 0

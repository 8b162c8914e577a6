"""``iobo characterize LOG``: what a Darshan log says about an application's I/O (``--suggest``: what to try)."""

from __future__ import annotations

import json


def add_parser(sub) -> None:
    p = sub.add_parser("characterize", help="characterise the I/O of a Darshan log")
    p.add_argument("log", help="a Darshan log file (*.darshan)")
    p.add_argument("--json", action="store_true", help="print the characterisation as JSON")
    p.add_argument("--suggest", action="store_true",
                   help="also print the settings published rules (Drishti, SmartIO) suggest from it, each with its "
                        "evidence (`iobo tune --from-darshan LOG` runs them first)")


def run(args) -> int:
    from iobo.integrations.darshan import characterize, format_characterization

    found = characterize(args.log)
    if not args.suggest:
        print(json.dumps(found.as_dict(), indent=2) if args.json else format_characterization(found))
        return 0
    from iobo.integrations.darshan_rules import format_suggestions, suggest

    suggestions = suggest(found)
    if args.json:
        print(json.dumps({"characterization": found.as_dict(),
                          "suggestions": [s.as_dict() for s in suggestions]}, indent=2))
    else:
        print(format_characterization(found))
        print()
        print(format_suggestions(suggestions))
    return 0

"""``iobo dashboard [URL]``: serve optuna-dashboard on a study storage."""

from __future__ import annotations

from iobo.storage import DEFAULT_STORAGE


def add_parser(sub) -> None:
    p = sub.add_parser("dashboard", help="serve optuna-dashboard on a study storage")
    p.add_argument("storage_url", nargs="?", default=DEFAULT_STORAGE, help="study storage URL")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)


def run(args) -> int:
    from iobo.integrations.dashboard import serve

    serve(args.storage_url, host=args.host, port=args.port)
    return 0

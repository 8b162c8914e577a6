"""Serve optuna-dashboard on a study storage (``iobo dashboard URL``)."""

from __future__ import annotations


def command(storage: str, host: str = "127.0.0.1", port: int = 8080) -> str:
    """The shell command that opens optuna-dashboard on ``storage``."""
    return f"iobo dashboard {storage} --host {host} --port {port}"


def serve(storage: str, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Block serving the dashboard until interrupted."""
    from optuna_dashboard import run_server

    print(f"optuna-dashboard on http://{host}:{port}/ for {storage} (Ctrl-C stops it)", flush=True)
    run_server(storage, host=host, port=port)

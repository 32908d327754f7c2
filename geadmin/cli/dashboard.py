"""`geadmin dashboard`: the dashboard alone (the compose `dashboard` service runs this).

Before Streamlit starts it settles sign-in for the bind address, as `geadmin up` does: a
public bind with no sign-in configured is refused, and with GEADMIN_AUTH=local and no users
file the first admin is created, its password written to a 0600 file in the workspace
(`initial-admin-password`) and that file's path printed to this log, never the password."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from geadmin import settings
from geadmin.access import bootstrap
from geadmin.access.startup import dashboard_sign_in
from geadmin.access.users import UsersFile, default_users_file
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.target import default_server, live_stack


def run(args: argparse.Namespace) -> int:
    home = settings.home()
    host = settings.get("HOST", args.host)
    decision = dashboard_sign_in(host, Path.cwd(), home)
    if decision.bootstrap:
        first = bootstrap.create_first_admin(UsersFile(default_users_file(home)), home)
        if first is not None:
            print(first.announcement(), flush=True)
    # The same Triton every command picks: GEADMIN_TRITON_URL, else the running stack of this
    # workspace (its ports, not 8000), else the default address.
    triton_url, chosen_by = default_server(live_stack(home))
    print(f"dashboard for Triton {triton_url} ({chosen_by})", flush=True)
    process = DashboardProcess(triton_url=triton_url, home=home, host=host,
                               port=settings.port("dashboard", args.port))
    argv = process.command()
    os.execvpe(argv[0], argv, process.environment())  # Streamlit becomes this process (signals, pid 1)
    return 0  # not reached


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("dashboard", help="run the dashboard alone (e.g. in a container)",
                                   description=__doc__)
    parser.add_argument("--host", default=None, help="address to bind (env GEADMIN_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None,
                        help="port (env GEADMIN_DASHBOARD_PORT, default 8501)")
    parser.set_defaults(func=run)

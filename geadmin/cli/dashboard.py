"""`geadmin dashboard`: the dashboard alone (the compose `dashboard` service runs this).

Before Streamlit starts it settles sign-in for the bind address, as `geadmin up` does: a
public bind with no sign-in configured is refused, and with GEADMIN_AUTH=local and no users
file the first admin is created, its password written to a 0600 file in the workspace
(`initial-admin-password`) and that file's path printed to this log, never the password.
With no users configured on a loopback bind, a new sign-in token is written to the workspace
(`dashboard-token`, 0600) and the link that carries it printed, Jupyter's way;
`geadmin dashboard --print-url` prints that link again, read from the workspace."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from geadmin import settings
from geadmin.access import bootstrap, token
from geadmin.access.identity import Mode
from geadmin.access.startup import dashboard_sign_in
from geadmin.access.users import UsersFile, default_users_file
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import SignInTokenError
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.processes import client_url_host
from geadmin.stack.target import default_server, live_stack


def run(args: argparse.Namespace) -> int:
    home = settings.home()
    host = settings.HOST.get(args.host)
    if args.print_url:
        return print_url(home, f"http://{client_url_host(host)}:{settings.port('dashboard', args.port)}")
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
    if decision.mode is Mode.TOKEN:
        print(f"Dashboard {token.sign_in_url(process.url, token.new_token(home))}  (the token signs you in)",
              flush=True)
    argv = process.command()
    os.execvpe(argv[0], argv, process.environment())  # Streamlit becomes this process (signals, pid 1)
    return ExitCode.OK  # not reached


def print_url(home: Path, default_url: str) -> int:
    """The link with the workspace's sign-in token, for the running stack's dashboard when
    there is one (else `default_url`); SignInTokenError when the workspace has no token."""
    value = token.read_token(home)
    if value is None:
        raise SignInTokenError(f"no dashboard sign-in token in {home}: the dashboard there signs in with "
                               f"users or "
                          "OIDC, runs with GEADMIN_AUTH=open, or was never started with `geadmin up` or "
                          "`geadmin dashboard` (give the workspace with GEADMIN_HOME)")
    stack = live_stack(home)
    print(token.sign_in_url(stack.dashboard_url if stack and stack.dashboard_url else default_url, value))
    return ExitCode.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("dashboard", help="run the dashboard alone (e.g. in a container)",
                                   description=__doc__)
    parser.add_argument("--host", default=None, help="address to bind (env GEADMIN_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None,
                        help="port (env GEADMIN_DASHBOARD_PORT, default 8501)")
    parser.add_argument("--print-url", action="store_true",
                        help="print the link with the sign-in token of the workspace's dashboard (the one "
                        "`geadmin up` printed) and exit")
    parser.set_defaults(func=run)

"""`geadmin users add|passwd|role|remove|list`: the dashboard's local users file.

Passwords are read from the terminal (twice), or from standard input with --password-stdin
(one line) for scripts; they never appear in the command line or the output."""

from __future__ import annotations

import argparse
import getpass
import json
import sys

from geadmin.access import guard
from geadmin.access.roles import Role
from geadmin.access.users import UsersFile
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import UserAccountError


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    if not sys.stdin.isatty():
        raise UserAccountError("no terminal to ask for the password: pass --password-stdin and pipe it in")
    first = getpass.getpass("New password: ")
    if getpass.getpass("Again: ") != first:
        raise UserAccountError("the two passwords differ: nothing changed")
    return first


def _role(text: str) -> Role:
    try:
        return Role.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def run_add(args: argparse.Namespace) -> int:
    users = UsersFile()
    user = users.add(args.name, args.role, _password(args), must_change=args.must_change,
                     auth=guard.os_user())
    print(f"added {user.name} ({user.role.label}) to {users.path}")
    return ExitCode.OK


def run_passwd(args: argparse.Namespace) -> int:
    users = UsersFile()
    user = users.set_password(args.name, _password(args), auth=guard.os_user())
    print(f"changed the password of {user.name} in {users.path}; their dashboard sessions end at "
          "their next click, and they choose a new password at their next sign-in")
    return ExitCode.OK


def run_role(args: argparse.Namespace) -> int:
    users = UsersFile()
    user = users.set_role(args.name, args.role, auth=guard.os_user())
    print(f"{user.name} is now {user.role.label} ({users.path}); a signed-in dashboard session has "
          "the new role at its next click")
    return ExitCode.OK


def run_remove(args: argparse.Namespace) -> int:
    users = UsersFile()
    users.remove(args.name, auth=guard.os_user())
    print(f"removed {args.name} from {users.path}; their dashboard sessions end at their next click")
    return ExitCode.OK


def run_list(args: argparse.Namespace) -> int:
    users = UsersFile()
    found = sorted(users.load().values(), key=lambda u: u.name)
    if args.json:
        print(json.dumps([{"name": u.name, "role": u.role.label, "must_change": u.must_change}
                          for u in found], indent=2))
        return ExitCode.OK
    if not found:
        print(f"no users in {users.path}: add one with `geadmin users add NAME --role admin`")
    for user in found:
        print(f"{user.name:<24} {user.role.label:<9}{'  (must change password)' if user.must_change else ''}")
    return ExitCode.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "users", help="manage the dashboard's local users (GEADMIN_USERS_FILE)", description=__doc__)
    actions = parser.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a user")
    add.add_argument("name")
    add.add_argument("--role", type=_role, required=True, help="viewer, operator or admin")
    add.add_argument("--must-change", action="store_true", help="ask for a new password at first sign-in")
    add.set_defaults(func=run_add)
    passwd = actions.add_parser("passwd", help="set a user's password")
    passwd.add_argument("name")
    passwd.set_defaults(func=run_passwd)
    for command in (add, passwd):
        command.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    role = actions.add_parser("role", help="change a user's role")
    role.add_argument("name")
    role.add_argument("role", type=_role, help="viewer, operator or admin")
    role.set_defaults(func=run_role)
    remove = actions.add_parser("remove", help="remove a user")
    remove.add_argument("name")
    remove.set_defaults(func=run_remove)
    listing = actions.add_parser("list", help="list the users and their roles (never the hashes)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=run_list)

"""The compose stack's secure default: with GEADMIN_AUTH=local and no users file yet, the
dashboard creates an `admin` with a random password at first start, writes it to a 0600 file
in the workspace (never to a log: the log names the file), and asks for a new password at the
first sign-in, after which the file goes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin.access import guard
from geadmin.access.roles import Role
from geadmin.access.users import UsersFile, random_password
from geadmin.audit import Origin
from geadmin.errors import ConfigError, UserAccountError
from geadmin.repository.atomic import private_directory, write_secret_atomically

FIRST_ADMIN = "admin"
PASSWORD_FILE = "initial-admin-password"


@dataclass(frozen=True)
class FirstAdmin:
    name: str
    password: str
    password_file: Path

    def announcement(self) -> str:
        """For the log: where the password is, never the password (logs are copied around)."""
        return (f"geadmin: created the first dashboard user {self.name!r} with a random password; read it "
                f"with `cat {self.password_file}` (readable by this account only). Sign in as {self.name!r}: "
                "the password must be changed at the first sign-in, and the file is deleted then.")


def create_first_admin(users: UsersFile, home: Path) -> FirstAdmin | None:
    """The first admin, when the users file does not exist yet; None when it does (then the
    file is left alone, whoever wrote it)."""
    if users.exists():
        return None
    password = random_password()
    path = home / PASSWORD_FILE
    private_directory(home)  # the workspace: 0700
    write_secret_atomically(path, (password + "\n").encode())  # first: an unusable admin is worse
    try:
        users.add(FIRST_ADMIN, Role.ADMIN, password, must_change=True, auth=guard.os_user(Origin.LOCAL))
    except (ConfigError, UserAccountError):
        path.unlink(missing_ok=True)
        if users.exists():  # another process won the race: its admin stands
            return None
        raise
    return FirstAdmin(FIRST_ADMIN, password, path)


def forget_first_password(home: Path, changed: str) -> None:
    """Once the first admin changed their password, the file that holds the first one goes
    (another user's change leaves it: the first admin has not read it yet, perhaps)."""
    if changed == FIRST_ADMIN:
        (home / PASSWORD_FILE).unlink(missing_ok=True)

"""Authorizations for tests, issued by the real guard (geadmin.access.guard): core functions
that change a server, the repository, the stack or the users refuse to run without one."""

from __future__ import annotations

from geadmin.access import guard
from geadmin.access.guard import Authorization
from geadmin.access.identity import Identity, Mode
from geadmin.access.roles import Role
from geadmin.audit import Origin


def admin_auth(origin: Origin = Origin.CLI) -> Authorization:
    """What the CLI holds: the OS user, every action."""
    return guard.os_user(origin)


def auth_as(name: str, role: Role = Role.ADMIN) -> Authorization:
    """A signed-in dashboard user's (audited as `name`), with what `role` allows now."""
    return guard.for_identity(Identity(name, role, Mode.LOCAL))


def viewer_auth(name: str = "vera") -> Authorization:
    """A real authorization that covers no change (a viewer may only run test inference)."""
    return auth_as(name, Role.VIEWER)

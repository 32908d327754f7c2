"""The one guarded path: every mutation asks `authorize` for an `Authorization`, so the role
is checked and a refusal is audited with the person's name before anything happens.

The core holds the guard too: every function that changes a server, the repository, the
stack or the users takes `auth=` and calls `require(auth, GuardedAction.X)` first; without an
authorization covering X it raises `NotAuthorizedError` before touching anything, and the
audited "who" is the authorization's. Only this module issues authorizations (one built or
`dataclasses.replace`d anywhere else raises): `authorize` for a signed-in identity (the
pages: every action its role allows at that click, roles read again), `os_user` for the CLI
and `geadmin up` (the OS user who can run them owns the workspace: every action)."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from geadmin import audit
from geadmin.access.identity import Identity, Mode
from geadmin.access.roles import REQUIRED_ROLE, GuardedAction, Role
from geadmin.audit import Actor, Origin, Result
from geadmin.errors import AccessDeniedError, NotAuthorizedError, WorkspaceDatabaseError

_issuing = threading.local()  # set only while `_issue` runs: an Authorization made (or
# `dataclasses.replace`d) anywhere else is refused


@dataclass(frozen=True)
class Authorization:
    """Who may do which actions, issued by this module only (`authorize`, `for_identity`,
    `os_user`); core functions check it with `require`."""

    who: Actor
    role: Role
    actions: frozenset[GuardedAction]
    issued_at: float
    mode: Mode | None = None  # the sign-in it was issued for; None: the OS user's (CLI, `geadmin up`)

    def __post_init__(self) -> None:
        if not getattr(_issuing, "active", False):
            raise NotAuthorizedError("an authorization is issued by geadmin.access.guard only "
                                     "(authorize, for_identity, os_user)")


def _issue(who: Actor, role: Role, actions: frozenset[GuardedAction],
           mode: Mode | None = None) -> Authorization:
    _issuing.active = True
    try:
        return Authorization(who, role, actions, time.time(), mode)
    finally:
        _issuing.active = False


def require(auth: object, action: GuardedAction) -> Actor:
    """The audited actor of `auth` when it covers `action`; NotAuthorizedError otherwise
    (no authorization, something else passed as one, or one without `action`)."""
    if not isinstance(auth, Authorization):
        raise NotAuthorizedError(f"not authorized: {action.value} needs an authorization from the access "
                                 "layer (geadmin.access.guard: the signed-in user's, or the OS user's for "
                                 "the CLI)")
    if action not in auth.actions:
        raise NotAuthorizedError(f"not authorized: {auth.who.name} ({auth.role.label}) holds no "
                                 f"authorization for {action.value}")
    return auth.who


def for_identity(identity: Identity) -> Authorization:
    """Every action `identity`'s role allows now (none while it must change its password)."""
    return _issue(identity.actor(), identity.role,
                  frozenset(a for a in GuardedAction if permission(identity, a)[0]), identity.mode)


def os_user(origin: Origin = Origin.CLI) -> Authorization:
    """The CLI's and `geadmin up`'s: the OS user running geadmin owns the workspace, the
    repository and the users file, so it may do every action (audited under its name)."""
    return _issue(Actor.os_user(origin), Role.ADMIN, frozenset(GuardedAction))


def permission(identity: Identity, action: GuardedAction) -> tuple[bool, str]:
    """(allowed, why not) — pages disable a control with the reason as its help."""
    if identity.must_change:
        return False, "set a new password first (sidebar)"
    needed = REQUIRED_ROLE[action]
    if identity.role < needed:
        return False, (f"{action.value} needs the {needed.label} role; {identity.name} is "
                       f"{identity.role.label}: ask an admin")
    return True, ""


def authorize(identity: Identity, action: GuardedAction, *, model: str = "", server: str = "",
              home: Path | None = None) -> Authorization:
    """The authorization to pass to the core function as `auth=` (every action the role allows
    now: a create also loads); AccessDeniedError (audited) when `action` is not allowed."""
    allowed, reason = permission(identity, action)
    if allowed:
        return for_identity(identity)
    with contextlib.suppress(WorkspaceDatabaseError):  # the refusal stands without its row too
        audit.record(action.value, model, Result.REFUSED, actor=identity.actor(), server=server,
                     message=f"not allowed: {reason}", home=home)
    raise AccessDeniedError(f"not allowed: {reason}")

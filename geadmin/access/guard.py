"""The one guarded path: every mutation asks `authorize` for its actor, so the role is
checked and a refusal is audited with the person's name before anything happens."""

from __future__ import annotations

import contextlib
from pathlib import Path

from geadmin import audit
from geadmin.access.identity import Identity
from geadmin.access.roles import REQUIRED_ROLE, Action
from geadmin.audit import Actor, Result
from geadmin.errors import AccessDeniedError, WorkspaceDatabaseError


def permission(identity: Identity, action: Action) -> tuple[bool, str]:
    """(allowed, why not) — pages disable a control with the reason as its help."""
    if identity.must_change:
        return False, "set a new password first (sidebar)"
    needed = REQUIRED_ROLE[action]
    if identity.role < needed:
        return False, (f"{action.value} needs the {needed.label} role; {identity.name} is "
                       f"{identity.role.label}: ask an admin")
    return True, ""


def authorize(identity: Identity, action: Action, *, model: str = "", server: str = "",
              home: Path | None = None) -> Actor:
    """The actor to pass to the ops function; AccessDeniedError (audited) when not allowed."""
    allowed, reason = permission(identity, action)
    if allowed:
        return identity.actor()
    with contextlib.suppress(WorkspaceDatabaseError):  # the refusal stands without its row too
        audit.record(action.value, model, Result.REFUSED, actor=identity.actor(), server=server,
                     message=f"not allowed: {reason}", home=home)
    raise AccessDeniedError(f"not allowed: {reason}")

"""Sign-in, roles, user accounts and authorizations (geadmin.access)."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class AccessError(GeAdminError):
    """Sign-in and roles."""


class SignInError(AccessError):
    """Unknown user or wrong password; the message never says which."""


class SignInRateLimitedError(SignInError):
    """Too many failed sign-ins for one user; `retry_after_s` says when to try again."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SignInBusyError(SignInError):
    """Every password-check slot is taken (each argon2 check holds 64 MiB): try again shortly."""


class SignInTokenError(AccessError):
    """The dashboard's one-time sign-in token is missing, unreadable, or not one geadmin wrote:
    start the dashboard again to write a new one."""


class SessionExpiredError(AccessError):
    """Idle past GEADMIN_SESSION_IDLE_MIN, past GEADMIN_SESSION_MAX_H, or its user removed or re-keyed."""


class AccessDeniedError(AccessError):
    """The signed-in user's role may not perform the action."""


class NotAuthorizedError(AccessError):
    """A core change (server, repository, stack, users) called without an authorization from
    the access layer (`geadmin.access.guard`), or with one that does not cover the action."""


class UserAccountError(AccessError):
    """A user account change refused: a name or password geadmin does not accept, a user that
    exists already or does not exist (`geadmin users`)."""

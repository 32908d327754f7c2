"""Roles and the one table of guarded actions (a test fails when a page shows an action that
is not in it)."""

from __future__ import annotations

import enum


class Role(enum.IntEnum):
    """Ordered: each role can do everything the ones below it can."""

    VIEWER = 1  # read everything, run test inference
    OPERATOR = 2  # load, unload, reload, apply and roll back configs, create models, load tests
    ADMIN = 3  # stack actions (restart, stop, start, Triton log level), user management, uploading
    # code into a model (model.py, shared libraries: it runs as Triton's user)

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls[text.strip().upper()]
        except KeyError as exc:
            raise ValueError(f"{text!r} is not a role: use viewer, operator or admin") from exc

    @property
    def label(self) -> str:
        return self.name.lower()


class GuardedAction(str, enum.Enum):
    INFER = "infer"
    LOAD = "load"
    UNLOAD = "unload"
    RELOAD = "reload"
    APPLY = "apply"
    ROLLBACK = "rollback"
    CREATE = "create"
    UPLOAD_CODE = "upload_code"  # a new model with uploaded code (model.py, .so): runs as Triton
    BENCH = "bench"  # a load test puts real load on the server
    RESTART = "restart"
    STOP = "stop"
    START = "start"
    LOG_LEVEL = "log_level"
    USERS = "users"
    TUNE = "tune"  # trial copies loaded beside the live model, and load on them
    MONITORING = "monitoring"  # a model's objectives and its probe's saved request: what alerts judge by


REQUIRED_ROLE: dict[GuardedAction, Role] = {
    GuardedAction.INFER: Role.VIEWER,
    GuardedAction.LOAD: Role.OPERATOR,
    GuardedAction.UNLOAD: Role.OPERATOR,
    GuardedAction.RELOAD: Role.OPERATOR,
    GuardedAction.APPLY: Role.OPERATOR,
    GuardedAction.ROLLBACK: Role.OPERATOR,
    GuardedAction.CREATE: Role.OPERATOR,
    GuardedAction.UPLOAD_CODE: Role.ADMIN,
    GuardedAction.BENCH: Role.OPERATOR,
    GuardedAction.RESTART: Role.ADMIN,
    GuardedAction.STOP: Role.ADMIN,
    GuardedAction.START: Role.ADMIN,
    GuardedAction.LOG_LEVEL: Role.ADMIN,
    GuardedAction.USERS: Role.ADMIN,
    GuardedAction.MONITORING: Role.OPERATOR,
    GuardedAction.TUNE: Role.OPERATOR,
}

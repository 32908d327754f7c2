"""The workspace: its SQLite ($GEADMIN_HOME/geadmin.db) and its lock files."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class WorkspaceDatabaseError(GeAdminError):
    """The workspace SQLite file cannot be opened, read, written or migrated."""


class DatabaseBusyError(WorkspaceDatabaseError):
    """Another process held the database longer than the busy timeout."""


class WorkspaceLockError(GeAdminError):
    """A lock file in the workspace ($GEADMIN_HOME/locks) cannot be created."""


class RunLockHeldError(GeAdminError):
    """A background run's lock is held: its process still runs it (geadmin.ops.runs)."""

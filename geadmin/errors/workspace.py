"""The workspace SQLite ($GEADMIN_HOME/geadmin.db)."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class WorkspaceDatabaseError(GeAdminError):
    """The workspace SQLite file cannot be opened, read, written or migrated."""


class DatabaseBusyError(WorkspaceDatabaseError):
    """Another process held the database longer than the busy timeout."""

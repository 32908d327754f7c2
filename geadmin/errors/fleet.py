"""Many servers as one (geadmin.fleet): discovery and rollouts."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class FleetError(GeAdminError):
    """Finding or changing many servers as one failed."""


class DiscoverySourceError(FleetError):
    """A discovery source did not answer; the message names the source and the fix."""

    def __init__(self, message: str, *, source: str = "") -> None:
        super().__init__(message)
        self.source = source


class RolloutBusyError(FleetError):
    """Another rollout of the same fleet is running."""


class RolloutRefusedError(FleetError):
    """A rollout refused before it changed anything: no servers, no repository, a version
    missing somewhere, a journal that cannot be resumed."""


class RolloutJournalError(FleetError):
    """A fleet rollout's journal in the audit log is missing or cannot be read."""

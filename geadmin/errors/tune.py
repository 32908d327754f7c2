"""The tuner (geadmin.ops.tune.search)."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class TuneError(GeAdminError):
    """A tuning run (geadmin.ops.tune.search) cannot start, go on, or be applied."""


class TuneBusyError(TuneError):
    """Another tuning run of the same model holds its lock, or a load test its server's: wait for it
    to end."""


class TuneRefusedError(TuneError):
    """The tuner refused before changing anything: a model it cannot tune, a run that does not
    match what is asked, a winner that may not be applied."""


class TuneRunNotFoundError(TuneError):
    """No tuning run with that number in this workspace."""

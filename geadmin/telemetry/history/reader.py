"""Where the charts' history comes from: the sampler's rows in the workspace database, or,
with `GEADMIN_PROMETHEUS_URL` set, a Prometheus server through PromQL range queries. Both
answer the same four reads with the same types, so the pages draw either without knowing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from geadmin import db, settings
from geadmin.telemetry.history import store as history
from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.store import Overview, Series


class HistoryReader(Protocol):
    @property
    def label(self) -> str: ...

    def sources(self) -> list[Overview]: ...

    def model_series(self, source: str, since: datetime, until: datetime | None = None,
                     models: Sequence[str] | None = None) -> list[Series]: ...

    def npu_sources(self) -> list[str]: ...

    def npu_series(self, source: str, since: datetime, until: datetime | None = None) -> list[Series]: ...


class WorkspaceHistory:
    """The sampler's history in the workspace's geadmin.db."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = home

    @property
    def label(self) -> str:
        return f"the sampler's history in {db.db_path(self.home)}"

    def sources(self) -> list[Overview]:
        return history.sources(home=self.home)

    def model_series(self, source: str, since: datetime, until: datetime | None = None,
                     models: Sequence[str] | None = None) -> list[Series]:
        return history.model_series(source, since, until, models, home=self.home)

    def npu_sources(self) -> list[str]:
        return history.npu_sources(home=self.home)

    def npu_series(self, source: str, since: datetime, until: datetime | None = None) -> list[Series]:
        return history.npu_series(source, since, until, home=self.home)


def open_history(home: Path | None = None) -> HistoryReader:
    """Prometheus when GEADMIN_PROMETHEUS_URL is set, else the workspace's sampler history."""
    url = settings.PROMETHEUS_URL.get()
    return PrometheusHistory(url) if url else WorkspaceHistory(home)

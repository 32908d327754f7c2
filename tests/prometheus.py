"""Moved to tests/support/prometheus.py; kept for imports in flight."""

from tests.support.prometheus import PrometheusServer

__all__ = ["PrometheusServer"]

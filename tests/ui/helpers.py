"""Moved to tests/support/apptest.py; kept for imports in flight."""

from tests.support.apptest import APP, TARGET_VARIABLES, button, isolate, point_at, run

__all__ = ["APP", "TARGET_VARIABLES", "button", "isolate", "point_at", "run"]

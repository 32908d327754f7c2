"""Moved to tests/support/ (processes, samples); kept for imports in flight. New code
imports from tests.support."""

from tests.support.processes import OutputCollector, alive, descendants, wait_for
from tests.support.samples import add_python_model, send_digits

__all__ = ["OutputCollector", "add_python_model", "alive", "descendants", "send_digits", "wait_for"]

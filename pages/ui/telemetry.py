"""Where the selected server's metrics are, for the pages that read them (NPUs, Overview)."""

from __future__ import annotations

from geadmin import settings
from geadmin.domain import Endpoint
from geadmin.stack.target import is_stack_server, live_stack
from pages.ui.context import selected_target

RANGES_MIN = {"5 min": 5, "15 min": 15, "1 h": 60, "6 h": 360, "24 h": 1440}  # history charts' ranges


def triton_metrics_url() -> tuple[str, bool]:
    """(the selected Triton's /metrics URL, given explicitly?): GEADMIN_TRITON_METRICS_URL,
    else the embedded stack's when the server is the stack's Triton, else the metrics port
    (GEADMIN_METRICS_PORT, 8002) on the server's host — as `geadmin npu` finds it."""
    given = settings.get("TRITON_METRICS_URL")
    if given:
        return str(given), True
    url = selected_target().spec.url
    stack = live_stack()
    if stack is not None and is_stack_server(url, stack):
        return stack.metrics_url, False
    host = Endpoint.parse(url).host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port('metrics')}/metrics", False

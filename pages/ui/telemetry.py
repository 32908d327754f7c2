"""Where the selected server's metrics are, for the pages that read them (NPUs, Overview)."""

from __future__ import annotations

from pages.ui.context import selected_target

RANGES_MIN = {"5 min": 5, "15 min": 15, "1 h": 60, "6 h": 360, "24 h": 1440}  # history charts' ranges
DEFAULT_RANGE = "15 min"


def triton_metrics_url() -> tuple[str, bool]:
    """(the selected Triton's /metrics URL, given by the user?): the one rule of
    geadmin.stack.target.server_urls, the same `geadmin npu` uses."""
    urls = selected_target().urls()
    return urls.metrics, "metrics" in urls.given

"""Recorded traffic written into a workspace's history through the real store, as the sampler
writes it: Triton-format /metrics pages, derived into windows (geadmin.telemetry.derive) and
stored (geadmin.telemetry.history.record.record_window)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from geadmin.telemetry.derive import derive
from geadmin.telemetry.history import record
from geadmin.telemetry.sources.scrape import Scrape, parse


def requests_page(ts: float, model: str, served: int) -> Scrape:
    """Triton's counters for `model` (version 1) after `served` one-row requests."""
    text = "".join(f"# TYPE {family} counter\n{family}{{model=\"{model}\",version=\"1\"}} {served}\n"
                   for family in ("nv_inference_request_success", "nv_inference_count",
                                  "nv_inference_exec_count"))
    text += f'# TYPE nv_inference_request_failure counter\n' \
            f'nv_inference_request_failure{{model="{model}",reason="BACKEND",version="1"}} 0\n'
    return parse(text, timestamp_s=ts)


def record_rates(home: Path, source: str, model: str, rates_rps: Sequence[float], *, start_s: float,
                 interval_s: float = 10.0) -> None:
    """One window of `interval_s` per rate, from `start_s` on."""
    served, pages = 0.0, [requests_page(start_s, model, 0)]
    for i, rate in enumerate(rates_rps, 1):
        served += rate * interval_s
        pages.append(requests_page(start_s + i * interval_s, model, round(served)))
    for before, after in itertools.pairwise(pages):
        record.record_window(derive(before, after), source, home=home)

"""A double of npu-exporter: its /metrics page with fault codes, served on loopback.

The page has npu-exporter's own families and labels (as recorded in
tests/unit/assets/telemetry/npu_exporter_synth.txt): `npu_chip_info_health_status` (1 healthy,
0 unhealthy), `npu_chip_info_error_code` (the first code, decimal; 0 when none) and the
numbered `npu_chip_info_error_code_N` series an exporter adds for each further code, and the
HBM figures in MB.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.http_doubles import serve


@dataclass(frozen=True)
class ChipState:
    healthy: bool = True
    codes: Sequence[int] = ()
    hbm_used_mb: int = 3000
    hbm_total_mb: int = 65536


def _labels(chip: int) -> str:
    return (f'container_name="",id="{chip}",model_name="Ascend910B3",namespace="",'
            f'pcie_bus_info="0000:{chip + 1:02X}:00.0",pod_name="",vdie_id="a{chip}"')


def exporter_page(chips: Mapping[int, ChipState]) -> str:
    lines = [f"machine_npu_nums {len(chips)}",
             "# HELP npu_chip_info_health_status whether the npu is healthy, 1 healthy, 0 unhealthy",
             "# TYPE npu_chip_info_health_status gauge"]
    lines += [f"npu_chip_info_health_status{{{_labels(c)}}} {int(s.healthy)}"
              for c, s in sorted(chips.items())]
    most = max((len(s.codes) for s in chips.values()), default=0)
    for n in range(max(most, 1)):
        name = "npu_chip_info_error_code" + (f"_{n}" if n else "")
        lines += [f"# HELP {name} the npu error code", f"# TYPE {name} gauge"]
        lines += [f"{name}{{{_labels(c)}}} {s.codes[n] if n < len(s.codes) else 0}"
                  for c, s in sorted(chips.items()) if n == 0 or n < len(s.codes)]
    for family, unit in (("hbm_used_memory", "hbm_used_mb"), ("hbm_total_memory", "hbm_total_mb")):
        lines += [f"# HELP npu_chip_info_{family} the npu {family}, unit is 'MB'",
                  f"# TYPE npu_chip_info_{family} gauge"]
        lines += [f"npu_chip_info_{family}{{{_labels(c)}}} {getattr(s, unit)}"
                  for c, s in sorted(chips.items())]
    return "\n".join(lines) + "\n"


@contextmanager
def npu_exporter_double(chips: Mapping[int, ChipState]) -> Iterator[str]:
    """npu-exporter's page for `chips` on 127.0.0.1; yields its /metrics URL."""
    with serve(exporter_page(chips).encode()) as url:
        yield url


class LiveExporter:
    """npu-exporter's page on 127.0.0.1 whose chips a test changes while it serves (a fault that
    appears, then clears); `url` is its /metrics."""

    def __init__(self, chips: Mapping[int, ChipState]) -> None:
        self._page = exporter_page(chips).encode()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner._lock:
                    body = owner._page
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/metrics"

    def set(self, chips: Mapping[int, ChipState]) -> None:
        page = exporter_page(chips).encode()
        with self._lock:
            self._page = page


@contextmanager
def live_npu_exporter(chips: Mapping[int, ChipState]) -> Iterator[LiveExporter]:
    """A LiveExporter serving `chips` until the block ends."""
    exporter = LiveExporter(chips)
    thread = threading.Thread(target=exporter._server.serve_forever, daemon=True)
    thread.start()
    try:
        yield exporter
    finally:
        exporter._server.shutdown()
        exporter._server.server_close()

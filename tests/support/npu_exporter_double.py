"""A double of npu-exporter: its /metrics page with fault codes, served on loopback.

The page has npu-exporter's own families and labels (as recorded in
tests/unit/assets/telemetry/npu_exporter_synth.txt): `npu_chip_info_health_status` (1 healthy,
0 unhealthy), `npu_chip_info_error_code` (the first code, decimal; 0 when none) and the
numbered `npu_chip_info_error_code_N` series an exporter adds for each further code, and the
HBM figures in MB.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

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
    """npu-exporter's page for chips a test changes while it serves (a fault that appears, then
    clears); `url` is its /metrics once `live_npu_exporter` serves it."""

    def __init__(self, chips: Mapping[int, ChipState]) -> None:
        self.url = ""
        self.set(chips)

    def set(self, chips: Mapping[int, ChipState]) -> None:
        self._page = exporter_page(chips).encode()  # one reference swapped: a request sees old or new

    def page(self) -> bytes:
        return self._page


@contextmanager
def live_npu_exporter(chips: Mapping[int, ChipState]) -> Iterator[LiveExporter]:
    """A LiveExporter serving `chips` on 127.0.0.1 until the block ends."""
    exporter = LiveExporter(chips)
    with serve(exporter.page) as url:
        exporter.url = url
        yield exporter

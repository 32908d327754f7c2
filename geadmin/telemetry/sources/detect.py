"""Which NPU source this host has: npu-exporter, then npu-smi, then Triton's npu_ge metrics
(the order and the sources are described in `geadmin.telemetry.sources.npu`).

A host with none of them gets a `NpuReport` without devices and one calm line saying what
was looked at. A source that exists but fails (the exporter configured but down, npu-smi
erroring) raises its `TelemetryError` — unless a later source answers, which then carries a
note about it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from geadmin.errors import MetricsUnavailableError, TelemetryError
from geadmin.telemetry.sources import npu_smi
from geadmin.telemetry.sources.npu import (
    SOURCE_EXPORTER,
    SOURCE_NPU_SMI,
    SOURCE_TRITON,
    NpuDevice,
    NpuReport,
    devices_from_exporter,
    devices_from_triton,
    with_models,
)
from geadmin.telemetry.sources.scrape import DEFAULT_TIMEOUT_S, Scrape, scrape


@dataclass(frozen=True)
class NpuSources:
    """Where to look. `triton_metrics_explicit`: the URL was given, so a Triton that does not
    answer is an error; otherwise (a default address) it only makes a note."""

    exporter_url: str | None = None
    npu_smi: str = "npu-smi"
    triton_metrics_url: str | None = None
    triton_metrics_explicit: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S


def detect(sources: NpuSources, *, which: Callable[[str], str | None] = shutil.which) -> NpuReport:
    """Try npu-exporter, then npu-smi, then Triton's npu_ge metrics; the first with devices wins."""
    triton_page, triton_why, errors = _triton_page(sources)
    binary = which(sources.npu_smi)

    def exporter() -> tuple[list[NpuDevice] | None, str]:
        if not sources.exporter_url:
            return None, "no npu-exporter configured"
        return devices_from_exporter(scrape(sources.exporter_url, timeout_s=sources.timeout_s)), ""

    def local() -> tuple[list[NpuDevice] | None, str]:
        if not binary:
            return None, f"{sources.npu_smi} not found"
        return npu_smi.read_devices(binary, timeout_s=sources.timeout_s), ""

    def triton() -> tuple[list[NpuDevice] | None, str]:
        if triton_page is None:
            return None, triton_why
        return devices_from_triton(triton_page), "Triton publishes no npu_ge metrics"

    looked: dict[str, str] = {}  # source -> why it has no devices
    for source, attempt in ((SOURCE_EXPORTER, exporter), (SOURCE_NPU_SMI, local), (SOURCE_TRITON, triton)):
        try:
            found, why = attempt()
        except TelemetryError as exc:
            errors.append(exc)
            continue
        if found:
            return _report(found, source, triton_page, errors)
        looked[source] = why
    if errors:
        first, *rest = errors
        if not rest:
            raise first
        raise type(first)(f"{first} (also: {'; '.join(str(e) for e in rest)})", url=first.url) from first
    why_not = [looked[s] for s in (SOURCE_NPU_SMI, SOURCE_EXPORTER, SOURCE_TRITON) if s in looked]
    return NpuReport((), "", "no Ascend NPU on this host: " + ", ".join(why_not))


def _triton_page(sources: NpuSources) -> tuple[Scrape | None, str, list[TelemetryError]]:
    """Triton's /metrics (for its npu_ge devices and placements), why not, and its error when
    the URL was given explicitly."""
    if not sources.triton_metrics_url:
        return None, "no Triton metrics URL given", []
    try:
        return scrape(sources.triton_metrics_url, timeout_s=sources.timeout_s), "", []
    except MetricsUnavailableError as exc:
        return (None, f"Triton's metrics at {sources.triton_metrics_url} did not answer",
                [exc] if sources.triton_metrics_explicit else [])
    except TelemetryError as exc:  # it answered, but not with a metrics page
        return None, f"{sources.triton_metrics_url} is not a metrics page", [exc]


def _report(devices: list[NpuDevice], source: str, triton_page: Scrape | None,
            errors: list[TelemetryError]) -> NpuReport:
    if triton_page is not None and source != SOURCE_TRITON:
        devices = with_models(devices, triton_page)
    plural = "NPU" if len(devices) == 1 else "NPUs"
    return NpuReport(tuple(devices), source, f"{len(devices)} {plural} ({source})",
                     tuple(str(e) for e in errors))

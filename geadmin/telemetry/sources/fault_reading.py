"""`read_faults`: every NPU fault source available, read now into one `FaultReading`.

It reads every source available (not only the first, as `geadmin.telemetry.sources.detect`
does): npu-exporter's page, npu-smi (a saved file, or the binary on PATH) and npu_ge's metrics
on Triton's page, each parsed by `geadmin.telemetry.sources.npu_faults`. The reading holds what
it found, which sources it read, and notes about those that failed: a source that fails is a
note, raised only when nothing could be read and it was named explicitly. A Triton page counts
as read only with npu_ge's metrics on it (`speaks_of_npus`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from geadmin.errors import NpuSmiError, NpuSourceError, TelemetryError
from geadmin.telemetry.sources import npu_smi_health
from geadmin.telemetry.sources.detect import NpuSources
from geadmin.telemetry.sources.npu_faults import (
    SOURCE_EXPORTER,
    SOURCE_NPU_GE,
    SOURCE_NPU_SMI,
    ChipFault,
    capped,
    faults_from_exporter,
    faults_from_health,
    faults_from_npu_smi,
    faults_from_triton,
)
from geadmin.telemetry.sources.scrape import Scrape, scrape

MAX_NPU_SMI_FILE_BYTES = 4 << 20


@dataclass(frozen=True)
class FaultReading:
    """One read of every fault source available: the faults, the sources read (a fault of a
    source read that is no longer reported has cleared), and notes on sources that failed or
    on values left out."""

    faults: tuple[ChipFault, ...]
    read: tuple[str, ...]  # SOURCE_* actually read
    notes: tuple[str, ...] = ()
    node: str = ""  # the host the reading is of ("" for this one)


def speaks_of_npus(page: Scrape, url: str, notes: list[str]) -> bool:
    """Triton's page counts as a fault source read only with npu_ge's metrics on it: a Triton
    without npu_ge says nothing of any NPU (no "OK" may rest on it)."""
    if any(name.startswith("npu_ge_") for name in page.names):
        return True
    notes.append(f"Triton's metrics ({SOURCE_NPU_GE}): no npu_ge metrics on {url} (no npu_ge model "
                 "loaded), so they say nothing of the NPUs")
    return False


def read_faults(sources: NpuSources, *, npu_smi_file: str | None = None, node: str = "",
                which: Callable[[str], str | None] = shutil.which) -> FaultReading:
    """Every fault source available: npu-exporter (when its URL is given), npu-smi (the file
    given, else the binary on PATH) and npu_ge on Triton's /metrics (when its URL is given).

    A source that fails is a note — unless nothing could be read and it was given explicitly
    (the exporter's URL, an explicit Triton URL): then its TelemetryError is raised. A file
    given that cannot be read or parsed always raises (NpuSmiError / NpuSmiParseError)."""
    faults: list[ChipFault] = []
    read: list[str] = []
    notes: list[str] = []
    explicit: list[TelemetryError] = []
    if sources.exporter_url:
        try:
            page = scrape(sources.exporter_url, timeout_s=sources.timeout_s)
            if not any(name.startswith("npu_chip_info_") for name in page.names):
                raise NpuSourceError(f"npu-exporter at {sources.exporter_url} publishes no npu_chip_info_* "
                                     "metrics — is the URL the exporter's /metrics (port 8082)?",
                                     url=sources.exporter_url)
            faults += faults_from_exporter(page, node, notes=notes)
            read.append(SOURCE_EXPORTER)
        except TelemetryError as exc:
            notes.append(f"{SOURCE_EXPORTER}: {exc}")
            explicit.append(exc)
    if npu_smi_file is not None:
        faults += faults_from_npu_smi(read_npu_smi_file(npu_smi_file), node, notes=notes)
        read.append(SOURCE_NPU_SMI)
    elif (binary := which(sources.npu_smi)) is not None:
        try:
            reports = npu_smi_health.read(binary, timeout_s=sources.timeout_s, notes=notes)
            faults += capped(faults_from_health(reports, node), SOURCE_NPU_SMI, notes)
            read.append(SOURCE_NPU_SMI)
        except NpuSmiError as exc:
            notes.append(f"{SOURCE_NPU_SMI}: {exc}")
    if sources.triton_metrics_url:
        try:
            page = scrape(sources.triton_metrics_url, timeout_s=sources.timeout_s)
            faults += faults_from_triton(page, node, notes=notes)
            read += [SOURCE_NPU_GE] if speaks_of_npus(page, sources.triton_metrics_url, notes) else []
        except TelemetryError as exc:
            notes.append(f"Triton's metrics ({SOURCE_NPU_GE}): {exc}")
            if sources.triton_metrics_explicit:
                explicit.append(exc)
    if not read and explicit:
        first, *rest = explicit
        if not rest:
            raise first
        raise type(first)(f"{first} (also: {'; '.join(str(e) for e in rest)})", url=first.url) from first
    return FaultReading(tuple(faults), tuple(read), tuple(notes), node)


def read_npu_smi_file(path: str) -> str:
    """A saved npu-smi output, bounded; unreadable or too big is an NpuSmiError (the operator's input)."""
    try:
        with Path(path).open("rb") as handle:
            raw = handle.read(MAX_NPU_SMI_FILE_BYTES + 1)
    except OSError as exc:
        raise NpuSmiError(f"cannot read the npu-smi file {path}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_NPU_SMI_FILE_BYTES:
        raise NpuSmiError(f"the npu-smi file {path} is over {MAX_NPU_SMI_FILE_BYTES >> 20} MiB: "
                          "not npu-smi output")
    return raw.decode("utf-8", errors="replace")

"""Metrics pages, NPU sources, Prometheus and Alertmanager (geadmin.telemetry)."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class TelemetryError(GeAdminError):
    """Metrics and NPU telemetry could not be read (geadmin.telemetry)."""

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class MetricsUnavailableError(TelemetryError):
    """A Prometheus text endpoint (Triton's /metrics, npu-exporter) cannot be read."""


class MetricsUnreachableError(MetricsUnavailableError):
    """Nothing answers at the metrics URL: connection refused, unknown host, reset."""


class MetricsTimeoutError(MetricsUnavailableError):
    """The metrics endpoint accepted the connection but did not answer in time."""


class MetricsHTTPError(MetricsUnavailableError):
    """The metrics endpoint answered with an HTTP error status, or not in HTTP at all."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message, url=url)
        self.status = status


class MetricsParseError(TelemetryError):
    """The text is not in Prometheus exposition format; `line` is 1-based when known."""

    def __init__(self, message: str, *, url: str = "", line: int | None = None) -> None:
        super().__init__(message, url=url)
        self.line = line


class NpuSourceError(TelemetryError):
    """An NPU source that was asked for (npu-exporter, Triton's npu_ge metrics) has no devices."""


class NpuSmiError(TelemetryError):
    """`npu-smi` cannot be run, exits with an error (e.g. the driver is not loaded), or hangs."""


class NpuSmiParseError(NpuSmiError):
    """`npu-smi` printed something geadmin cannot read; the message quotes the first lines."""


class FaultTableError(TelemetryError):
    """The NPU fault table's override file (GEADMIN_NPU_FAULT_TABLE) cannot be used: unreadable,
    too big, not JSON, an unknown level key or a code that is not 8 hex digits. `path` names
    the file and the message the bad entry."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class PrometheusError(TelemetryError):
    """Prometheus did not answer, or refused a query."""


class NoRecordedLoadError(TelemetryError):
    """The history holds no requests of the model in the window (geadmin.telemetry.history.traffic)."""


class AlertmanagerError(TelemetryError):
    """Alertmanager did not answer, or its answer is not a list of alerts."""


class SamplerLockedError(TelemetryError):
    """Another telemetry sampler (`geadmin sampler`, `geadmin up`) holds the workspace's lock."""


class TraceFileError(TelemetryError):
    """Triton's trace files cannot give arrivals: no trace file set at its start, the file's
    directory not readable here (a remote Triton), a file over the size bound, not JSON, or
    another capture of the model under way (it would count the same traces twice)."""

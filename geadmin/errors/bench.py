"""Load tests (perf_analyzer, geadmin.ops.bench.load_test)."""

from __future__ import annotations

from geadmin.errors.base import GeAdminError


class PerfAnalyzerError(GeAdminError):
    """A load test failed: perf_analyzer could not run, or ended without figures."""


class PerfAnalyzerMissingError(PerfAnalyzerError):
    """No perf_analyzer binary, it is not executable, or its shared libraries are missing."""


class PerfAnalyzerTimeoutError(PerfAnalyzerError):
    """perf_analyzer ran past the load test's deadline and was killed."""


class BenchCancelledError(PerfAnalyzerError):
    """The load test was cancelled; perf_analyzer was killed."""


class UnstableMeasurementError(PerfAnalyzerError):
    """perf_analyzer found no stable measurement within its trials."""


class SharedMemoryUnreachableError(PerfAnalyzerError):
    """Triton cannot open the load test's shared memory: another host, or another /dev/shm."""


class BenchInputError(PerfAnalyzerError):
    """perf_analyzer rejected the input data it was given (--input-data JSON)."""


class BenchSettingsError(PerfAnalyzerError):
    """A load test's settings (loads, measurement window, trials) are malformed or out of bounds."""


class BenchBusyError(PerfAnalyzerError):
    """Another load test (this dashboard, another session, `geadmin bench`) runs against the server."""

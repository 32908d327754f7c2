"""Every error geadmin raises on purpose derives from one base.

    GeAdminError
    ├── ConfigError                 bad geadmin settings, flags or settings files
    ├── StackError                  the embedded stack (`geadmin up`)
    │   ├── TritonBinaryNotFoundError   no tritonserver binary where we looked
    │   ├── PythonStubMissingError      the wheel has no python-backend stub for this Python
    │   ├── PortInUseError              a port we must bind is taken
    │   ├── TritonStartError            tritonserver exited or never became ready
    │   ├── ServiceNotFoundError        no such service in the stack (Stack page, drivers)
    │   └── DockerError                 the docker CLI failed (compose driver)
    │       └── DockerUnavailableError      no docker CLI, or no engine answers it
    ├── RepositoryError             the model repository on disk
    │   ├── ConfigParseError            a config.pbtxt the protobuf parser rejects (line, column)
    │   ├── ConfigConflictError         changed on disk since it was read (geadmin.repository.store:
    │   │                               it carries both texts and their diff)
    │   ├── ConfigInvalidError          the validator found errors (geadmin.repository.validate:
    │   │                               it carries the findings)
    │   └── ConfigLockedError           another geadmin is writing this model's config right now
    ├── InferInputError             a test-inference input that does not fit the model
    │   └── InputTooLargeError          an upload or tensor over the size limit
    ├── AccessError                 sign-in and roles (geadmin.access)
    │   ├── SignInError                 unknown user or wrong password (never says which)
    │   │   └── SignInRateLimitedError      too many failed attempts: retry later
    │   ├── SessionExpiredError         idle longer than the session timeout
    │   └── AccessDeniedError           the signed-in role may not do this
    ├── WorkspaceDatabaseError      the workspace SQLite ($GEADMIN_HOME/geadmin.db)
    │   └── DatabaseBusyError           another process held it past the busy timeout
    ├── TritonError                 talking to a running Triton
    │   ├── TritonUnreachableError      nothing answers (connection refused, DNS, reset)
    │   │   └── WrongProtocolError          the port answers in the other protocol (HTTP vs gRPC)
    │   ├── TritonTimeoutError          it answered too slowly
    │   │   └── ExplainedLoadTimeoutError   a load still running at our deadline, or stuck, with clues
    │   ├── ForbiddenError              restricted API without / with a wrong key
    │   ├── ModelNotFoundError          no such model (or version) on the server
    │   ├── LoadFailedError             a load / reload was rejected
    │   │   └── ExplainedLoadError          ... with the real reason (geadmin.diagnose.explain)
    │   └── TritonRequestError          any other request Triton rejected
    ├── PerfAnalyzerError           a load test (perf_analyzer, geadmin.ops.bench) failed
    │   ├── PerfAnalyzerMissingError    no perf_analyzer binary, not executable, or its libraries missing
    │   ├── PerfAnalyzerTimeoutError    the run outlasted its deadline and was killed
    │   ├── BenchCancelledError         the run was cancelled and killed
    │   ├── UnstableMeasurementError    perf_analyzer found no stable measurement
    │   ├── SharedMemoryUnreachableError  Triton cannot open the client's system shared memory
    │   └── BenchInputError             the input data (--input-data JSON) was rejected
    └── TelemetryError              metrics pages and NPU sources (geadmin.telemetry)
        ├── MetricsUnavailableError     a Prometheus /metrics page cannot be read
        │   ├── MetricsUnreachableError     nothing answers (connection refused, DNS, reset)
        │   ├── MetricsTimeoutError         it answered too slowly
        │   └── MetricsHTTPError            it answered with an HTTP error, or not in HTTP
        ├── MetricsParseError           the page is not Prometheus text format
        ├── NpuSourceError              an NPU source gave no devices it should have (npu-exporter, Triton)
        ├── NpuSmiError                 npu-smi cannot be run, fails, or times out
        │   └── NpuSmiParseError            npu-smi output geadmin cannot read
        └── SamplerLockedError          another telemetry sampler already writes this workspace

Pages and the CLI catch only these, and show `str(err)`: each message names the
cause and, where there is one, the next step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geadmin.domain import Explanation


class GeAdminError(Exception):
    """Base of every error geadmin raises on purpose."""


class ConfigError(GeAdminError):
    """geadmin's own settings (flags, env vars, settings files) are invalid."""


class StackError(GeAdminError):
    """The embedded stack could not be started or stopped cleanly."""


class TritonBinaryNotFoundError(StackError):
    pass


class PythonStubMissingError(StackError):
    pass


class PortInUseError(StackError):
    def __init__(self, message: str, port: int) -> None:
        super().__init__(message)
        self.port = port


class TritonStartError(StackError):
    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message + (f"\n--- last lines of the Triton log ---\n{log_tail}"
                                    if log_tail else ""))
        self.log_tail = log_tail


class RepositoryError(GeAdminError):
    """The model repository on disk is missing, unreadable or malformed."""


class ConfigParseError(RepositoryError):
    """A config that does not parse; `line`/`column` are the parser's (1-based)."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 detail: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.column = column
        self.detail = detail or message


class TritonError(GeAdminError):
    """A request to a running Triton failed."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class TritonUnreachableError(TritonError):
    pass


class WrongProtocolError(TritonUnreachableError):
    """HTTP sent to a gRPC port, or the reverse: the URL's scheme or port is wrong."""


class TritonTimeoutError(TritonError):
    pass


class ExplainedLoadTimeoutError(TritonTimeoutError):
    """A load that did not finish in time, with what the log and the repository show."""

    def __init__(self, explanation: Explanation, *, url: str = "", status: int | None = None) -> None:
        super().__init__(explanation.summary(), url=url, status=status)
        self.explanation = explanation


class ForbiddenError(TritonError):
    pass


class ModelNotFoundError(TritonError):
    pass


class LoadFailedError(TritonError):
    pass


class ExplainedLoadError(LoadFailedError):
    """A failed load with what geadmin found out about it: log lines, layout, what still serves."""

    def __init__(self, explanation: Explanation, *, url: str = "", status: int | None = None) -> None:
        super().__init__(explanation.summary(), url=url, status=status)
        self.explanation = explanation


class TritonRequestError(TritonError):
    pass


class ServiceNotFoundError(StackError):
    """A stack driver was asked about a service the stack does not have."""


class DockerError(StackError):
    """A docker / docker-compose command failed; the message carries its stderr."""


class DockerUnavailableError(DockerError):
    """No docker CLI on PATH, or no Docker engine answers it."""


class ConfigLockedError(RepositoryError):
    """Another geadmin process is writing (or applying) this model's config right now."""


class WorkspaceDatabaseError(GeAdminError):
    """The workspace SQLite file cannot be opened, read, written or migrated."""


class DatabaseBusyError(WorkspaceDatabaseError):
    """Another process held the database longer than the busy timeout."""


class InferInputError(GeAdminError):
    """A test-inference input that does not fit the model (dtype, shape, undecodable data)."""


class InputTooLargeError(InferInputError):
    """An uploaded file or a requested tensor over geadmin's size limit."""


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


class SamplerLockedError(TelemetryError):
    """Another telemetry sampler (`geadmin sampler`, `geadmin up`) holds the workspace's lock."""


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
    """Triton cannot open the load test's system shared memory: the two do not share /dev/shm
    (another host, or a container with a /dev/shm of its own)."""


class BenchInputError(PerfAnalyzerError):
    """perf_analyzer rejected the input data it was given (--input-data JSON)."""


class AccessError(GeAdminError):
    """Sign-in and roles."""


class SignInError(AccessError):
    """Unknown user or wrong password; the message never says which."""


class SignInRateLimitedError(SignInError):
    """Too many failed sign-ins for one user; `retry_after_s` says when to try again."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SessionExpiredError(AccessError):
    """The session was idle longer than GEADMIN_SESSION_IDLE_MIN."""


class AccessDeniedError(AccessError):
    """The signed-in user's role may not perform the action."""

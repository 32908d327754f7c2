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
    │   ├── ConfigLockedError           another geadmin is writing this model's config right now
    │   ├── TemplateError               knobs that cannot make a config (geadmin.repository.templates)
    │   └── CreateRefusedError          a new model refused: name, files or validation (ops.models.create)
    ├── InferInputError             a test-inference input that does not fit the model
    │   └── InputTooLargeError          an upload or tensor over the size limit
    ├── AccessError                 sign-in and roles (geadmin.access)
    │   ├── SignInError                 unknown user or wrong password (never says which)
    │   │   ├── SignInRateLimitedError      too many failed attempts: retry later
    │   │   └── SignInBusyError             too many password checks at once: retry in a moment
    │   ├── SessionExpiredError         idle or too old, or its user removed or re-keyed
    │   ├── AccessDeniedError           the signed-in role may not do this
    │   └── NotAuthorizedError          a core change called without an authorization for it
    │                                   (geadmin.access.guard issues them; none, or one lacking the action)
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
    ├── PerfAnalyzerError           a load test (perf_analyzer, geadmin.ops.bench.load_test) failed
    │   ├── PerfAnalyzerMissingError    no perf_analyzer binary, not executable, or its libraries missing
    │   ├── PerfAnalyzerTimeoutError    the run outlasted its deadline and was killed
    │   ├── BenchCancelledError         the run was cancelled and killed
    │   ├── UnstableMeasurementError    perf_analyzer found no stable measurement
    │   ├── SharedMemoryUnreachableError  Triton cannot open the client's system shared memory
    │   ├── BenchInputError             the input data (--input-data JSON) was rejected
    │   ├── BenchSettingsError          loads, window or trials malformed or out of bounds
    │   └── BenchBusyError              another load test runs against this server now
    ├── FleetError                  many servers as one (geadmin.fleet)
    │   ├── DiscoverySourceError        a discovery source (DNS, Prometheus, Kubernetes) did not answer
    │   └── RolloutBusyError            another rollout of this fleet runs now
    └── TelemetryError              metrics pages and NPU sources (geadmin.telemetry)
        ├── MetricsUnavailableError     a Prometheus /metrics page cannot be read
        │   ├── MetricsUnreachableError     nothing answers (connection refused, DNS, reset)
        │   ├── MetricsTimeoutError         it answered too slowly
        │   └── MetricsHTTPError            it answered with an HTTP error, or not in HTTP
        ├── MetricsParseError           the page is not Prometheus text format
        ├── NpuSourceError              an NPU source gave no devices it should have (npu-exporter, Triton)
        ├── PrometheusError             a Prometheus server did not answer, or refused a query (history)
        ├── AlertmanagerError           an Alertmanager did not answer, or not with alerts (active alerts)
        ├── NpuSmiError                 npu-smi cannot be run, fails, or times out
        │   └── NpuSmiParseError            npu-smi output geadmin cannot read
        └── SamplerLockedError          another telemetry sampler already writes this workspace

Pages and the CLI catch only these, and show `str(err)`: each message names the
cause and, where there is one, the next step.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar


class Explained(Protocol):
    """What an explained load error carries: a `geadmin.domain.Explanation`. errors.py imports
    nothing of geadmin (it is the bottom of the layers), so the payload is typed by what it does."""

    def summary(self) -> str: ...


ExplanationT = TypeVar("ExplanationT", bound=Explained)


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
        self.line, self.column, self.detail = line, column, detail or message


class TritonError(GeAdminError):
    """A request to a running Triton failed."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.url, self.status = url, status


class TritonUnreachableError(TritonError):
    pass


class WrongProtocolError(TritonUnreachableError):
    """HTTP sent to a gRPC port, or the reverse: the URL's scheme or port is wrong."""


class TritonTimeoutError(TritonError):
    pass


class ExplainedLoadTimeoutError(TritonTimeoutError, Generic[ExplanationT]):
    """A load that did not finish in time, with what the log and the repository show."""

    def __init__(self, explanation: ExplanationT, *, url: str = "", status: int | None = None) -> None:
        super().__init__(explanation.summary(), url=url, status=status)
        self.explanation = explanation


class ForbiddenError(TritonError):
    pass


class ModelNotFoundError(TritonError):
    pass


class LoadFailedError(TritonError):
    pass


class ExplainedLoadError(LoadFailedError, Generic[ExplanationT]):
    """A failed load with what geadmin found out about it: log lines, layout, what still serves."""

    def __init__(self, explanation: ExplanationT, *, url: str = "", status: int | None = None) -> None:
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


class ConfigConflictError(RepositoryError):
    """The config changed on disk since it was read: nothing was written."""

    def __init__(self, message: str, *, path: Path, expected_sha256: str, found_sha256: str,
                 base_text: str, disk_text: str, diff_text: str = "") -> None:
        super().__init__(message)
        self.path, self.expected_sha256, self.found_sha256 = path, expected_sha256, found_sha256
        self.base_text = base_text  # what the editor started from ("" when unknown)
        self.disk_text = disk_text  # what is on disk now
        self.diff_text = diff_text  # base -> disk as a unified diff (geadmin.repository.store)

    def diff(self) -> str:
        """What changed on disk since the editor read it (empty when the base is unknown)."""
        return self.diff_text if self.base_text else ""


class ConfigInvalidError(RepositoryError):
    """The validator found errors in a config about to be written; `findings` are all of them
    (`geadmin.repository.validate.Finding`s; `validate.invalid_config` writes the message)."""

    def __init__(self, message: str, findings: Sequence[Any]) -> None:
        super().__init__(message)
        self.findings = list(findings)


class TemplateError(RepositoryError):
    """Template knobs that cannot make a config (bad dtype, dims, device ids, ...)."""


class CreateRefusedError(RepositoryError):
    """Nothing was created (name, files or validation); `findings`: the validator's, if it refused."""

    def __init__(self, message: str, findings: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.findings = findings


class WorkspaceDatabaseError(GeAdminError):
    """The workspace SQLite file cannot be opened, read, written or migrated."""


class DatabaseBusyError(WorkspaceDatabaseError):
    """Another process held the database longer than the busy timeout."""


class InferInputError(GeAdminError):
    """A test-inference input that does not fit the model (dtype, shape, undecodable data)."""


class InputTooLargeError(InferInputError):
    """An uploaded file or a requested tensor over geadmin's size limit."""


class FleetError(GeAdminError):
    """Finding or changing many servers as one failed."""


class DiscoverySourceError(FleetError):
    """A discovery source did not answer; the message names the source and the fix."""

    def __init__(self, message: str, *, source: str = "") -> None:
        super().__init__(message)
        self.source = source


class RolloutBusyError(FleetError):
    """Another rollout of the same fleet is running."""


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


class PrometheusError(TelemetryError):
    """Prometheus did not answer, or refused a query."""


class AlertmanagerError(TelemetryError):
    """Alertmanager did not answer, or its answer is not a list of alerts."""


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
    """Triton cannot open the load test's shared memory: another host, or another /dev/shm."""


class BenchInputError(PerfAnalyzerError):
    """perf_analyzer rejected the input data it was given (--input-data JSON)."""


class BenchSettingsError(PerfAnalyzerError):
    """A load test's settings (loads, measurement window, trials) are malformed or out of bounds."""


class BenchBusyError(PerfAnalyzerError):
    """Another load test (this dashboard, another session, `geadmin bench`) runs against the server."""


class AccessError(GeAdminError):
    """Sign-in and roles."""


class SignInError(AccessError):
    """Unknown user or wrong password; the message never says which."""


class SignInRateLimitedError(SignInError):
    """Too many failed sign-ins for one user; `retry_after_s` says when to try again."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class SignInBusyError(SignInError):
    """Every password-check slot is taken (each argon2 check holds 64 MiB): try again shortly."""


class SessionExpiredError(AccessError):
    """Idle past GEADMIN_SESSION_IDLE_MIN, past GEADMIN_SESSION_MAX_H, or its user removed or re-keyed."""


class AccessDeniedError(AccessError):
    """The signed-in user's role may not perform the action."""


class NotAuthorizedError(AccessError):
    """A core change (server, repository, stack, users) called without an authorization from
    the access layer (`geadmin.access.guard`), or with one that does not cover the action."""

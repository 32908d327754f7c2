"""Every error geadmin raises on purpose derives from one base; import them from here:
`from geadmin.errors import X`. One module per family:

- base.py        the root, geadmin's own settings, one request's arguments
- stack.py       the embedded stack and its drivers (`geadmin up`, compose)
- repository.py  the model repository on disk: parsing, conflicts, validation, new models
- infer.py       test-inference inputs
- access.py      sign-in, roles, user accounts, authorizations
- workspace.py   the workspace SQLite
- triton.py      talking to a running Triton (every client error maps to one of these)
- bench.py       load tests
- tune.py        the tuner
- fleet.py       many servers as one: discovery and rollouts
- telemetry.py   metrics pages, NPU sources, Prometheus and Alertmanager

The tree:

    GeAdminError
    ├── ConfigError                 geadmin's own settings: GEADMIN_* variables, the flags that set them,
    │                               settings files (servers, users, secrets.toml)
    ├── InvalidArgumentError        one request's argument malformed or out of bounds (a --since, a
    │                               threshold, a wave size): nothing was done
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
    │   ├── SignInTokenError            the dashboard's one-time token is missing or not geadmin's
    │   ├── SessionExpiredError         idle or too old, or its user removed or re-keyed
    │   ├── AccessDeniedError           the signed-in role may not do this
    │   ├── NotAuthorizedError          a core change called without an authorization for it
    │   │                               (geadmin.access.guard issues them; none, or one lacking the action)
    │   └── UserAccountError            a user name or password refused, a user that exists or does not
    ├── WorkspaceDatabaseError      the workspace SQLite ($GEADMIN_HOME/geadmin.db)
    │   └── DatabaseBusyError           another process held it past the busy timeout
    ├── WorkspaceLockError          a lock file in the workspace cannot be created
    ├── RunLockHeldError            a background run's lock is held: its process still runs it
    ├── TritonError                 talking to a running Triton
    │   ├── TritonUnreachableError      nothing answers (connection refused, DNS, reset)
    │   │   ├── WrongProtocolError          the other protocol (HTTP vs gRPC) answers, or not Triton
    │   │   └── TritonNotAskedError         not sent: it answered nothing moments ago (held)
    │   │       └── ConnectionsBusyError        not sent: geadmin's connections to it were all busy
    │   ├── TritonTimeoutError          it answered too slowly
    │   │   └── ExplainedLoadTimeoutError   a load still running at our deadline, or stuck, with clues
    │   ├── ForbiddenError              restricted API without / with a wrong key
    │   ├── ModelNotFoundError          no such model (or version) on the server
    │   ├── LoadFailedError             a load / reload was rejected
    │   │   └── ExplainedLoadError          ... with the real reason (geadmin.diagnose.explain)
    │   └── TritonRequestError          any other request Triton rejected
    │       └── AnswerTooLargeError         an answer over the size geadmin reads from one
    ├── PerfAnalyzerError           a load test (perf_analyzer, geadmin.ops.bench.load_test) failed
    │   ├── PerfAnalyzerMissingError    no perf_analyzer binary, not executable, or its libraries missing
    │   ├── PerfAnalyzerTimeoutError    the run outlasted its deadline and was killed
    │   ├── BenchCancelledError         the run was cancelled and killed
    │   ├── UnstableMeasurementError    perf_analyzer found no stable measurement
    │   ├── SharedMemoryUnreachableError  Triton cannot open the client's system shared memory
    │   ├── BenchInputError             the input data (--input-data JSON) was rejected
    │   ├── BenchSettingsError          loads, window or trials malformed or out of bounds
    │   └── BenchBusyError              another load test (or a tuning run) runs against this server now
    ├── TuneError                   the tuner (geadmin.ops.tune.search)
    │   ├── TuneBusyError               another tuning run of this model, or a load test, holds its lock
    │   ├── TuneRefusedError            refused before changing anything (model name, run mismatch, apply)
    │   └── TuneRunNotFoundError        no tuning run with that number in this workspace
    ├── FleetError                  many servers as one (geadmin.fleet)
    │   ├── DiscoverySourceError        a discovery source (DNS, Prometheus, Kubernetes) did not answer
    │   ├── RolloutBusyError            another rollout of this fleet runs now
    │   ├── RolloutRefusedError         refused before changing anything (no servers, no repository, ...)
    │   └── RolloutJournalError         a rollout's journal in the audit log is missing or unreadable
    └── TelemetryError              metrics pages and NPU sources (geadmin.telemetry)
        ├── MetricsUnavailableError     a Prometheus /metrics page cannot be read
        │   ├── MetricsUnreachableError     nothing answers (connection refused, DNS, reset)
        │   ├── MetricsTimeoutError         it answered too slowly
        │   └── MetricsHTTPError            it answered with an HTTP error, or not in HTTP
        ├── MetricsParseError           the page is not Prometheus text format
        ├── TraceFileError              Triton's trace files: none set, not readable here, too large, not JSON
        ├── NpuSourceError              an NPU source gave no devices it should have (npu-exporter, Triton)
        ├── PrometheusError             a Prometheus server did not answer, or refused a query (history)
        ├── NoRecordedLoadError         no requests of the model recorded in the window (capacity, tune)
        ├── AlertmanagerError           an Alertmanager did not answer, or not with alerts (active alerts)
        ├── NpuSmiError                 npu-smi cannot be run, fails, or times out
        │   └── NpuSmiParseError            npu-smi output geadmin cannot read
        ├── FaultTableError             the NPU fault table's override file is unreadable or malformed
        └── SamplerLockedError          another telemetry sampler already writes this workspace

Pages and the CLI catch only these, and show `str(err)`: each message names the
cause and, where there is one, the next step.
"""

from __future__ import annotations

from geadmin.errors.access import (
    AccessDeniedError,
    AccessError,
    NotAuthorizedError,
    SessionExpiredError,
    SignInBusyError,
    SignInError,
    SignInRateLimitedError,
    SignInTokenError,
    UserAccountError,
)
from geadmin.errors.base import (
    ConfigError,
    GeAdminError,
    InvalidArgumentError,
)
from geadmin.errors.bench import (
    BenchBusyError,
    BenchCancelledError,
    BenchInputError,
    BenchSettingsError,
    PerfAnalyzerError,
    PerfAnalyzerMissingError,
    PerfAnalyzerTimeoutError,
    SharedMemoryUnreachableError,
    UnstableMeasurementError,
)
from geadmin.errors.fleet import (
    DiscoverySourceError,
    FleetError,
    RolloutBusyError,
    RolloutJournalError,
    RolloutRefusedError,
)
from geadmin.errors.infer import (
    InferInputError,
    InputTooLargeError,
)
from geadmin.errors.repository import (
    ConfigConflictError,
    ConfigInvalidError,
    ConfigLockedError,
    ConfigParseError,
    CreateRefusedError,
    RepositoryError,
    TemplateError,
)
from geadmin.errors.stack import (
    DockerError,
    DockerUnavailableError,
    PortInUseError,
    PythonStubMissingError,
    ServiceNotFoundError,
    StackError,
    TritonBinaryNotFoundError,
    TritonStartError,
)
from geadmin.errors.telemetry import (
    AlertmanagerError,
    FaultTableError,
    MetricsHTTPError,
    MetricsParseError,
    MetricsTimeoutError,
    MetricsUnavailableError,
    MetricsUnreachableError,
    NoRecordedLoadError,
    NpuSmiError,
    NpuSmiParseError,
    NpuSourceError,
    PrometheusError,
    SamplerLockedError,
    TelemetryError,
    TraceFileError,
)
from geadmin.errors.triton import (
    AnswerTooLargeError,
    ConnectionsBusyError,
    Explained,
    ExplainedLoadError,
    ExplainedLoadTimeoutError,
    ExplanationT,
    ForbiddenError,
    LoadFailedError,
    ModelNotFoundError,
    TritonError,
    TritonNotAskedError,
    TritonRequestError,
    TritonTimeoutError,
    TritonUnreachableError,
    WrongProtocolError,
)
from geadmin.errors.tune import (
    TuneBusyError,
    TuneError,
    TuneRefusedError,
    TuneRunNotFoundError,
)
from geadmin.errors.workspace import (
    DatabaseBusyError,
    RunLockHeldError,
    WorkspaceDatabaseError,
    WorkspaceLockError,
)

__all__ = [
    "AccessDeniedError",
    "AccessError",
    "AlertmanagerError",
    "AnswerTooLargeError",
    "BenchBusyError",
    "BenchCancelledError",
    "BenchInputError",
    "BenchSettingsError",
    "ConfigConflictError",
    "ConfigError",
    "ConfigInvalidError",
    "ConfigLockedError",
    "ConfigParseError",
    "ConnectionsBusyError",
    "CreateRefusedError",
    "DatabaseBusyError",
    "DiscoverySourceError",
    "DockerError",
    "DockerUnavailableError",
    "Explained",
    "ExplainedLoadError",
    "ExplainedLoadTimeoutError",
    "ExplanationT",
    "FaultTableError",
    "FleetError",
    "ForbiddenError",
    "GeAdminError",
    "InferInputError",
    "InputTooLargeError",
    "InvalidArgumentError",
    "LoadFailedError",
    "MetricsHTTPError",
    "MetricsParseError",
    "MetricsTimeoutError",
    "MetricsUnavailableError",
    "MetricsUnreachableError",
    "ModelNotFoundError",
    "NoRecordedLoadError",
    "NotAuthorizedError",
    "NpuSmiError",
    "NpuSmiParseError",
    "NpuSourceError",
    "PerfAnalyzerError",
    "PerfAnalyzerMissingError",
    "PerfAnalyzerTimeoutError",
    "PortInUseError",
    "PrometheusError",
    "PythonStubMissingError",
    "RepositoryError",
    "RolloutBusyError",
    "RolloutJournalError",
    "RolloutRefusedError",
    "RunLockHeldError",
    "SamplerLockedError",
    "ServiceNotFoundError",
    "SessionExpiredError",
    "SharedMemoryUnreachableError",
    "SignInBusyError",
    "SignInError",
    "SignInRateLimitedError",
    "SignInTokenError",
    "StackError",
    "TelemetryError",
    "TemplateError",
    "TraceFileError",
    "TritonBinaryNotFoundError",
    "TritonError",
    "TritonNotAskedError",
    "TritonRequestError",
    "TritonStartError",
    "TritonTimeoutError",
    "TritonUnreachableError",
    "TuneBusyError",
    "TuneError",
    "TuneRefusedError",
    "TuneRunNotFoundError",
    "UnstableMeasurementError",
    "UserAccountError",
    "WorkspaceDatabaseError",
    "WorkspaceLockError",
    "WrongProtocolError",
]

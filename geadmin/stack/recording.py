"""One workspace's telemetry recording: the sampler, its probes and geadmin's own metrics.

The sampler (`geadmin.telemetry.history.sampler`, scrape -> history, on a thread holding the
workspace's sampler lock), the watchers it runs after each tick (the prober of one Triton's
READY models, `geadmin.ops.probe`; with `fault_url`, the NPU fault watcher of a server's host,
`geadmin.ops.npu.watch`; and any other, e.g. a fleet's prober) and the endpoint that
serves geadmin's own metrics (`geadmin.telemetry.alerting.exporter`) start and stop together here.
`geadmin sampler` and `geadmin up` both call `Recording`: one wiring, two faces. Each face
decides what a refusal means for it (the CLI exits, `geadmin up` keeps serving without it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from geadmin.errors import PortInUseError
from geadmin.ops.npu.watch import FAULT_EVERY_S, FaultWatcher
from geadmin.ops.npu.wiring import HostFaultSources, current_report
from geadmin.ops.probe import DEFAULT_INTERVAL_S, MIN_INTERVAL_S, PROBE_TIMEOUT_S, Prober
from geadmin.telemetry.alerting.exporter import MetricsEndpoint
from geadmin.telemetry.history.sampler import SamplerOptions, SamplerThread, Watcher
from geadmin.triton.client import TritonClient

Printer = Callable[[str], None]


@dataclass(frozen=True)
class RecordingOptions:
    sampler: SamplerOptions
    probe_url: str | None = None  # the Triton whose READY models are probed each tick; None: none
    admin_key: str | None = None  # for its repository index
    probe_interval_s: float = DEFAULT_INTERVAL_S  # between two probes of one model
    watchers: Sequence[Watcher] = ()  # run after the probes (a fleet's prober)
    watching: str = ""  # what `watchers` watch, for the start-up lines
    metrics_port: int | None = None  # geadmin's own /metrics; None: not served
    metrics_host: str = "127.0.0.1"
    dashboard_url: str = ""  # where geadmin's alerts link
    fault_url: str | None = None  # the Triton whose host's NPU faults are recorded each tick; None: none
    repository: Path | None = None  # the probed Triton's, where trial copies' markers are read


class Recording:
    """Claims the workspace's sampler lock when made (SamplerLockedError: another sampler
    records it), before anything starts; `start` runs the sampler on its thread."""

    def __init__(self, options: RecordingOptions, *, say: Printer = print) -> None:
        self.options = options
        home = options.sampler.home
        # One client per Triton: the probes' and the fault watcher's are one when the URLs are
        # (`geadmin sampler --no-probes` still records the faults).
        self._clients: dict[str, TritonClient] = {}
        probes = ([Prober(self._client(options.probe_url), home=home, interval_s=options.probe_interval_s,
                          repository=options.repository).run] if options.probe_url else [])
        faults = [self._fault_watcher(self._client(options.fault_url)).run] if options.fault_url else []
        try:
            self.sampler = SamplerThread(options.sampler, say=say,
                                         watchers=[*probes, *faults, *options.watchers])
        except BaseException:
            self._close_clients()
            raise
        self.endpoint: MetricsEndpoint | None = None

    def _client(self, url: str) -> TritonClient:
        if url not in self._clients:
            self._clients[url] = TritonClient(url, admin_key=self.options.admin_key,
                                              timeout_s=PROBE_TIMEOUT_S)
        return self._clients[url]

    def _fault_watcher(self, client: TritonClient) -> FaultWatcher:
        opts = self.options.sampler
        sources = HostFaultSources(client, opts.metrics_url, exporter_url=opts.exporter_url,
                                   npu_smi=opts.npu_smi, timeout_s=opts.timeout_s)
        return FaultWatcher(client.url, lambda now_s: current_report(sources, now_s, home=opts.home),
                            home=opts.home)

    def start(self) -> Recording:
        self.sampler.start()
        return self

    def serve_metrics(self) -> str | None:
        """Serve geadmin's metrics when a port is set; its URL (None: not served). PortInUseError
        when the port cannot be bound."""
        opts = self.options
        if opts.metrics_port is None:
            return None
        try:
            self.endpoint = MetricsEndpoint(opts.sampler.home, opts.metrics_port, opts.metrics_host,
                                            dashboard_url=opts.dashboard_url).start()
        except OSError as exc:
            raise PortInUseError(f"geadmin's metrics not served on port {opts.metrics_port}: "
                                 f"{exc.strerror or exc}", opts.metrics_port) from exc
        return self.endpoint.url

    def lines(self) -> list[str]:
        """What runs, for the start-up output of either face."""
        opts, sampler = self.options, self.options.sampler
        said = [f"sampling {sampler.metrics_url} every {sampler.interval_s:g}s into "
                f"{sampler.home / 'geadmin.db'} (kept {sampler.retention_h:g} h)"]
        if opts.probe_url:
            said.append(f"probing the READY models of {opts.probe_url} (each every "
                        f"{max(MIN_INTERVAL_S, opts.probe_interval_s):g}s)")
        if opts.fault_url:
            said.append(f"recording the NPU faults of {opts.fault_url}'s host (every {FAULT_EVERY_S:g}s)")
        if opts.watching:
            said.append(f"probing {opts.watching}")
        if self.endpoint is not None:
            said.append(f"geadmin's metrics at {self.endpoint.url} (probes, model states, objectives)")
        return said

    def alive(self) -> bool:
        return self.sampler.alive()

    def begin_stop(self) -> None:
        """Ask the sampler to end (after the scrape in flight), without waiting."""
        self.sampler.begin_stop()

    def stop(self, timeout_s: float = 6.0) -> None:
        """The sampler (waiting up to `timeout_s`; its lock goes with it), the endpoint, the client."""
        self.sampler.stop(timeout_s=timeout_s)
        if self.endpoint is not None:
            self.endpoint.stop()
            self.endpoint = None
        self._close_clients()

    def _close_clients(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

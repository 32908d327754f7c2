"""A fleet read from a real Prometheus (Debian's) scraping two real tritonservers labelled as
Kubernetes service discovery labels them (pod, node), and an npu-exporter page (recorded
format, served on 127.0.0.1) on one of the nodes: the fleet source sums the servers, each
server is a line of its own, the servers are joined to their node's NPUs, the fleet is
triaged, and the Metrics, NPU and Fleet pages show it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.bottleneck import BottleneckKind
from geadmin.telemetry.history.prometheus import PrometheusHistory
from geadmin.telemetry.history.prometheus_fleet import fleet_bottlenecks, node_map, server_series
from geadmin.telemetry.history.store import Series
from tests.support.http_doubles import serve
from tests.support.processes import TEST_EXIT_TIMEOUT_S
from tests.support.prometheus import PrometheusServer
from tests.support.samples import LOAD_MODEL, copy_samples, send_digits

pytestmark = pytest.mark.integration

MODEL = LOAD_MODEL
FLEET = "fleet:triton"
APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")
EXPORTER_PAGE = Path(__file__).resolve().parents[1] / "unit/assets/telemetry/npu_exporter_synth.txt"


@dataclass
class Lab:
    a: TritonProcess
    b: TritonProcess
    npu_exporter: str
    prometheus: PrometheusServer
    history: PrometheusHistory


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("prometheus_fleet")
    servers = [TritonProcess(copy_samples(root / f"repo{i}"), models=[MODEL],
                             exit_timeout_s=TEST_EXIT_TIMEOUT_S,
                             log_path=root / f"triton{i}.log") for i in range(2)]
    try:
        for server in servers:
            server.start()
        a, b = servers
        with serve(EXPORTER_PAGE.read_bytes()) as exporter:
            labels = {a.metrics_url: {"pod": "triton-0", "node": "node-a"},
                      b.metrics_url: {"pod": "triton-1", "node": "node-b"},
                      exporter: {"node": "node-a"}}
            prometheus = PrometheusServer(root / "prometheus", [a.metrics_url, b.metrics_url],
                                          more_jobs={"npu-exporter": [exporter]}, labels=labels).start()
            try:
                yield Lab(a, b, exporter, prometheus, PrometheusHistory(prometheus.url))
            finally:
                prometheus.stop()
    finally:
        for server in servers:
            server.stop()


def since() -> datetime:
    return datetime.now(timezone.utc) - timedelta(minutes=5)


def busy(lab: Lab, points: int) -> list[Series]:
    """Three times the requests to triton-0 as to triton-1 until each server's line has
    `points` busy points (bounded); returns the per-server lines."""
    deadline = time.monotonic() + 90
    while True:
        send_digits(lab.a.grpc_url, 30)
        send_digits(lab.b.grpc_url, 10)
        lines = server_series(lab.history, FLEET, MODEL, since())
        counts = [len([r for r in s.column("inferences_per_s") if r]) for s in lines]
        if len(lines) == 2 and min(counts) >= points:
            return lines
        assert time.monotonic() < deadline, f"no {points} busy points per server after 90 s: {lines}"


def traffic_in_the_last_minute(lab: Lab) -> None:
    """Requests to both servers until the fleet's last minute has a verdict (bounded)."""
    deadline = time.monotonic() + 90
    while not fleet_bottlenecks(lab.history, FLEET):
        assert time.monotonic() < deadline, "no verdict for the fleet's last minute after 90 s"
        send_digits(lab.a.grpc_url, 20)
        send_digits(lab.b.grpc_url, 20)


def at_common_steps(*series: Series) -> list[int]:
    """Indexes into series[0] at the times every series has a rate."""
    rates = [dict(zip(s.times, s.column("inferences_per_s"), strict=True)) for s in series]
    return [i for i, t in enumerate(series[0].times) if all(r.get(t) is not None for r in rates)]


def by_time(s: Series) -> dict[datetime, dict[str, float | None]]:
    return {t: {name: s.column(name)[i] for name in ("inferences_per_s", "p99_ms")}
            for i, t in enumerate(s.times)}


def test_the_fleet_is_one_source_summing_its_servers_and_each_server_is_a_line(lab: Lab) -> None:
    lines = busy(lab, points=3)
    sources = lab.history.sources()
    assert sources[0].source == FLEET and MODEL in sources[0].models and sources[0].down == ""
    assert {o.source for o in sources[1:]} == {lab.a.metrics_url, lab.b.metrics_url}  # and each server
    [fleet] = lab.history.model_series(FLEET, since(), models=[MODEL])
    by_name = {s.name: s for s in lines}
    assert sorted(by_name) == ["triton-0", "triton-1"]  # named by pod, not host:port
    zero, one = by_name["triton-0"], by_name["triton-1"]
    common = at_common_steps(fleet, zero, one)
    assert common, "no step where the fleet and both servers have a rate"
    zero_at, one_at = by_time(zero), by_time(one)
    for i in common:
        at = fleet.times[i]
        rates = zero_at[at]["inferences_per_s"], one_at[at]["inferences_per_s"]
        assert fleet.column("inferences_per_s")[i] == pytest.approx(sum(r or 0 for r in rates))
        known = [v for v in (zero_at[at]["p99_ms"], one_at[at]["p99_ms"]) if v is not None]
        if known:
            assert fleet.column("p99_ms")[i] == pytest.approx(max(known))  # the worst server's quantile
    # three times the load on triton-0: its line stands apart from its sibling's
    assert sum(r or 0 for r in zero.column("inferences_per_s")) > 1.5 * sum(r or 0 for r in one.column(
        "inferences_per_s"))


def test_servers_are_joined_to_their_nodes_npus_and_the_fleet_is_triaged(lab: Lab) -> None:
    busy(lab, points=1)
    rows = {r.node: r for r in node_map(lab.history)}
    assert set(rows) == {"node-a", "node-b"}
    assert rows["node-a"].npu_sources == (lab.npu_exporter,)
    assert rows["node-a"].servers == ("triton-0",) and rows["node-a"].models == (MODEL,)
    assert rows["node-b"].npu_sources == () and rows["node-b"].servers == ("triton-1",)
    traffic_in_the_last_minute(lab)
    [verdict] = fleet_bottlenecks(lab.history, FLEET)
    assert verdict.model == MODEL and verdict.version == ""
    assert verdict.verdict not in (BottleneckKind.IDLE, BottleneckKind.NO_DATA), verdict
    assert verdict.requests_per_s and verdict.requests_per_s > 0
    with pytest.raises(Exception, match="one server, not a fleet"):
        server_series(lab.history, lab.a.metrics_url, MODEL, since())


def page(name: str, lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AppTest:
    for key in ("SERVERS_FILE", "TRITON_URL", "TRITON_METRICS_URL", "FLEET", "NPU_EXPORTER_URL"):
        monkeypatch.delenv(f"GEADMIN_{key}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEADMIN_PROMETHEUS_URL", lab.prometheus.url)
    monkeypatch.setenv("GEADMIN_TRITON_URLS", f"{lab.a.http_url},{lab.b.http_url}")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(name)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def traces(at: AppTest, title: str) -> list[str]:
    for element in at.get("plotly_chart"):
        figure = json.loads(element.proto.spec)
        if figure["layout"].get("title", {}).get("text", "").startswith(title):
            return [t.get("name", "") for t in figure["data"]]
    raise AssertionError(f"no chart titled {title!r}")


def test_the_pages_show_the_fleet_by_server_by_node_and_its_bottlenecks(
        lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    busy(lab, points=2)
    metrics = page("metrics.py", lab, monkeypatch, tmp_path)
    source = next(s for s in metrics.selectbox if s.label == "Sampled server")
    assert source.value == FLEET  # the fleet first
    assert traces(metrics, "p99 by server") == ["triton-0", "triton-1"]
    assert traces(metrics, "Throughput by server") == ["triton-0", "triton-1"]
    assert not metrics.error, [e.value for e in metrics.error]

    npu = page("npu.py", lab, monkeypatch, tmp_path)
    table = next(d.value for d in npu.dataframe if "Triton servers" in d.value.columns)
    assert table.set_index("node").loc["node-a", "Triton servers"] == "triton-0"
    assert table.set_index("node").loc["node-b", "NPU sources"] == "none scraped"

    traffic_in_the_last_minute(lab)  # the card covers the last minute, and the pages above took time
    fleet = page("fleet.py", lab, monkeypatch, tmp_path)
    assert any(m.value.startswith("**Bottlenecks across the fleet**") for m in fleet.markdown)
    shown = [m.value for m in fleet.markdown]
    assert any(line.startswith(f"**{MODEL}** :") for line in shown), shown  # no " v" for a fleet

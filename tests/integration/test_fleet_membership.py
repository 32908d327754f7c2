"""Membership before keys, end to end: a real Prometheus (Debian's) scrapes, in one job, a real
tritonserver on 127.0.0.1 whose repository API needs the admin key, and a listener posing as a
replica on 127.0.0.2 (tests/support/replica_impostor.py: another "host" on the same ports).
The fleet's sources find both. Whatever geadmin does to the fleet (status, probes, load,
unload, reload, apply, version), the impostor never receives the key; the writes are refused
before anything changes, naming it and the setting that would trust it. With
`trusted_networks = ["127.0.0.1/32"]` the real Triton gets the key and the impostor does not."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.fleet.discovery import discover, fleet_named
from geadmin.fleet.probes import FleetProber
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, isolate, run
from tests.support.processes import TEST_EXIT_TIMEOUT_S, triton_ports_free_on
from tests.support.prometheus import PrometheusServer
from tests.support.replica_impostor import ReplicaImpostor, impostor
from tests.support.samples import LOAD_MODEL, copy_samples
from tests.support.stack import in_process

pytestmark = pytest.mark.integration

KEY = "fleet-s3cret-key"
MODEL = LOAD_MODEL
LOOPBACK_1 = 'trusted_networks = ["127.0.0.1/32"]\n'  # the real Triton's address, not the impostor's


@dataclass
class Lab:
    triton: TritonProcess
    impostor: ReplicaImpostor
    prometheus: PrometheusServer
    home: Path
    root: Path

    def keyed(self) -> TritonClient:
        return TritonClient(self.triton.http_url, admin_key=KEY, timeout_s=30)

    def index(self) -> list[tuple[str, str, str]]:
        with self.keyed() as client:
            return [(m.name, m.version, m.state.value) for m in client.repository_index()]

    def no_key_reached_the_impostor(self) -> None:
        assert self.impostor.carried(KEY) == [], self.impostor.carried(KEY)
        assert not [s for s in self.impostor.requests if "admin-key" in s.headers]
        assert KEY.encode() not in bytes(self.impostor.grpc_bytes)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("membership")
    ports = triton_ports_free_on("127.0.0.2", "127.0.0.1")  # .2 for the impostor, .1 for Triton
    triton = TritonProcess(copy_samples(root / "repo"), ports=ports, models=[MODEL], admin_key=KEY,
                           log_path=root / "triton.log", exit_timeout_s=TEST_EXIT_TIMEOUT_S)
    triton.start()
    try:
        with impostor("127.0.0.2", ports.http, ports.grpc, ports.metrics) as fake:
            prometheus = PrometheusServer(root / "prometheus", [triton.metrics_url, fake.metrics_url],
                                          job="triton", more_jobs={"solo": [triton.metrics_url]}).start()
            try:
                prometheus.wait_for('count(up{job="triton"} == 1) == 2')  # both scraped: both found
                yield Lab(triton, fake, prometheus, root / "home", root)
            finally:
                prometheus.stop()
    finally:
        triton.stop()


@pytest.fixture(scope="module", autouse=True)
def servers_file(lab: Lab) -> Iterator[Path]:
    key_file = lab.root / "fleet.key"
    key_file.write_text(KEY + "\n")
    ports = lab.triton.ports
    source = f"prometheus:{lab.prometheus.url}?job=triton&http_port={ports.http}&grpc_port={ports.grpc}"
    solo = f"prometheus:{lab.prometheus.url}?job=solo&http_port={ports.http}&grpc_port={ports.grpc}"
    common = f'admin_key_file = "{key_file}"\nrepository = "{lab.triton.repository}"\n'
    file = lab.root / "servers.toml"
    file.write_text(
        f'[[server]]\nname = "configured"\nurl = "{lab.triton.http_url}"\nadmin_key_file = "{key_file}"\n\n'
        f'[[fleet]]\nname = "lab"\nsources = ["{source}"]\n{common}\n'
        f'[[fleet]]\nname = "lab-net"\nsources = ["{source}"]\n{common}{LOOPBACK_1}\n'
        f'[[fleet]]\nname = "solo"\nsources = ["{solo}"]\n{common}{LOOPBACK_1}')
    saved = {k: os.environ.get(k) for k in ("GEADMIN_SERVERS_FILE", "GEADMIN_HOME")}
    os.environ.update(GEADMIN_SERVERS_FILE=str(file), GEADMIN_HOME=str(lab.home))
    try:
        yield file
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def status(lab: Lab, fleet: str) -> dict:
    result = in_process("fleet", "status", "--fleet", fleet, "--json", home=lab.home)
    assert "Traceback" not in result.stderr, result.stderr
    return dict(json.loads(result.stdout))


def by_host(document: dict) -> dict[str, dict]:
    return {s["url"].split("//")[1].split(":")[0]: s for s in document["servers"]}


def test_without_a_proof_no_member_gets_the_key_and_the_restricted_triton_still_shows_its_models(
    lab: Lab,
) -> None:
    before = len(lab.impostor.requests)
    document = status(lab, "lab")
    lab.no_key_reached_the_impostor()
    servers = by_host(document)
    assert set(servers) == {"127.0.0.1", "127.0.0.2"}, document
    for server in servers.values():
        assert (server["trust"], server["trusted"]) == ("read-only", False)
        assert server["why"].startswith(
            "no proof configured: set trusted_networks or workload in [[fleet]] 'lab'")
    triton = servers["127.0.0.1"]
    assert triton["problem"] == "", triton  # read from the open endpoints, with no key
    assert document["matrix"] == {MODEL: {triton["name"]: {"state": "READY", "version": "1"},
                                          servers["127.0.0.2"]["name"]: None}}
    assert len(lab.impostor.requests) > before, "the impostor was never polled: the test proves nothing"
    lab.no_key_reached_the_impostor()
    text = in_process("fleet", "status", "--fleet", "lab", home=lab.home).stdout
    assert "read-only — no proof configured" in text and "127.0.0.2" in text


def test_status_of_the_fleet_reads_a_read_only_member_from_its_open_endpoints_with_no_key(lab: Lab) -> None:
    """`geadmin status --fleet`: a member nobody vouched for is judged from what Triton leaves
    open (its models READY, OK), never DEGRADED for the index it may not read, and never keyed."""
    result = in_process("status", "--fleet", "lab", "--json", home=lab.home)
    assert "Traceback" not in result.stderr, result.stderr
    verdicts = {v["url"].split("//")[1].split(":")[0]: v for v in json.loads(result.stdout)}
    triton = verdicts["127.0.0.1"]
    assert "index-unreadable" not in triton["rules"] and triton["verdict"] == "OK", triton
    assert [m["name"] for m in triton["models"] if m["state"] == "READY"] == [MODEL]
    lab.no_key_reached_the_impostor()


def test_the_fleet_prober_sends_no_key_to_a_read_only_member(lab: Lab) -> None:
    prober = FleetProber(fleet_named("lab"), home=lab.home)
    try:
        rounds = {r.server: r for r in prober.run(force=True)}
    finally:
        prober.close()
    assert rounds[lab.triton.http_url].error == ""
    assert [p.model for p in rounds[lab.triton.http_url].probes] == [MODEL]  # found without the index
    assert any(s.path.startswith("/v2/models/stats") for s in lab.impostor.requests)
    lab.no_key_reached_the_impostor()


@pytest.mark.parametrize("command", ["load", "unload", "reload", "apply", "version"])
def test_every_write_that_includes_the_impostor_is_refused_naming_it_before_anything_changes(
    lab: Lab, command: str
) -> None:
    config = lab.triton.repository / MODEL / "config.pbtxt"
    text, index = config.read_bytes(), lab.index()
    args = {"load": [MODEL], "unload": [MODEL], "reload": [MODEL], "version": [MODEL, "2"],
            "apply": [MODEL, str(config)]}[command]
    writes_before = [s for s in lab.impostor.requests if s.method == "POST"]
    result = in_process("fleet", command, *args, "--fleet", "lab-net", "--gate-requests", "0", home=lab.home)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert "refused before anything changed: 1 member(s) not proven to belong" in result.stderr
    assert "(http://127.0.0.2:" in result.stderr
    assert "127.0.0.2 is outside the trusted networks" in result.stderr
    assert "trusted_networks, workload or tls_ca_file in fleet #2 (lab-net)" in result.stderr
    assert config.read_bytes() == text and lab.index() == index
    assert [s for s in lab.impostor.requests if s.method == "POST"] == writes_before
    lab.no_key_reached_the_impostor()


def test_a_trusted_network_gives_the_key_to_the_real_triton_and_never_to_the_impostor(lab: Lab) -> None:
    document = status(lab, "lab-net")
    servers = by_host(document)
    assert (servers["127.0.0.1"]["trust"], servers["127.0.0.1"]["why"]) == (
        "trusted", "127.0.0.1 in trusted network 127.0.0.1/32")
    assert servers["127.0.0.2"]["trust"] == "read-only"
    assert servers["127.0.0.2"]["why"].startswith("127.0.0.2 is outside the trusted networks (127.0.0.1/32)")
    # The repository index (restricted: only the key reads it) lists the models not loaded too.
    assert set(document["matrix"]) == {name for name, _, _ in lab.index()} and len(document["matrix"]) > 1
    members = {m.url: m for m in discover(fleet_named("lab-net")).members}
    assert members[lab.triton.http_url].spec.admin_key == KEY
    assert members[lab.impostor.http_url].spec.admin_key is None
    lab.no_key_reached_the_impostor()


def test_a_fleet_of_trusted_members_only_is_changed_with_the_key(lab: Lab) -> None:
    result = in_process("fleet", "reload", MODEL, "--fleet", "solo", "--gate-requests", "0", home=lab.home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"ROLLOUT DONE: reload {MODEL} on 1 server(s)")
    lab.no_key_reached_the_impostor()


def test_the_fleet_page_says_who_is_trusted_and_why(lab: Lab, servers_file: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, lab.home)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers_file))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("fleet.py")
    run(at)
    next(s for s in at.selectbox if s.label == "Fleet").set_value("lab-net")
    run(at)
    tables = [d.value for d in at.dataframe]
    trust = next((t for t in tables if "trust" in t.columns), None)
    assert trust is not None, ([list(t.columns) for t in tables], [e.value for e in at.error], at.exception)
    rows = {r["server"]: (r["trust"], r["why"]) for r in trust.to_dict("records")}
    by_url = {m.name: m.url for m in discover(fleet_named("lab-net")).members}
    real = next(n for n, u in by_url.items() if u == lab.triton.http_url)
    fake = next(n for n, u in by_url.items() if u == lab.impostor.http_url)
    assert rows[real] == ("trusted", "127.0.0.1 in trusted network 127.0.0.1/32")
    assert rows[fake][0] == "read-only"
    assert rows[fake][1].startswith("127.0.0.2 is outside the trusted networks")
    lab.no_key_reached_the_impostor()
